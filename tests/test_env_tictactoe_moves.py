"""Tests for course_lib/envs/tictactoe/moves.py: one move per episode, rewarded from the game tree.

Positions must be shown exactly as the full game shows them (else what is learned does not carry
over), every row must have a choice to make, and the reward must rank an optimal cell above a
cell that keeps the outcome above one that throws it away, for every answer a model can give.
"""

import asyncio
import json
import random
from pathlib import Path

import pytest

from course_lib.rewards import reward_functions
from course_lib.scripted_client import ScriptedClient, scripted_answer
from tictactoe import SYSTEM_PROMPT, load_environment
from tictactoe.game import best_moves, completed_lines, legal_moves, read_board, render, winning_cells
from tictactoe.moves import cell_score, kind_of, position_rows
from tictactoe.moves import load_environment as load_move_environment

EXPERT_GAMES = Path(__file__).parent.parent / "data" / "tictactoe_sft" / "games.jsonl"


def board(text: str) -> list:
    return [None if ch == "." else ch for ch in text]


def expert_games() -> list[list[dict]]:
    return [json.loads(line)["messages"] for line in EXPERT_GAMES.read_text().splitlines()]


@pytest.fixture(scope="module")
def env():
    return load_move_environment(expert_games())


class ReplayClient(ScriptedClient):
    def __init__(self, answer: str):
        super().__init__("random")
        self.answer = answer

    def respond(self, prompt, **kwargs):
        return self.answer


def test_read_board_reads_the_last_board_the_full_game_draws():
    position = board("X.O.O...X")
    text = f"You played 8. O played 4.\n\n{render(position)}\n\nYour move."
    assert read_board(text) == position
    assert read_board(f"Invalid move.\n\n{render(board('.........'))}\n\n{render(position)}") == position
    assert read_board("no board here") is None


def outcome_sign(position, player: str) -> int:
    """+1 / 0 / -1: the result for `player` to move under perfect play (a plain negamax, no speed)."""
    lines = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
    for a, b, c in lines:
        if position[a] and position[a] == position[b] == position[c]:
            return 1 if position[a] == player else -1
    empty = [i for i in range(9) if position[i] is None]
    if not empty:
        return 0
    rival = "O" if player == "X" else "X"
    return max(-outcome_sign(position[:i] + [player] + position[i + 1 :], rival) for i in empty)


@pytest.mark.parametrize("text", ["XX.OO....", "X...O....", "X.O.O...X", "O...X...O", "....O....", "XO.OX...."])
def test_cell_score_ranks_optimal_above_outcome_keeping_above_throwing_away(text):
    position = board(text)
    for cell in legal_moves(position):
        after = position[:cell] + ["X"] + position[cell + 1 :]
        if cell in best_moves(position, "X"):
            expected = 1.0
        elif -outcome_sign(after, "O") == outcome_sign(position, "X"):
            expected = 0.5
        else:
            expected = 0.0
        assert cell_score(position, cell) == expected, (text, cell)


def test_every_row_has_a_choice_and_is_shown_as_the_full_game_shows_it():
    rows = position_rows(expert_games())
    assert len(rows) > 200
    full_game_prompt = load_environment(num_train_examples=1, num_eval_examples=0).get_dataset()[0]["prompt"]
    for row in rows:
        prompt = row["prompt"]
        assert prompt[0] == {"role": "system", "content": SYSTEM_PROMPT} == full_game_prompt[0]
        assert prompt[-1]["role"] == "user" and prompt[-1]["content"].endswith("Your move.")
        position = board(row["info"]["board"])
        assert read_board(prompt[-1]["content"]) == position
        assert set(best_moves(position, "X")) != set(legal_moves(position))
        assert row["info"]["kind"] == kind_of(position)
    # the kinds are interleaved: the first rows mix them
    assert {row["info"]["kind"] for row in rows[:3]} == {"win", "block", "other"}


def test_positions_are_distinct_and_games_without_a_system_prompt_get_the_full_games():
    games = expert_games()[:20]
    rows = position_rows(games + games)
    assert len(rows) == len(position_rows(games))
    bare = [[m for m in game if m["role"] != "system"] for game in games]
    assert [r["prompt"] for r in position_rows(bare)] == [r["prompt"] for r in position_rows(games)]


def rollout_reward(env, row, answer: str) -> dict:
    async def go():
        state = await env.rollout(row, ReplayClient(answer), "policy", {})
        await env.rubric.score_rollout(state)
        return state

    state = asyncio.run(go())
    return {"reward": state["reward"], **state["metrics"]}


@pytest.mark.parametrize(
    "answer, move, form, invalid",
    [
        ("<think>I win on the top row.</think>\n<move>{best}</move>", 1.0, 1.0, 0.0),
        ("<move>{best}</move>", 1.0, 1.0, 0.0),
        ("I play <move>{best}</move> now", 1.0, 0.0, 0.0),  # legal but not well formed
        ("<move>{taken}</move>", 0.0, 1.0, 1.0),
        ("<move>9</move>", 0.0, 1.0, 1.0),
        ("4", 0.0, 0.0, 1.0),  # a bare digit is not the full game's answer
        ("", 0.0, 0.0, 1.0),
    ],
)
def test_the_reward_of_every_kind_of_answer(env, answer, move, form, invalid):
    row = next(r for r in env.get_dataset() if r["info"]["kind"] == "win")
    position = board(row["info"]["board"])
    best, taken = best_moves(position, "X")[0], position.index("X")
    scores = rollout_reward(env, row, answer.format(best=best, taken=taken))
    assert scores["move_reward"] == move
    assert scores["format_reward"] == form
    assert scores["invalid_move"] == invalid
    assert scores["reward"] == pytest.approx(move + 0.2 * form - 0.1 * invalid)


def test_a_losing_legal_answer_earns_less_than_an_optimal_one(env):
    row = next(r for r in env.get_dataset() if r["info"]["kind"] == "block")
    position = board(row["info"]["board"])
    best = best_moves(position, "X")[0]
    worst = next(cell for cell in legal_moves(position) if cell_score(position, cell) == 0.0)
    good, bad = (rollout_reward(env, row, f"<move>{cell}</move>")["reward"] for cell in (best, worst))
    assert good == pytest.approx(1.2) and bad == pytest.approx(0.2)


def test_the_rubric_order_is_what_training_logs(env):
    assert [(r.name, r.weight) for r in reward_functions(env)][:7] == [
        ("move_reward", 1.0),
        ("format_reward", 0.2),
        ("invalid_move", -0.1),
        ("false_claim", 0.0),  # logged only, unless false_claim_penalty is set
        ("needed_claim", 0.0),  # logged only, unless needed_claim_bonus is set
        ("optimal", 0.0),
        ("legal", 0.0),
    ]


def test_a_right_cell_for_a_false_reason_is_a_false_claim(env):
    """Catches: a checker that pays "I win now" where X has no line (the reason per-move GRPO spread into
    block positions), or that flags the expert's own true sentences."""
    row = next(r for r in env.get_dataset() if r["info"]["kind"] == "block")
    position = board(row["info"]["board"])
    best = best_moves(position, "X")[0]
    true_reason = scripted_answer(position, "expert", random.Random(0))
    wrong_line = f"<think>Cell {best} completes my line 0-4-8, so I win now.</think>\n<move>{best}</move>"
    other_cell = next(cell for cell in legal_moves(position) if cell != best)
    true_but_not_played = true_reason.replace(f"<move>{best}</move>", f"<move>{other_cell}</move>")
    scores = {answer: rollout_reward(env, row, answer) for answer in (true_reason, wrong_line, true_but_not_played)}
    assert scores[true_reason]["move_reward"] == scores[wrong_line]["move_reward"] == 1.0
    assert [scores[answer]["false_claim"] for answer in scores] == [0.0, 1.0, 1.0]
    assert rollout_reward(env, row, f"<move>{best}</move>")["false_claim"] == 0.0  # no claim, nothing false


def test_the_penalty_ranks_a_true_reason_above_a_false_one_for_the_same_cell():
    penalised = load_move_environment(expert_games(), false_claim_penalty=0.5)
    row = next(r for r in penalised.get_dataset() if r["info"]["kind"] == "block")
    position = board(row["info"]["board"])
    best = best_moves(position, "X")[0]
    true_reason = scripted_answer(position, "expert", random.Random(0))
    false_reason = f"<think>Cell {best} completes my line 0-4-8, so I win now.</think>\n<move>{best}</move>"
    assert rollout_reward(penalised, row, true_reason)["reward"] == pytest.approx(1.2)
    assert rollout_reward(penalised, row, false_reason)["reward"] == pytest.approx(0.7)


@pytest.mark.parametrize("kind", ["win", "block"])
def test_only_the_true_reason_the_position_needs_earns_the_needed_claim(env, kind):
    """Catches: a bonus paid for the right cell without its reason, for a false reason of the right kind,
    for a reason about another cell than played, for an illegal move, or for the dodge the false-claim
    penalty met (no checkable claim at all)."""
    row = next(r for r in env.get_dataset() if r["info"]["kind"] == kind)
    position = board(row["info"]["board"])
    player = "X" if kind == "win" else "O"  # whose line the cell completes
    needed = winning_cells(position, player)[0]
    written = completed_lines(position, player, needed)[0]  # "0-4-8"
    reason = (
        f"Cell {needed} completes my line {written}, so I win now."
        if kind == "win"
        else f"O threatens {written}; I block at cell {needed}."
    )
    other_cell = next(cell for cell in legal_moves(position) if cell != needed)
    taken = next(cell for cell, mark in enumerate(position) if mark is not None)
    answers = {
        f"<think>{reason}</think>\n<move>{needed}</move>": 1.0,
        f"<move>{needed}</move>": 0.0,  # the right cell, no reason
        f"<think>I take cell {needed}, which lies on three lines.</think>\n<move>{needed}</move>": 0.0,
        f"<think>{reason}</think>\n<move>{other_cell}</move>": 0.0,  # the reason names another cell
        f"<think>{reason.replace(written, '0-1-5')}</think>\n<move>{needed}</move>": 0.0,  # not a line
        f"<think>{reason}</think>\n<move>{taken}</move>": 0.0,  # an illegal move
    }
    assert {answer: rollout_reward(env, row, answer)["needed_claim"] for answer in answers} == answers


def test_blocking_where_x_can_win_is_a_true_claim_but_not_the_needed_one(env):
    row = next(
        r for r in env.get_dataset() if r["info"]["kind"] == "win" and winning_cells(board(r["info"]["board"]), "O")
    )
    position = board(row["info"]["board"])
    block = winning_cells(position, "O")[0]
    line = completed_lines(position, "O", block)[0]
    answer = f"<think>O threatens {line}; I block at cell {block}.</think>\n<move>{block}</move>"
    scores = rollout_reward(env, row, answer)
    assert scores["false_claim"] == 0.0 and scores["needed_claim"] == 0.0


def test_the_needed_claim_is_never_paid_where_no_claim_is_needed(env):
    rows = [row for row in env.get_dataset() if row["info"]["kind"] == "other"][:20]
    assert rows and all(rollout_reward(env, row, expert_answer(row))["needed_claim"] == 0.0 for row in rows)


def test_the_bonus_ranks_the_needed_reason_above_the_bare_cell():
    rewarded = load_move_environment(expert_games(), needed_claim_bonus=0.3)
    row = next(r for r in rewarded.get_dataset() if r["info"]["kind"] == "block")
    best = best_moves(board(row["info"]["board"]), "X")[0]
    assert rollout_reward(rewarded, row, expert_answer(row))["reward"] == pytest.approx(1.5)
    assert rollout_reward(rewarded, row, f"<move>{best}</move>")["reward"] == pytest.approx(1.2)


def test_the_expert_never_makes_a_false_claim(env):
    """Every answer of the SFT data (the expert's) states only true claims about its board."""
    rows = list(env.get_dataset())
    assert all(rollout_reward(env, row, expert_answer(row))["false_claim"] == 0.0 for row in rows[::7])


def expert_answer(row) -> str:
    return scripted_answer(board(row["info"]["board"]), "expert", random.Random(0))


def test_games_without_a_choice_are_refused_clearly():
    with pytest.raises(ValueError, match="no position with a choice"):
        load_move_environment([[{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]])
