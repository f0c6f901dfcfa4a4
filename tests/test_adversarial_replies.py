"""No reply can crash or stall scoring: the regressions of issue 20, item 2.

Each test names the reply that broke the course before: quadratic or cubic regexes on unclosed
tags (verifiers' `<tag>\\s*(.*?)\\s*</tag>`), int() on a 5,000-digit move, difflib on a 1 MB
answer, an exception in env_response that aborted a whole evaluation, and moves accepted after
the game was over. The time bounds are 10-100 times the new code's time on 2 busy cores, and
far below the old code's (given in each test).
"""

import asyncio
import time

import pytest
import verifiers as vf

import double_check
import reverse_text
import tictactoe
from course_lib.play import Game, IllegalMove, expert_answer
from course_lib.rewards import reward_functions
from course_lib.scripted_client import ScriptedClient
from tictactoe import LinearXMLParser, tag_contents
from tictactoe.game import new_board


def run(coro):
    return asyncio.run(coro)


def seconds(function, *args):
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def assistant(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


MOVE_PARSER = tictactoe.MoveParser()
REVERSE_ENV = reverse_text.load_environment(num_eval_examples=5)
LCS_REWARD, FORMAT_REWARD = [reward.func for reward in reward_functions(REVERSE_ENV)[:2]]


def test_whitespace_after_an_unclosed_move_tag_is_judged_fast():
    """Catches: "<move>" + 3,200 newlines took 15.6 s to judge (cubic backtracking)."""
    reply = "<move>" + "\n" * 3_200
    assert seconds(MOVE_PARSER.judge, reply, new_board()) < 1
    assert MOVE_PARSER.judge("<move>" + "\n" * 1_000_000, new_board()) == (None, "no <move>N</move> tag found")


def test_reverse_text_format_reward_is_fast_on_an_unclosed_tag():
    """Catches: verifiers' format reward taking 31 s on "<reversed_text>" + 3,200 newlines."""
    assert seconds(FORMAT_REWARD, assistant("<reversed_text>" + "\n" * 3_200)) < 1


def test_reverse_text_similarity_is_fast_on_a_1_mb_answer():
    """Catches: difflib comparing a whole 1 MB answer with the target (about 8 s; minutes for some texts)."""
    target = REVERSE_ENV.eval_dataset[0]["answer"]
    reply = assistant("<reversed_text>" + "e " * 500_000 + "</reversed_text>")
    assert seconds(LCS_REWARD, reply, target) < 2
    assert LCS_REWARD(reply, target) < 2 * len(target) / 1_000_000


def test_double_check_is_fast_on_a_repeated_unclosed_answer_tag():
    """Catches: re.findall(r"<answer>(.*?)</answer>") taking 7.8 s on "<answer>" x 12,500 (quadratic)."""
    reply = "<answer>" * 12_500
    assert seconds(double_check.extract_answer, reply) < 1
    assert double_check.extract_answer(reply + "<answer>7</answer>") == "7"


def test_a_5000_digit_move_is_an_invalid_move_not_an_exception():
    """Catches: int() raising on more than 4,300 digits, which aborted every game of an evaluation."""
    cases = {
        "9" * 5_000: None,
        "+" + "1" * 5_000: None,
        "-" + "1" * 5_000: None,
        "0" * 5_000 + "4": 4,
        "-" + "0" * 5_000: 0,
        "-4": None,
        "9": None,
        "08": 8,
    }
    for digits, expected in cases.items():
        cell, problem = MOVE_PARSER.judge(f"<move>{digits}</move>", new_board())
        assert cell == expected and (problem is None) == (expected is not None)


def test_linear_parser_reads_what_verifiers_parser_reads():
    """Catches: a faster parser that reads something else (checked on every short mix of tags)."""
    fields = ["move", ("a", "b")]
    slow, fast = vf.XMLParser(fields), LinearXMLParser(fields)
    atoms = ["<move>", "</move>", "<a>", "</a>", "<b>", " ", "\n", "x", "\u00a0"]
    texts = [""]
    for _ in range(4):
        texts = [text + atom for text in texts for atom in atoms]
    for text in texts:
        for last in (False, True):
            for strip in (False, True):
                assert vars(fast.parse(text, strip=strip, last=last)) == vars(slow.parse(text, strip=strip, last=last))
    assert tag_contents("<a>1</a><a>2<a>3</a>", "a") == ["1", "2<a>3"]


def test_a_failing_env_response_costs_one_game_not_the_evaluation(monkeypatch):
    """Catches: one exception in env_response making env.evaluate raise, losing every game."""
    env = tictactoe.load_environment(num_train_examples=0, num_eval_examples=6)
    judge = env.parser.judge

    def judge_or_fail(text, board):
        if "<move>" not in text:
            raise RuntimeError("a bug in the judge")
        return judge(text, board)

    monkeypatch.setattr(env.parser, "judge", judge_or_fail)

    class ExpertButOnce(ScriptedClient):
        def respond(self, prompt, state=None, **kwargs):
            breaks = state["example_id"] == 2 and len(prompt) == 2
            return "no move" if breaks else super().respond(prompt, state=state, **kwargs)

    outputs = run(
        env.evaluate(
            ExpertButOnce("expert"), "expert", num_examples=-1, rollouts_per_example=1, state_columns=["winner"]
        )
    )["outputs"]
    errors = {out["example_id"]: out.get("error") for out in outputs}
    assert len(outputs) == 6 and [i for i, error in errors.items() if error] == [2]
    assert "a bug in the judge" in str(errors[2])
    assert all(out["winner"] in ("X", "draw") for out in outputs if out["example_id"] != 2)


def test_the_game_refuses_moves_after_it_is_over():
    """Catches: env_response after the end still playing a move and changing the board."""
    env = tictactoe.load_environment(num_train_examples=2, num_eval_examples=0)
    row = env.get_dataset()[0]
    state = run(env.rollout(row, ScriptedClient("expert"), "expert"))
    assert state["game_over"]
    before = {key: repr(state[key]) for key in tictactoe.GAME_STATE_COLUMNS}
    for cell in range(9):
        reply = run(env.env_response(assistant(f"<move>{cell}</move>"), state))
        assert "game is over" in reply[0]["content"]
    assert {key: repr(state[key]) for key in tictactoe.GAME_STATE_COLUMNS} == before


def test_play_survives_a_5000_digit_move_and_a_runaway_think():
    """Catches: Game.model_move crashing on int() like the judge, or stalling on "<think>" x 100,000."""
    game = Game(model_starts=True, seed=0)
    game.model_move(lambda messages: "<move>" + "9" * 5_000 + "</move>")
    assert game.state["invalid_moves"] == 1 and game.board == new_board()
    assert seconds(game.model_move, lambda messages: "<think>" * 100_000 + "<move>4</move>") < 1
    assert game.board[4] == "X" and game.think == ""


def test_play_refuses_a_boolean_cell():
    """Catches: human_move(True) playing cell 1 (True is an int in Python)."""
    game = Game(model_starts=False, seed=0)
    with pytest.raises(IllegalMove, match="no cell True"):
        game.human_move(True)
    game.human_move(0)
    game.model_move(expert_answer(0))
