"""Tests for course_lib/envs/tictactoe/__init__.py: dataset, parser, transitions, rewards, turn-by-turn driving.

Games are driven two ways: through verifiers' own `rollout()` with a client that replays fixed
answers, and turn by turn with the calling sequence the module docstring gives the TRL bridge.
Rewards are checked exactly: win 1 / draw 0.5 / loss 0, + 0.2 x format share, - 0.1 if any invalid.
"""

import asyncio
import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.rewards import reward_functions
from course_lib.scripted_client import ScriptedClient
from tictactoe import (
    SYSTEM_PROMPT,
    MoveParser,
    board_to_text,
    load_environment,
    make_rows,
    opponent_rng,
)
from tictactoe.game import new_board, opponent_move, render


def run(coro):
    return asyncio.run(coro)


def row_with(board: str = ".........", random_move_prob: float = 0.0, seed: int = 7, model_starts: bool = True) -> dict:
    """A dataset row for a chosen position ('.' = empty), so a test can start mid-game."""
    return {
        "example_id": 0,
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": render([None if c == "." else c for c in board])},
        ],
        "info": {"seed": seed, "model_starts": model_starts, "random_move_prob": random_move_prob, "board": board},
    }


class ReplayClient(ScriptedClient):
    """Answers with fixed texts, in order: a model whose every word we choose."""

    def __init__(self, answers):
        super().__init__("random")
        self.answers = list(answers)

    def respond(self, prompt, **kwargs):
        return self.answers.pop(0)


async def play_turn_by_turn(env, row, answer_for):
    """The documented calling sequence (what the TRL bridge does); `answer_for(board) -> text`."""
    state = await env.init_state(row, client=ScriptedClient(), model="policy")
    state = await env.setup_state(state)
    messages = list(row["prompt"])
    while not await env.is_completed(state):
        text = answer_for(list(state["board"]))
        messages.append({"role": "assistant", "content": text})
        messages += [m.model_dump() for m in await env.env_response(messages, state)]
    state["completion"] = messages[len(row["prompt"]) :]
    await env.rubric.score_rollout(state)
    return state


async def rollout(env, row, answers):
    state = await env.rollout(row, ReplayClient(answers), "replay")
    await env.rubric.score_rollout(state)
    return state


def replay(answers):
    queue = list(answers)
    return lambda board: queue.pop(0)


ENV = load_environment(num_train_examples=40, num_eval_examples=20)


# --- Dataset ---------------------------------------------------------------------------------


def test_same_arguments_give_identical_datasets():
    """Catches: global `random` or unordered iteration in the dataset builder."""
    a = load_environment(num_train_examples=30, num_eval_examples=10, seed=3)
    b = load_environment(num_train_examples=30, num_eval_examples=10, seed=3)
    assert a.get_dataset().to_list() == b.get_dataset().to_list()
    assert a.get_eval_dataset().to_list() == b.get_eval_dataset().to_list()


def test_a_different_seed_gives_different_games_and_train_differs_from_eval():
    """Catches: the seed argument being ignored, or eval games copying training games."""

    def seeds(rows):
        return [r["info"]["seed"] for r in rows]

    assert seeds(make_rows(30, seed=0)) != seeds(make_rows(30, seed=1))
    assert not set(seeds(make_rows(200, seed=0))) & set(seeds(make_rows(200, seed=0, split="eval")))


def test_global_random_state_does_not_change_the_dataset():
    """Catches: the builder drawing from the global `random` module (as the original course's does)."""
    import random

    random.seed(1)
    first = make_rows(20, seed=5)
    random.seed(2)
    assert make_rows(20, seed=5) == first


@pytest.mark.parametrize("low, high, groups", [(0.0, 1.0, 10), (0.2, 0.6, 4), (0.0, 1.0, 3), (0.5, 0.5, 5)])
def test_every_window_of_num_groups_rows_covers_every_difficulty_bucket(low, high, groups):
    """Catches: i.i.d. difficulty, or buckets shuffled per block (a window across two blocks would miss one)."""
    rows = make_rows(10 * groups + 3, seed=1, min_random_move_prob=low, max_random_move_prob=high, num_groups=groups)
    probs = [r["info"]["random_move_prob"] for r in rows]
    assert all(low <= p <= high for p in probs)
    if high == low:
        assert set(probs) == {low}
        return
    width = (high - low) / groups
    buckets = [min(int((p - low) / width), groups - 1) for p in probs]
    assert buckets == [r["info"]["bucket"] for r in rows]
    for start in range(len(rows) - groups + 1):
        assert set(buckets[start : start + groups]) == set(range(groups))


def test_about_half_the_games_start_with_the_model_and_it_follows_the_seed():
    """Catches: the model always (or never) moving first."""
    rows = make_rows(1000, seed=0)
    share = sum(r["info"]["model_starts"] for r in rows) / len(rows)
    assert 0.44 < share < 0.56


def test_when_the_opponent_starts_the_prompt_already_shows_its_seeded_first_move():
    """Catches: an empty opening board when O starts, or an opening that ignores the row's seed."""
    for row in make_rows(40, seed=2, min_random_move_prob=0.5, max_random_move_prob=0.5):
        info = row["info"]
        if info["model_starts"]:
            assert info["board"] == "........." and "move first" in row["question"]
            continue
        board = new_board()
        expected = opponent_move(board, "O", info["random_move_prob"], opponent_rng(info["seed"], board))
        assert info["board"].index("O") == expected and info["board"].count("O") == 1
        assert render([None if c == "." else c for c in info["board"]]) in row["question"]


def test_prompt_has_the_system_prompt_and_explains_the_format():
    prompt = ENV.get_dataset()[0]["prompt"]
    assert prompt[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert "<move>" in SYSTEM_PROMPT and "<think>" in SYSTEM_PROMPT and render(new_board()) in SYSTEM_PROMPT


def test_rubric_weights_are_win_1_format_0_2_invalid_minus_0_1_and_metrics_0():
    """Catches: a reward function silently weighted as a metric, or the reverse."""
    weights = {reward.name: reward.weight for reward in reward_functions(ENV)}
    assert weights == {
        "win_reward": 1.0,
        "format_reward": 0.2,
        "any_invalid_move": -0.1,
        "won": 0.0,
        "drew": 0.0,
        "lost": 0.0,
        "invalid_moves": 0.0,
        "model_turns": 0.0,
        "model_started": 0.0,
        "num_turns": 0.0,
    }


# --- Transitions with exact rewards ----------------------------------------------------------


def test_a_winning_move_ends_the_game_with_reward_1_2():
    state = run(rollout(ENV, row_with("XX.OO...."), ["<think>Cell 2 completes my row.</think><move>2</move>"]))
    assert state["winner"] == "X" and state["game_over"] and state["stop_condition"] == "has_final_env_response"
    assert state["reward"] == pytest.approx(1.2)
    assert state["metrics"]["won"] == 1.0 and state["metrics"]["model_turns"] == 1.0
    assert "You win" in state["completion"][-1]["content"]


def test_a_move_that_lets_the_optimal_opponent_win_scores_0_2():
    """Catches: the opponent not replying, or a loss scored like an unfinished game with format lost."""
    state = run(rollout(ENV, row_with("OO.XX....", random_move_prob=0.0), ["<move>6</move>"]))
    assert state["board"][2] == "O" and state["winner"] == "O"
    assert state["reward"] == pytest.approx(0.2) and state["metrics"]["lost"] == 1.0


def test_filling_the_last_cell_without_a_line_is_a_draw_worth_0_7():
    state = run(rollout(ENV, row_with("XOXXOOOX."), ["<move>8</move>"]))
    assert state["winner"] == "draw" and state["reward"] == pytest.approx(0.7)


@pytest.mark.parametrize("model_starts", [True, False])
def test_expert_against_the_optimal_opponent_draws_a_whole_game_worth_0_7(model_starts):
    """A full game from the dataset: every answer well formed, no invalid move, a draw."""
    env = load_environment(
        num_train_examples=0, num_eval_examples=30, min_random_move_prob=0.0, max_random_move_prob=0.0
    )
    row = next(r for r in env.get_eval_dataset() if r["info"]["model_starts"] == model_starts)
    state = run(env.rollout(row, ScriptedClient("expert"), "expert"))
    run(env.rubric.score_rollout(state))
    assert state["winner"] == "draw" and state["reward"] == pytest.approx(0.7)
    assert state["model_turns"] == (5 if model_starts else 4) == state["well_formed_turns"]
    assert [player for player, _ in state["moves"]] == (list("XOXOXOXOX") if model_starts else list("OXOXOXOXO"))


INVALID = [
    ("I think the centre is best.", "no <move>N</move> tag", False),
    ("<move>four</move>", "is not a cell number", False),
    ("<move>9</move>", "does not exist", True),
    ("<move>-1</move>", "does not exist", True),
    ("<move>0</move>", "already taken", True),
]


@pytest.mark.parametrize("answer, feedback, well_formed", INVALID)
def test_each_kind_of_invalid_answer_gets_feedback_leaves_the_board_and_costs_0_1(answer, feedback, well_formed):
    """Catches: an invalid answer ending the game, changing the board, or not being counted.

    The game is then won: 1 + 0.2 x (well-formed share of the 2 answers) - 0.1.
    """
    state = run(rollout(ENV, row_with("XX.OO...."), [answer, "<move>2</move>"]))
    feedback_message = state["completion"][1]["content"]
    assert feedback_message.startswith("Invalid move") and feedback in feedback_message
    assert render(board_from("XX.OO....")) in feedback_message
    assert state["invalid_moves"] == 1 and state["winner"] == "X" and state["model_turns"] == 2
    assert state["reward"] == pytest.approx(1.0 + 0.2 * (2 if well_formed else 1) / 2 - 0.1)


def board_from(text):
    return [None if c == "." else c for c in text]


def test_two_invalid_answers_cost_the_same_flat_0_1():
    state = run(rollout(ENV, row_with("XX.OO...."), ["<move>0</move>", "<move>3</move>", "<move>2</move>"]))
    assert state["invalid_moves"] == 2 and state["reward"] == pytest.approx(1.2 - 0.1)


def test_the_turn_cap_ends_an_unfinished_game_worth_minus_0_1():
    env = load_environment(num_train_examples=5, num_eval_examples=0, max_turns=3)
    state = run(rollout(env, row_with(), ["pass", "pass", "pass", "never asked"]))
    assert state["model_turns"] == 3 and state["winner"] is None and state["game_over"]
    assert "Turn limit (3 answers) reached" in state["completion"][-1]["content"]
    assert state["reward"] == pytest.approx(-0.1)


def test_an_answer_at_the_turn_cap_is_still_judged_so_a_winning_last_move_counts():
    """Catches: verifiers' trajectory-length cap stopping before env_response sees the last answer."""
    env = load_environment(num_train_examples=5, num_eval_examples=0, max_turns=2)
    state = run(rollout(env, row_with("XX.OO...."), ["hmm", "<move>2</move>"]))
    assert state["winner"] == "X" and state["reward"] == pytest.approx(1.0 + 0.1 - 0.1)


CENTRE_THEN_NONSENSE = ["<move>4</move>"] + ["x"] * 9


def test_the_opponent_reply_depends_only_on_the_game_seed_and_the_board():
    """Catches: a shared or unseeded opponent rng (two rollouts in one GRPO group would see different replies)."""
    replies = set()
    for _ in range(3):  # separate states reaching the same position
        state = run(play_turn_by_turn(ENV, row_with(random_move_prob=1.0, seed=11), replay(CENTRE_THEN_NONSENSE)))
        replies.add(tuple(state["moves"][:2][1]))
    assert len(replies) == 1
    different_seeds = set()
    for seed in range(20):
        state = run(play_turn_by_turn(ENV, row_with(random_move_prob=1.0, seed=seed), replay(CENTRE_THEN_NONSENSE)))
        different_seeds.add(state["moves"][1][1])
    assert len(different_seeds) > 2


def test_turn_by_turn_driving_matches_rollout_exactly():
    """Catches: state the bridge cannot reproduce (rewards that depend on rollout()-only bookkeeping)."""
    env = load_environment(num_train_examples=12, num_eval_examples=0, max_turns=10)
    for row in env.get_dataset():
        by_rollout = run(env.rollout(row, ScriptedClient("random", seed=1), "random"))
        run(env.rubric.score_rollout(by_rollout))
        answers = [m["content"] for m in by_rollout["completion"] if m["role"] == "assistant"]
        by_turns = run(play_turn_by_turn(env, row, replay(answers)))
        assert by_turns["moves"] == by_rollout["moves"] and by_turns["winner"] == by_rollout["winner"]
        assert by_turns["reward"] == by_rollout["reward"]
        assert by_turns["metrics"]["model_turns"] == by_rollout["metrics"]["model_turns"]


# --- Parser and robustness ---------------------------------------------------------------------

PARSER = MoveParser()


@pytest.mark.parametrize(
    "text, well_formed",
    [
        ("<move>4</move>", True),
        ("<think>centre</think>\n<move> 4 </move>\n", True),
        ("<think>a</think><think>b</think><move>4</move>", False),
        ("Sure! <move>4</move>", False),
        ("<move>4</move> because", False),
        ("<move>4</move><move>5</move>", False),
        ("<move>4", False),
        ("<think>unclosed <move>4</move>", False),
        ("<move>٤</move>", False),  # a non-ASCII digit is not a cell number
    ],
)
def test_well_formed_means_optional_think_then_exactly_one_integer_move(text, well_formed):
    assert PARSER.is_well_formed(text) is well_formed


def test_the_last_move_tag_counts():
    assert PARSER.judge("<move>1</move> no wait <move>5</move>", new_board()) == (5, None)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_the_parser_survives_any_text(text):
    cell, problem = PARSER.judge(text, new_board())
    assert (cell is None) != (problem is None)
    assert cell is None or 0 <= cell <= 8
    PARSER.is_well_formed(text)


@settings(max_examples=200, deadline=None)
@given(
    st.text()
    | st.builds(lambda n: f"<move>{n}</move>", st.integers(-(10**30), 10**30))
    | st.builds(lambda t, n: f"<think>{t}</think><move>{n}</move>", st.text(), st.text())
)
def test_env_response_survives_any_answer_and_keeps_the_game_consistent(text):
    """Catches: crashes on odd input (huge numbers, unicode, tags inside tags)."""
    state = run(ENV.init_state(row_with("X...O....", random_move_prob=1.0), client=ScriptedClient(), model="m"))
    state = run(ENV.setup_state(state))
    reply = run(ENV.env_response([{"role": "assistant", "content": text}], state))
    assert len(reply) == 1 and reply[0]["role"] == "user"
    assert state["model_turns"] == 1
    marks = Counter(state["board"])
    if state["invalid_moves"]:
        assert board_to_text(state["board"]) == "X...O...." and reply[0]["content"].startswith("Invalid move")
    else:
        assert marks["X"] == 2 and marks["O"] in (1, 2)
    assert math.isfinite(float(state["well_formed_turns"]))


def test_env_response_accepts_message_objects_and_empty_content():
    state = run(ENV.init_state(row_with(), client=ScriptedClient(), model="m"))
    state = run(ENV.setup_state(state))
    import verifiers as vf

    run(ENV.env_response([vf.AssistantMessage(content=None)], state))
    run(ENV.env_response([vf.AssistantMessage(content=[{"type": "text", "text": "<move>4</move>"}])], state))
    assert state["invalid_moves"] == 1 and state["board"][4] == "X"


def test_load_environment_by_id_after_install():
    """Catches: a packaging change that breaks `vf.load_environment("tictactoe")` (and vf-eval)."""
    import verifiers as vf

    env = vf.load_environment("tictactoe", num_train_examples=4, num_eval_examples=3)
    assert type(env).__name__ == "TicTacToeEnv" and env.max_turns == 6
    direct = load_environment(num_train_examples=4, num_eval_examples=3)
    assert env.get_eval_dataset()["info"] == direct.get_eval_dataset()["info"]
