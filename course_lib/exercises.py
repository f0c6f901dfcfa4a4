"""Checks for the notebooks' exercises, one per notebook 01-10.

Each check takes the learner's answer, raises AssertionError with a hint when it is wrong, and
prints one line when it is right. tests/test_exercises.py runs every check on the solution
stored in its notebook and on a wrong answer.
"""

import math
import random

import numpy as np

from course_lib.evaluation import wilson_interval
from course_lib.profiles import PROFILES


def _ok(text: str) -> None:
    print(f"Correct: {text}")


def check_format_reward(reward) -> None:
    """01: 1.0 for 391 inside <answer></answer>, 0.2 for anything else inside the tags, 0.0 without them."""
    cases = {
        "<answer>391</answer>": 1.0,
        "So: <answer> 391 </answer>": 1.0,
        "<answer>401</answer>": 0.2,
        "<answer>about 400</answer>": 0.2,
        "The answer is 391.": 0.0,
        "391": 0.0,
    }
    for reply, expected in cases.items():
        got = reward(reply)
        assert math.isclose(got, expected), (
            f"reward({reply!r}) returned {got}, expected {expected}. Right number in the tags: 1.0; "
            "the tags with anything else inside: 0.2 (the format alone); no tags: 0.0."
        )
    _ok("the format now earns 0.2 on its own, so a group of wrong answers can still differ.")


def check_exact_match(exact_match_reward) -> None:
    """02: 1.0 when the <reversed_text> block equals the answer (surrounding whitespace ignored), else 0.0."""
    import verifiers as vf

    parser = vf.XMLParser(["reversed_text"], answer_field="reversed_text")
    answer = ".tac eht"
    cases = [
        ("<reversed_text>\n.tac eht\n</reversed_text>", 1.0, "an exact reversal"),
        ("<reversed_text>.tac eht</reversed_text>", 1.0, "an exact reversal without newlines"),
        ("<reversed_text>\n.tac eh\n</reversed_text>", 0.0, "one character missing"),
        ("<reversed_text>\n.TAC EHT\n</reversed_text>", 0.0, "a different case"),
        (".tac eht", 0.0, "no <reversed_text> block"),
    ]
    for text, expected, what in cases:
        completion = [{"role": "assistant", "content": text}]
        got = exact_match_reward(parser=parser, completion=completion, answer=answer)
        assert got == expected, (
            f"{what}: got {got}, expected {expected}. Use parser.parse_answer(completion) (None without "
            "the block), strip the whitespace, and compare with the answer exactly."
        )
    _ok("exact matches score 1.0; everything else, even one character off, scores 0.0.")


async def check_third_turn(env_class) -> None:
    """03: three answers, a different follow-up before the third, and a new @vf.stop that ends it."""
    from datasets import Dataset

    import double_check
    from course_lib.offline import OfflineClient

    class Replies(OfflineClient):
        def __init__(self):
            super().__init__()
            self.replies = ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}", "\\boxed{4}"]

        def respond(self, prompt, **kwargs):
            return self.replies.pop(0)

    rows = Dataset.from_list([double_check.to_example(row) for row in double_check.load_rows()[:1]])
    env = env_class(eval_dataset=rows, system_prompt=double_check.SYSTEM_PROMPT, parser=double_check.PARSER)
    state = await env.rollout(env.get_eval_dataset()[0], Replies(), "scripted", {})
    roles = [m["role"] for m in state["completion"]]
    asked = [m["content"] for m in state["completion"] if m["role"] == "user"]
    assert roles.count("assistant") == 3, (
        f"the model answered {roles.count('assistant')} times, expected 3. Is the inherited @vf.stop "
        "answered_twice still active? A stop condition is found by its decorator: override answered_twice "
        "with a plain method that returns False, and add your own @vf.stop for three answers."
    )
    assert len(asked) == 2 and asked[0] != asked[1], (
        f"the follow-ups were {asked}: ask 'Are you sure?' after the first answer and a different "
        "question after the second (env_response can count the trajectory to know which turn it is)."
    )
    assert state["stop_condition"] != "answered_twice" and state["stop_condition"] in {
        c.__name__ for c in env._stop_conditions
    }, f"the rollout stopped by {state['stop_condition']!r}"
    _ok(f"three answers; follow-ups {asked}; stopped by {state['stop_condition']}.")


def check_word_count_tool(tool) -> None:
    """04: a tool that counts a section's words and answers a bad argument with a helpful error."""
    import wiki_search

    page = next(iter(wiki_search.load_pages().values()))
    section = page["sections"][0]
    words = len(section["text"].split())
    answer = tool(page["page_id"], section["section_id"])
    assert isinstance(answer, str) and str(words) in answer, (
        f"{page['page_id']}/{section['section_id']} has {words} words; the tool returned {answer!r}."
    )
    for args, must_name, what in [
        (("no-such-page", section["section_id"]), "search_pages", "an unknown page"),
        ((page["page_id"], "no-such-section"), section["section_id"], "an unknown section"),
    ]:
        try:
            answer = tool(*args)
        except Exception as error:
            raise AssertionError(
                f"{what} raised {error!r}: a tool should return an error text the "
                "model can read and act on, never raise."
            ) from None
        assert isinstance(answer, str) and answer.startswith("Error") and must_name in answer, (
            f"{what}: the tool returned {answer!r}. Start with 'Error' and say what to do next: "
            f"for a page, name search_pages; for a section, list the page's section ids."
        )
    _ok("right count, and every bad argument gets an error that says what to call next.")


def check_penalty_threshold(threshold: float) -> None:
    """05: the smallest penalty at which a win with one untagged answer scores below a clean draw."""
    import tictactoe as ttt

    def reward_before_penalty(state):
        return sum(w * f(state) for f, w in ttt.REWARD_WEIGHTS.items() if f is not ttt.any_invalid_move)

    slip = reward_before_penalty(dict(winner="X", model_turns=5, well_formed_turns=4, invalid_moves=1))
    draw = reward_before_penalty(dict(winner="draw", model_turns=4, well_formed_turns=4, invalid_moves=0))
    assert math.isclose(threshold, slip - draw, abs_tol=0.005), (
        f"{threshold} is not it. Without the penalty the win with a slip scores {slip:.2f} (win 1 + "
        f"0.2 × 4/5 well-formed answers) and the clean draw {draw:.2f}: the penalty must exceed the gap."
    )
    _ok(f"above {slip - draw:.2f} an illegal move costs more than the difference between a win and a draw.")


def check_wilson(interval) -> None:
    """06: the Wilson score interval, compared with course_lib.evaluation.wilson_interval."""
    for k, n in [(15, 20), (9, 20), (0, 20), (20, 20), (1, 3), (50, 100)]:
        got, expected = interval(k, n), wilson_interval(k, n)
        assert np.allclose(got, expected, atol=1e-6), (
            f"{k} of {n}: got {tuple(round(x, 4) for x in got)}, expected {tuple(round(x, 4) for x in expected)}. "
            "Centre (p + z²/2n) / (1 + z²/n), half-width z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n)."
        )
    _ok("your interval matches the harness's at 0/n, n/n and in between.")


def check_hard_win_filter(keep) -> None:
    """07: keep only games the teacher won against a mostly optimal opponent (random_move_prob <= 0.3)."""
    cases = [
        (dict(winner="X", random_move_prob=0.2), True),
        (dict(winner="X", random_move_prob=0.3), True),
        (dict(winner="X", random_move_prob=0.31), False),
        (dict(winner="draw", random_move_prob=0.1), False),
        (dict(winner="O", random_move_prob=0.0), False),
        (dict(winner=None, random_move_prob=0.1), False),
    ]
    for game, expected in cases:
        game = dict(game, invalid_moves=0, model_turns=3, well_formed_turns=3)
        assert bool(keep(game)) == expected, (
            f"keep({game}) returned {keep(game)}, expected {expected}: the teacher plays X, so keep "
            "winner == 'X' with random_move_prob at most 0.3."
        )
    _ok("only the teacher's wins against strong opponents are kept.")


def check_sft_steps(steps) -> None:
    """08: optimizer steps of an SFT run: ceil(epochs × ceil(games / effective batch))."""
    for games, batch, epochs, expected in [(196, 8, 2, 50), (201, 8, 2, 52), (16, 2, 0.25, 2), (10, 4, 1, 3)]:
        got = steps(games, batch, epochs)
        assert got == expected, (
            f"{games} games, batch {batch}, {epochs} epochs: got {got}, expected {expected}. An epoch has "
            "ceil(games / batch) batches (the last one may be short); round up after multiplying by epochs."
        )
    _ok("196 games in batches of 8 for 2 epochs is the 50 steps of the cpu run.")


def check_advantages(advantages) -> None:
    """09: TRL's group advantages, scale_rewards="group" ((r - mean) / (std + 1e-4)) or "none" (r - mean)."""
    rng = random.Random(0)
    groups = [[1.2, 0.7, 0.2, 0.7], [0.7] * 8, [0.7] * 7 + [0.9], [rng.random() for _ in range(8)]]
    for rewards in groups:
        r = np.array(rewards)
        for scale, expected in [("group", (r - r.mean()) / (r.std(ddof=1) + 1e-4)), ("none", r - r.mean())]:
            got = np.asarray(advantages(rewards, scale), dtype=float)
            assert got.shape == r.shape and np.allclose(got, expected, atol=1e-6), (
                f"rewards {rewards}, scale_rewards={scale!r}: got {np.round(got, 3)}, expected "
                f"{np.round(expected, 3)}. TRL uses the sample std (ddof=1) and adds 1e-4 before dividing."
            )
    _ok("with scale_rewards='group' a 0.2 format gap becomes an advantage of about 2.5; 'none' keeps it 0.2.")


def check_games_needed(games: int) -> None:
    """10: the fewest games (even number, half of them won) with a 95% Wilson interval under 20 points wide."""

    def width(n):
        lo, hi = wilson_interval(n // 2, n)
        return hi - lo

    needed = next(n for n in range(2, 10_000, 2) if width(n) < 0.20)
    assert games == needed, (
        f"with {games} games the interval is {width(games) * 100:.1f} points wide; look for the smallest "
        "even n with hi - lo < 0.20, e.g. with a loop over wilson_interval(n // 2, n)."
    )
    _ok(f"{needed} games per opponent; the cpu profile plays {PROFILES['cpu'].eval.games}.")
