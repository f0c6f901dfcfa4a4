"""The checks behind the notebooks' exercises (01-03, 06-10) and the registry of every part (WORKSHOP).

Each check takes the learner's answer, raises ExerciseError with one sentence when it is wrong, and
returns or prints one line when it is right. The mechanism (stub -> check -> solution, the fallback
on the notebook's solution while a stub raises TODO) is course_lib/exercise_mechanism.py; notebooks
04 and 05 keep their checks in exercises_tools.py and exercises_tictactoe.py. tests/test_exercises.py
and tests/test_workshop*.py run every check on its stub, its solution and wrong versions.
"""

import math
import random
import time
from pathlib import Path

import numpy as np

from course_lib.evaluation import p_value_text, wilson_interval
from course_lib.exercise_mechanism import (
    STATUS,
    ExerciseError,
    call_part,
    check_fast_on_unclosed_tags,
    is_number,
    not_answered,
    run_check,
    short_repr,
)
from course_lib.exercises_tictactoe import WORKSHOP as TICTACTOE
from course_lib.exercises_tools import WORKSHOP as TOOLS
from course_lib.profiles import PROFILES


def check_format_reward(reward_with_format) -> str:
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
        got = call_part(reward_with_format, reply)
        if not (is_number(got) and math.isclose(got, expected)):
            raise ExerciseError(
                f"reward_with_format({reply!r}) returned {got!r}, expected {expected}. Right number in the tags: "
                "1.0; the tags with anything else inside: 0.2 (the format alone); no tags: 0.0."
            )
    return "reward_with_format: the format now earns 0.2 on its own, so a group of wrong answers can still differ."


def check_wilson(my_wilson) -> str:
    """06: the Wilson score interval, compared with course_lib.evaluation.wilson_interval."""
    for k, n in [(15, 20), (9, 20), (0, 20), (20, 20), (1, 3), (50, 100)]:
        got, expected = call_part(my_wilson, k, n), wilson_interval(k, n)
        if not (np.shape(got) == (2,) and np.allclose(np.asarray(got, dtype=float), expected, atol=1e-6)):
            raise ExerciseError(
                f"my_wilson({k}, {n}) returned {got!r}, expected {tuple(round(x, 4) for x in expected)}. Centre "
                "(p + z²/2n) / (1 + z²/n), half-width z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n), clipped to [0, 1]."
            )
    return "my_wilson matches the harness's interval at 0/n, n/n and in between."


def check_hard_win_filter(keep_hard_win) -> str:
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
        got = call_part(keep_hard_win, game)
        if bool(got) != expected:
            raise ExerciseError(
                f"keep_hard_win({game}) returned {got!r}, expected {expected}: the teacher plays X, so keep "
                "winner == 'X' with random_move_prob at most 0.3."
            )
    return "keep_hard_win keeps only the teacher's wins against strong opponents."


def check_sft_steps(sft_steps) -> str:
    """08: optimizer steps of an SFT run: ceil(epochs × ceil(games / effective batch))."""
    for games, batch, epochs, expected in [
        (196, 8, 2, 50),
        (201, 8, 2, 52),
        (16, 2, 0.25, 2),
        (10, 4, 1, 3),
        (10, 4, 0.5, 2),
    ]:
        got = call_part(sft_steps, games, batch, epochs)
        if got != expected:
            raise ExerciseError(
                f"sft_steps({games}, {batch}, {epochs}) returned {got!r}, expected {expected}. An epoch has "
                "ceil(games / batch) batches (the last one may be short); round up after multiplying by epochs."
            )
    return "sft_steps: 196 games in batches of 8 for 2 epochs is the 50 steps of the cpu run."


def check_advantages(advantages) -> str:
    """09: TRL's group advantages, scale_rewards="group" ((r - mean) / (std + 1e-4)) or "none" (r - mean)."""
    rng = random.Random(0)
    groups = [[1.2, 0.7, 0.2, 0.7], [0.7] * 8, [0.7] * 7 + [0.9], [rng.random() for _ in range(8)]]
    for rewards in groups:
        r = np.array(rewards)
        for scale, expected in [("group", (r - r.mean()) / (r.std(ddof=1) + 1e-4)), ("none", r - r.mean())]:
            got = np.asarray(call_part(advantages, rewards, scale), dtype=float)
            if not (got.shape == r.shape and np.allclose(got, expected, atol=1e-6)):
                raise ExerciseError(
                    f"advantages({[round(x, 3) for x in rewards]}, {scale!r}) returned {np.round(got, 3)}, expected "
                    f"{np.round(expected, 3)}. TRL uses the sample std (ddof=1) and adds 1e-4 before dividing."
                )
    return "advantages: with 'group' a 0.2 format gap becomes an advantage of about 2.5; 'none' keeps it 0.2."


def check_expected_reward(expected_reward) -> str:
    """09: the mean over positions of sum_a pi(a) * reward(a), from log pi (rows, actions) and rewards of the same
    shape, as a tensor the gradient flows through: its value and its gradient against the exact ones."""
    import torch

    generator = torch.Generator().manual_seed(0)
    for rows in (1, 3):
        logits = torch.randn(rows, 10, generator=generator, dtype=torch.float64, requires_grad=True)
        rewards = torch.rand(rows, 10, generator=generator, dtype=torch.float64)
        rewards[:, -1] = -0.1  # "any other token": no move, the invalid-answer penalty
        log_probs = torch.log_softmax(logits, dim=-1)
        exact = (log_probs.exp() * rewards).sum(dim=-1).mean()
        (want,) = torch.autograd.grad(exact, logits, retain_graph=True)
        got = call_part(expected_reward, log_probs, rewards)
        shown = f"expected_reward(log_probs of {rows} position(s), rewards)"
        if not isinstance(got, torch.Tensor) or got.numel() != 1:
            raise ExerciseError(f"{shown} returned {type(got).__name__}; expected one number as a tensor (the loss).")
        if not got.requires_grad:
            raise ExerciseError(
                f"{shown} has no gradient: keep it a tensor computed from log_probs (no .item(), no sampling)."
            )
        if not torch.allclose(got.detach().double(), exact.detach(), atol=1e-6):
            hint = (
                "the negative of it: the loss is -expected_reward"
                if torch.isclose(-got.detach().double(), exact.detach())
                else ("is each action weighted by pi = log_probs.exp(), summed over actions, averaged over positions?")
            )
            raise ExerciseError(f"{shown} = {float(got.detach()):.4f}, expected {float(exact):.4f}: {hint}")
        (grad,) = torch.autograd.grad(got, logits)
        if not torch.allclose(grad.double(), want, atol=1e-6):
            raise ExerciseError(f"{shown} has the right value but not the right gradient: compute it from log_probs.")
    return "expected_reward: the exact expected reward, and with it the exact policy gradient of every cell."


def check_games_needed(games_needed) -> None:
    """10: the fewest games (even number, half of them won) with a 95% Wilson interval under 20 points wide."""
    if games_needed is None:
        print("Not answered yet: set `games_needed` above to the fewest games.")
        return

    def width(n):
        lo, hi = wilson_interval(n // 2, n)
        return hi - lo

    needed = next(n for n in range(2, 10_000, 2) if width(n) < 0.20)
    if games_needed != needed:
        shown = f"{width(games_needed) * 100:.1f} points wide" if is_number(games_needed) and games_needed > 0 else "?"
        raise ExerciseError(
            f"games_needed = {games_needed!r}: that interval is {shown}, or a smaller even n already has "
            "hi - lo < 0.20. Loop over even n with wilson_interval(n // 2, n) and stop at the first under 0.20."
        )
    print(f"Correct: {needed} games per opponent; the cpu profile plays {PROFILES['cpu'].eval.games}.")


# ---------------------------------------------------------------- workshop exercises (notebook 02)

PARSE_CASES = [  # reply, what parse_reversed must return, what the case is
    ("<reversed_text>\n!dlrow ,olleH\n</reversed_text>", "!dlrow ,olleH", "the block on lines of its own"),
    ("Sure! <reversed_text>!dlrow ,olleH</reversed_text> Hope this helps.", "!dlrow ,olleH", "text around the block"),
    ("<reversed_text>\n.owt enil\n.eno enil\n</reversed_text>", ".owt enil\n.eno enil", "a block over two lines"),
    ("<reversed_text>first</reversed_text> <reversed_text>second</reversed_text>", "first", "two blocks"),
    ("<reversed_text></reversed_text>", "", "an empty block (a block: '', not None)"),
    ('<reversed_text>:dias ehs ;"!ih" ?yhw</reversed_text>', ':dias ehs ;"!ih" ?yhw', "the texts' punctuation"),
    ("<reversed_text>2 > 1 dna 3 < 4</reversed_text>", "2 > 1 dna 3 < 4", "< and > inside the block"),
    ("<reversed_text>!ölleh «,ąbąż»</reversed_text>", "!ölleh «,ąbąż»", "letters beyond ASCII"),
    ("!dlrow ,olleH", None, "no tags at all"),
    ("<reversed_text>!dlrow ,olleH", None, "a block that is never closed"),
    ("</reversed_text>!dlrow ,olleH<reversed_text>", None, "the tags the wrong way round"),
]


def check_parse_reversed(parse_reversed) -> str:
    """02, part 1: the first <reversed_text> block, stripped; None without a complete block; fast."""
    for reply, expected, what in PARSE_CASES:
        got = call_part(parse_reversed, reply)
        if got != expected:
            raise ExerciseError(f"parse_reversed: for {what}, {reply!r}, you returned {got!r}; expected {expected!r}.")
    check_fast_on_unclosed_tags(
        parse_reversed,
        "<reversed_text>",
        "A model in training writes such replies; a regular expression's time grows with the square of their "
        "length (a 1 MB reply: hours). Search with str.find, starting after the opening tag.",
    )
    return f"parse_reversed reads the first complete block in {len(PARSE_CASES) + 1} cases, fast on a broken reply."


def _reverse_text():
    import reverse_text  # the course's reference environment

    return reverse_text


def check_lcs_ratio(lcs_ratio) -> str:
    """02, part 2: difflib's matched characters, 2*M / (len(prediction) + len(target)), like the reference."""
    reference = _reverse_text().lcs_ratio
    target = "Hello, world!"[::-1]
    long = next(row["text"] for row in _reverse_text().load_rows() if len(row["text"]) >= 300)[::-1]
    cases = [
        (target, target, "an exact reversal"),
        (target[:-1], target, "a reversal with one character lost"),
        ("Hello, world!", target, "the text not reversed"),
        ("", target, "an empty prediction"),
        ("".join(c for i, c in enumerate(long) if i % 7), long, "a long reversal missing every seventh character"),
    ]
    for prediction, target, what in cases:
        got, expected = call_part(lcs_ratio, prediction, target), reference(prediction, target)
        if not (isinstance(got, (int, float)) and math.isclose(got, expected, abs_tol=1e-9)):
            hint = (
                " difflib ignores frequent characters (spaces, 'e') in texts of 200 or more characters "
                "unless you pass autojunk=False."
                if len(target) >= 200
                else ""
            )
            raise ExerciseError(
                f"lcs_ratio: for {what} (prediction {short_repr(prediction, 40)}, target {short_repr(target, 40)}) "
                f"you returned {got!r}; expected {expected:.4f}.{hint}"
            )
    huge = long[::-1] * 400
    start = time.perf_counter()
    got = call_part(lcs_ratio, huge, long)
    seconds = time.perf_counter() - start
    if seconds > 0.5 or not math.isclose(got, reference(huge, long), abs_tol=1e-9):
        raise ExerciseError(
            f"lcs_ratio: a {len(huge):,}-character reply took {seconds:.1f} s and got {got:.4f} (expected "
            f"{reference(huge, long):.4f} in well under a second): match only its first 10 * len(target) + 100 "
            "characters, and count all of them in the length."
        )
    return "lcs_ratio gives the reference's values, also on long texts and on a 100,000-character reply."


def _completion(reply: str) -> list[dict]:
    return [{"role": "assistant", "content": reply}]


def check_lcs_reward(lcs_reward) -> str:
    """02, part 3: lcs_ratio of the parsed block and the answer; 0.0 without a block."""
    reverse_text = _reverse_text()
    parser = reverse_text.LinearXMLParser(["reversed_text"], answer_field="reversed_text")
    answer = "Hello, world!"[::-1]
    for reply in [
        f"<reversed_text>\n{answer}\n</reversed_text>",
        f"<reversed_text>{answer[:-1]}</reversed_text>",
        f"Sure! <reversed_text>{answer[::-1]}</reversed_text>",
        "<reversed_text></reversed_text>",
        answer,
        "",
    ]:
        got = call_part(lcs_reward, parser=parser, completion=_completion(reply), answer=answer)
        parsed = parser.parse_answer(_completion(reply))
        expected = 0.0 if parsed is None else reverse_text.lcs_ratio(parsed, answer)
        if not (isinstance(got, (int, float)) and math.isclose(got, expected, abs_tol=1e-9)):
            raise ExerciseError(
                f"lcs_reward: for the reply {reply!r} (answer {answer!r}) you returned {got!r}; expected "
                f"{expected:.4f} (parser.parse_answer(completion) is {parsed!r})."
            )
    return "lcs_reward scores the parsed block, and a reply without one gets 0.0."


CHECK_REPLIES = {  # reply kind -> the reply to an item whose target is `answer`
    "exact, in the tag": lambda answer: f"<reversed_text>\n{answer}\n</reversed_text>",
    "one character lost": lambda answer: f"<reversed_text>{answer[1:]}</reversed_text>",
    "chatter around the tag": lambda answer: f"Here: <reversed_text>{answer}</reversed_text> Done.",
    "not reversed": lambda answer: f"<reversed_text>{answer[::-1]}</reversed_text>",
    "empty tag": lambda answer: "<reversed_text></reversed_text>",
    "exact, no tag": lambda answer: answer,
}


def check_make_rubric(make_rubric) -> str:
    """02, part 4: lcs_reward (weight 1.0) and the parser's format reward (weight 0.2)."""
    import verifiers as vf

    from course_lib import workshop

    reverse_text = _reverse_text()
    reference = reverse_text.load_environment(num_eval_examples=3)
    rubric = call_part(make_rubric, reference.parser)
    if not isinstance(rubric, vf.Rubric):
        raise ExerciseError(f"make_rubric(parser) returned {short_repr(rubric)}; expected a vf.Rubric.")
    got = [(getattr(f, "__name__", repr(f)), w) for f, w in zip(rubric.funcs, rubric.weights)]
    if got != [("lcs_reward", 1.0), ("format_reward_func", 0.2)]:
        raise ExerciseError(
            f"make_rubric: your rubric's functions and weights are {got}; expected lcs_reward with weight 1.0 "
            "and parser.get_format_reward_func() (named format_reward_func) with weight 0.2."
        )
    mine = vf.SingleTurnEnv(eval_dataset=reference.get_eval_dataset(), parser=reference.parser, rubric=rubric)
    workshop.same_rewards(mine, reference, CHECK_REPLIES, "make_rubric", "your rubric", ".")
    return "make_rubric: your rubric scores like the reference, lcs_reward + 0.2 × format."


def check_load_environment(load_environment) -> str:
    """02, part 5: the same evaluation rows as the reference for a seed, a SingleTurnEnv that scores alike."""
    import verifiers as vf

    from course_lib import workshop

    reference = _reverse_text().load_environment(num_eval_examples=5, seed=1)
    call = "load_environment(num_eval_examples=5, seed=1)"
    env = call_part(load_environment, num_eval_examples=5, seed=1)
    if not isinstance(env, vf.SingleTurnEnv):
        raise ExerciseError(f"{call} returned {short_repr(env)}; expected a vf.SingleTurnEnv.")
    mine = [(row["question"], row["answer"]) for row in env.get_eval_dataset()]
    for question, answer in mine:
        if answer != question[::-1]:
            raise ExerciseError(
                f"{call}: the answer of {short_repr(question, 40)} is {short_repr(answer, 40)}; "
                "expected the question reversed, question[::-1]."
            )
    expected = [(row["question"], row["answer"]) for row in reference.get_eval_dataset()]
    if mine != expected:
        raise ExerciseError(
            f"{call}: your evaluation set starts with {short_repr(mine[0][0] if mine else None, 50)}, the reference's "
            f"with {short_repr(expected[0][0], 50)}. Split the rows with Dataset.train_test_split(test_size="
            "num_eval_examples, seed=seed) and evaluate on its 'test' part."
        )
    train = env.get_dataset()
    if train is None or len(train) != len(reference.get_dataset()) or set(train["question"]) & {q for q, _ in mine}:
        raise ExerciseError(
            f"{call}: the training set has {0 if train is None else len(train)} rows; expected the "
            f"{len(reference.get_dataset())} rows that are not in the evaluation set."
        )
    small = call_part(load_environment, num_train_examples=3, num_eval_examples=5, seed=1).get_dataset()
    if len(small) != 3:
        raise ExerciseError(f"load_environment(num_train_examples=3, ...) has {len(small)} training rows; expected 3.")
    system = env.get_eval_dataset()[0]["prompt"][0]
    if system["role"] != "system" or "<reversed_text>" not in system["content"]:
        raise ExerciseError(
            f"{call}: the prompt starts with {short_repr(system)}; expected the system prompt, which tells "
            "the model to answer inside <reversed_text> tags (pass system_prompt= to vf.SingleTurnEnv)."
        )
    hint = ": do you pass your parser and rubric to vf.SingleTurnEnv?"
    workshop.same_rewards(env, reference, CHECK_REPLIES, call, "your environment", hint)
    workshop.same_arguments(env, reference, call)
    return "load_environment: the reference's rows for a seed, and the same rewards for the same replies."


def check_noise_floor(answer) -> None:
    """02, experiment: the share of replaced characters at which a damaged reversal scores like an
    unrelated paragraph (the noise floor), read from the plot; within 0.1."""
    import reverse_text

    if answer is None:
        print("Not answered yet: read the share off the plot and set `answer` above.")
        return
    share = noise_floor_share(reverse_text.lcs_ratio)
    if not (isinstance(answer, (int, float)) and abs(answer - share) <= 0.1):
        raise ExerciseError(
            f"the noise floor: {answer!r} is not it. With damage = 'replace', read the share where the blue "
            "curve crosses the grey line in the middle of the band (a number between 0 and 1)."
        )
    print(
        f"Correct: about {share:.2f}. A reply with more than {share:.0%} of its characters wrong scores like an "
        "unrelated paragraph: below that line, the reward's 'partial credit' says nothing."
    )


def damage_text(text: str, share: float, damage: str, rng) -> str:
    """`text` with each character, with probability `share`, replaced by a random letter or dropped."""
    keep = rng.random(len(text)) >= share
    if damage == "drop":
        return "".join(c for c, k in zip(text, keep) if k)
    return "".join(c if k else chr(rng.integers(97, 123)) for c, k in zip(text, keep))


def noise_floor_share(lcs_ratio, damage: str = "replace", texts: int = 40) -> float:
    """Where the mean reward of damaged reversals falls to the mean reward of an unrelated paragraph."""
    import reverse_text

    rng = np.random.default_rng(0)
    targets = [row["text"][::-1] for row in reverse_text.load_rows()[: texts + 1]]
    floor = np.mean([lcs_ratio(other, target) for other, target in zip(targets[1:], targets)])
    for share in np.linspace(0, 1, 51):
        if np.mean([lcs_ratio(damage_text(t, share, damage, rng), t) for t in targets[:texts]]) <= floor:
            return float(share)
    return 1.0


# ---------------------------------------------------------------- workshop exercises (notebook 03)


def _double_check():
    import double_check  # the course's reference environment

    return double_check


def check_double_check_env(env_class) -> str:
    """03, part 1: setup_state puts first_answer in the state, env_response stores the first answer and
    asks "Are you sure?" (and changes nothing after the end), @vf.stop answered_twice ends the rollout."""
    import verifiers as vf

    from course_lib.offline import run_coroutine
    from course_lib.workshop import Scripted

    double_check = _double_check()
    reference = double_check.load_environment(num_eval_examples=3)
    env = call_part(
        env_class,
        eval_dataset=reference.get_eval_dataset(),
        system_prompt=double_check.SYSTEM_PROMPT,
        parser=reference.parser,
        rubric=reference.rubric,
        max_turns=4,  # without a working stop condition the rollout ends here, not never
    )
    row = reference.get_eval_dataset()[0]
    right, wrong = row["answer"], str(int(row["answer"]) + 1)
    first, second = f"It is \\boxed{{{right}}}.", f"Sorry, it is \\boxed{{{wrong}}}."

    async def play():
        fresh = await env.init_state(dict(row), Scripted("x"), "scripted", {})
        fresh = await env.setup_state(fresh) or fresh
        if "first_answer" not in fresh or fresh["first_answer"] is not None:
            raise ExerciseError(
                f"setup_state: the new state has first_answer = {fresh.get('first_answer', 'no such key')!r}; "
                "expected None (env_response fills it in after the first reply)."
            )
        state = await env.rollout(dict(row), Scripted([first, second, "\\boxed{0}"]), "scripted", {})
        answers = [m for m in state["completion"] if m["role"] == "assistant"]
        asked = [m["content"] for m in state["completion"] if m["role"] == "user"]
        if len(answers) != 2 or state["stop_condition"] != "answered_twice":
            raise ExerciseError(
                f"answered_twice: the model answered {len(answers)} time(s) and the rollout stopped by "
                f"{state['stop_condition']!r}; expected 2 answers, stopped by answered_twice (True once "
                "len(state['trajectory']) >= 2)."
            )
        if asked != [double_check.ARE_YOU_SURE]:
            raise ExerciseError(
                f"env_response: after the first answer the environment said {asked}; expected "
                f"[{double_check.ARE_YOU_SURE!r}] (return [vf.UserMessage(content=ARE_YOU_SURE)])."
            )
        if state["first_answer"] != right:
            raise ExerciseError(
                f"env_response: after the first reply {first!r}, state['first_answer'] is "
                f"{state['first_answer']!r}; expected {right!r} (self.parser.parse_answer(messages))."
            )
        before = {k: repr(v) for k, v in state.items() if k not in ("client", "timing", "trajectory")}
        late = [*state["prompt"], *state["completion"], vf.AssistantMessage(content="\\boxed{12345}")]
        try:
            await env.env_response(late, state)
        except Exception:
            pass  # refusing a reply after the end is fine; changing the state is not
        changed = [k for k, v in state.items() if k in before and repr(v) != before[k]]
        if changed:
            raise ExerciseError(
                f"env_response: a reply sent after the second answer changed state{changed}; a finished "
                "rollout must not change (when len(state['trajectory']) > 1, return a message and nothing else)."
            )

    run_coroutine(play())
    return (
        "DoubleCheckEnv: the state starts with first_answer None, then holds the first answer; one "
        "'Are you sure?'; stopped by answered_twice after two answers; nothing changes after the end."
    )


def check_changed_share(answer, table) -> None:
    """03, experiment: the share of rollouts whose answer changed, read off the figure (within 0.05)."""
    share = float(table.changed_answer.mean())
    if answer is None:
        print("Not answered yet: read the share off the left panel and set `answer` above.")
        return
    if not (isinstance(answer, (int, float)) and abs(answer - share) <= 0.05):
        raise ExerciseError(
            f"the changed answers: {answer!r} is not it. Add up the three 'changed' bars of the left panel and "
            f"divide by the {len(table)} rollouts (a number between 0 and 1)."
        )
    print(f"Correct: {share:.0%} of the {len(table)} rollouts changed their answer after the question.")


def check_triple_check_env(env_class) -> str:
    """03, part 3: three answers, a different follow-up before the third, and a new @vf.stop that ends it."""
    from datasets import Dataset

    from course_lib.offline import run_coroutine
    from course_lib.workshop import Scripted

    double_check = _double_check()
    rows = Dataset.from_list([double_check.to_example(row) for row in double_check.load_rows()[:1]])
    env = call_part(
        env_class, eval_dataset=rows, system_prompt=double_check.SYSTEM_PROMPT, parser=double_check.PARSER, max_turns=5
    )
    replies = Scripted(["\\boxed{1}", "\\boxed{2}", "\\boxed{3}", "\\boxed{4}"])
    state = run_coroutine(env.rollout(env.get_eval_dataset()[0], replies, "scripted", {}))
    roles = [m["role"] for m in state["completion"]]
    asked = [m["content"] for m in state["completion"] if m["role"] == "user"]
    if roles.count("assistant") != 3:
        raise ExerciseError(
            f"TripleCheckEnv: the model answered {roles.count('assistant')} times, expected 3. Is the inherited "
            "@vf.stop answered_twice still active? A stop condition is found by its decorator: override "
            "answered_twice with a plain method that returns False, and add your own @vf.stop for three answers."
        )
    if state["stop_condition"] == "answered_twice":
        raise ExerciseError("TripleCheckEnv: the rollout stopped by answered_twice; add your own @vf.stop.")
    second = asked[1] if len(asked) == 2 else ""
    if (
        roles != ["assistant", "user"] * 2 + ["assistant"]
        or asked[0] != double_check.ARE_YOU_SURE
        or not (isinstance(second, str) and second.strip() and second != asked[0])
    ):
        raise ExerciseError(
            f"TripleCheckEnv: the conversation after the question was {roles} with the follow-ups {asked}; expected "
            f"answer, {double_check.ARE_YOU_SURE!r}, answer, one different question, answer, and nothing else."
        )
    return f"TripleCheckEnv: three answers; follow-ups {asked}; stopped by {state['stop_condition']}."


def check_final_answer(final_answer) -> str:
    """03, part 2: the last reply's answer; the first answer (from the state) when it has none."""
    double_check = _double_check()
    cases = [
        (["\\boxed{7}", "Yes, \\boxed{8}."], "7", "two answers"),
        (["\\boxed{7}", "Yes, I'm sure."], "7", "a second reply without a number"),
        (["I don't know.", "Still no idea."], None, "no number at all"),
        (["\\boxed{7}", "Let me recompute: 3 + 4 = 7, so \\boxed{7}, not 8."], "7", "\\boxed{} and other numbers"),
        (["about 12", "It is 1,200 apples."], "12", "a number written with a comma"),
    ]
    for texts, first, what in cases:
        completion = [
            m for t in texts for m in ({"role": "assistant", "content": t}, {"role": "user", "content": "?"})
        ][:-1]
        state = {"first_answer": first}
        got, expected = call_part(final_answer, completion, state), double_check.final_answer(completion, state)
        if got != expected:
            raise ExerciseError(
                f"final_answer: for {what}, replies {texts} and state['first_answer'] = {first!r}, you returned "
                f"{got!r}; expected {expected!r}."
            )
    return "final_answer reads the last reply, and falls back on the first answer kept in the state."


# ---------------------------------------------------------------- experiments of notebooks 06, 07, 09 and 10
# The learner changes one setting, runs the cell, reads the plot and writes what it shows into `answer`.
# While `answer` is None the check says "not answered yet" and the notebook runs on ("Run All", CI).
# Each check says in one sentence whether the reading is right and why. Tests: tests/test_experiments.py.


def wald_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The textbook interval p ± z·sqrt(p(1-p)/n) (notebook 06's `wald`)."""
    p = k / n
    half = z * math.sqrt(p * (1 - p) / n)
    return p - half, p + half


def interval_coverage(interval, games: int, rate: float) -> float:
    """How often `interval(k, games)` contains `rate` when k ~ Binomial(games, rate): exact, no sampling."""
    total = 0.0
    for k in range(games + 1):
        low, high = interval(k, games)
        if low <= rate <= high:
            log_pmf = math.lgamma(games + 1) - math.lgamma(k + 1) - math.lgamma(games - k + 1)
            total += math.exp(log_pmf + k * math.log(rate) + (games - k) * math.log1p(-rate))
    return total


def check_wald_coverage(answer) -> None:
    """06, experiment: with games = 20, how often the Wald interval contains a true rate of 5% (within 0.06)."""
    if not_answered(answer, "with games = 20, read the Wald curve at the dotted line (a true rate of 5%)"):
        return
    right, at_100 = interval_coverage(wald_interval, 20, 0.05), interval_coverage(wald_interval, 100, 0.05)
    if is_number(answer) and abs(answer - at_100) <= 0.02 and abs(answer - right) > 0.06:
        raise ExerciseError(
            f"{answer} is the Wald coverage with 100 games; set games = 20 and run the plot cell again."
        )
    if not (is_number(answer) and abs(answer - right) <= 0.06):
        raise ExerciseError(
            f"the Wald coverage: {answer!r} is not it. With games = 20, read the height of the orange (Wald) curve "
            "where it meets the dotted line at a true rate of 5% (a share between 0 and 1)."
        )
    wilson = interval_coverage(wilson_interval, 20, 0.05)
    print(
        f"Correct: about {right:.2f}. With 20 games a '95%' Wald interval misses a 5% rate "
        f"{1 - right:.0%} of the time (mostly 0 of 20: the zero-width interval [0, 0]); "
        f"Wilson's covers it {wilson:.0%}."
    )


def strong_opponent_games(games, max_random_move_prob: float):
    """The SFT games (rows with `random_move_prob` and `result`) against opponents at most this random."""
    return [g for g in games if g["random_move_prob"] <= max_random_move_prob]


def check_strong_opponent_draws(answer) -> None:
    """07, experiment: the share of draws among the shipped games against opponents with
    random_move_prob <= 0.3 (data/tictactoe_sft), read off the bar; within 0.05."""
    from course_lib import sft

    if not_answered(answer, "with max_random_move_prob = 0.3, read the draws' share of the lower bar"):
        return
    shipped = sft.load_dataset().to_list()
    kept = strong_opponent_games(shipped, 0.3)
    right = sum(g["result"] == "draw" for g in kept) / len(kept)
    everything = sum(g["result"] == "draw" for g in shipped) / len(shipped)
    if is_number(answer) and abs(answer - everything) <= 0.02:
        raise ExerciseError(
            f"{answer} is the draws' share of all {len(shipped)} games (the upper bar); read the lower bar, "
            "the games with max_random_move_prob <= 0.3."
        )
    if not (is_number(answer) and abs(answer - right) <= 0.05):
        raise ExerciseError(
            f"the draws' share: {answer!r} is not it. With max_random_move_prob = 0.3, read where the grey (draw) part "
            "of the lower bar ends (a share between 0 and 1)."
        )
    print(
        f"Correct: about {right:.2f} of the {len(kept)} games against strong opponents are draws (of all "
        f"{len(shipped)}: {everything:.2f}): data from strong opponents teaches the student to defend, not to win."
    )


CONFIRMATION_GAMES = Path(__file__).resolve().parent.parent / "data" / "grpo_sweep_cpu" / "confirm_seed2" / "games.csv"


def first_games(games, n: int):
    """The first `n` games per player and opponent, in the order of their example_id (the same games for both)."""
    games = games.sort_values("example_id", kind="stable")
    return games[games.groupby(["player", "opponent"]).cumcount() < n]


def invalid_answer_p_value(games, n: int) -> float:
    """McNemar's p of 'a game with an invalid answer', start vs after GRPO, both opponents, first n games each."""
    from course_lib.evaluation import paired_comparison

    table = paired_comparison(first_games(games, n), "start", "after GRPO", outcomes=("invalid answer",))
    return float(table.set_index("opponent").loc["both", "p_value"])


def check_games_to_confirm(answer) -> None:
    """10, experiment: the fewest games per opponent (a multiple of 50) at which the recorded drop in
    games with an invalid answer is confirmed (McNemar p < 0.01), on the first games of seed 2."""
    import pandas as pd

    if not_answered(answer, "read p after each 50 games in the right panel, or raise games by 50 at a time"):
        return
    games = pd.read_csv(CONFIRMATION_GAMES)
    p = {n: invalid_answer_p_value(games, n) for n in range(50, 301, 50)}
    right = min(n for n, value in p.items() if value < 0.01)
    if answer != right:
        shown = (
            f"with {answer} games p = {p_value_text(p[answer])}"
            if answer in p
            else "the setting goes 50, 100, ..., 300"
        )
        raise ExerciseError(
            f"the games needed: {answer!r} is not it ({shown}). Find the smallest multiple of 50 whose p, in the "
            "right panel, is below 0.01."
        )
    print(
        f"Correct: {right} games per opponent (p = {p_value_text(p[right])}); with {right - 50}, "
        f"p = {p_value_text(p[right - 50])}. A real "
        "halving of invalid answers needed hundreds of games to be told from luck, and p does not fall steadily."
    )


WORKSHOP = {  # part -> (the notebook whose solution block defines it, its check)
    "reward_with_format": ("01_rl_concepts.ipynb", check_format_reward),
    "my_wilson": ("06_evaluate_models.ipynb", check_wilson),
    "keep_hard_win": ("07_sft_data_generation.ipynb", check_hard_win_filter),
    "sft_steps": ("08_sft_warmup.ipynb", check_sft_steps),
    "advantages": ("09_grpo_training.ipynb", check_advantages),
    "expected_reward": ("09_grpo_training.ipynb", check_expected_reward),
    "parse_reversed": ("02_single_turn_env.ipynb", check_parse_reversed),
    "lcs_ratio": ("02_single_turn_env.ipynb", check_lcs_ratio),
    "lcs_reward": ("02_single_turn_env.ipynb", check_lcs_reward),
    "make_rubric": ("02_single_turn_env.ipynb", check_make_rubric),
    "load_environment": ("02_single_turn_env.ipynb", check_load_environment),
    "DoubleCheckEnv": ("03_multi_turn_env.ipynb", check_double_check_env),
    "final_answer": ("03_multi_turn_env.ipynb", check_final_answer),
    "TripleCheckEnv": ("03_multi_turn_env.ipynb", check_triple_check_env),
}
assert not (WORKSHOP.keys() & TOOLS.keys()) and not (WORKSHOP.keys() & TICTACTOE.keys()), "part names are unique"
WORKSHOP |= TOOLS | TICTACTOE


def check(part):
    """A notebook's check cell, `<name> = exercises.check(<name>)`: the part's check from WORKSHOP, run by
    exercise_mechanism.run_check; returns the part, or the notebook's solution while the stub is TODO."""
    return run_check(part, *WORKSHOP[part.__name__])


def report() -> None:
    """Which parts are the learner's and which the solution's."""
    for name, used in STATUS.items():
        print(f"{name:<20} {'not done yet: the solution was used' if used == 'the solution' else used}")
