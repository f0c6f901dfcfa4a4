"""Tests for course_lib/play.py: a human (O) against a model (X) through the tic-tac-toe environment.

No model and no server: the scripted expert stands in for the model. The widget is tested by
pressing its buttons with `Button.click()`, which runs the same handlers as a click in Jupyter.
"""

import asyncio

import pytest

from course_lib.play import (
    MODEL_STARTS,
    YOU_START,
    Game,
    IllegalMove,
    PlayWidget,
    expert_answer,
    play_scripted,
    random_human,
)
from course_lib.scripted_client import ScriptedClient, read_board
from tictactoe import load_environment, opponent_rng
from tictactoe.game import is_over, opponent_move, winner


def scripted_model(seed: int, invalid_on: tuple[int, ...] = ()) -> callable:
    """The expert, except that answers number `invalid_on` are invalid ones of different kinds."""
    expert, invalid = expert_answer(seed), ["I'd rather chat.", "<move>9</move>", "<move>four</move>"]
    calls = []

    def answer(messages):
        calls.append(1)
        if len(calls) - 1 in invalid_on:
            board = read_board(messages[-1]["content"])
            taken = [f"<move>{cell}</move>" for cell in range(9) if board[cell] is not None]
            return (invalid + taken)[len(calls) % (len(invalid) + len(taken))]
        return expert(messages)

    return answer


def drive_environment(env, row, answer) -> list[dict]:
    """The environment's own turn-by-turn driving (its module docstring), with its own opponent."""

    async def play():
        state = await env.init_state(row, client=ScriptedClient(), model="policy")
        state = await env.setup_state(state)
        messages = list(row["prompt"])
        while not await env.is_completed(state):
            messages.append({"role": "assistant", "content": answer(messages)})
            messages += [m.model_dump() for m in await env.env_response(messages, state)]
        return messages

    return asyncio.run(play())


def env_opponent_as_human(row):
    """A 'human' who clicks exactly what the environment's opponent would play in this row's game."""
    info = row["info"]
    return lambda board: opponent_move(board, "O", info["random_move_prob"], opponent_rng(info["seed"], board))


@pytest.mark.parametrize("model_starts", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_expert_against_a_random_human_finishes_with_a_valid_result(model_starts, seed):
    """Catches: a game that stalls, skips a move, or reports a result the board does not show."""
    game = play_scripted(expert_answer(seed), random_human(seed), model_starts=model_starts)
    assert game.over and game.to_move is None
    board = game.state["board"]
    assert is_over(board) and game.pending is None
    assert game.state["winner"] == (winner(board) or "draw")
    assert game.state["winner"] in ("X", "draw")  # the expert never loses
    assert board.count("O") - board.count("X") in ((-1, 0) if model_starts else (0, 1))
    assert game.state["invalid_moves"] == 0 and game.result_text() in ("The model (X) wins.", "Draw.")
    assert game.messages[-1]["content"].splitlines()[-1].startswith("Game over.")


@pytest.mark.parametrize("invalid_on, answer_format", [((), "think"), ((0, 2), "think"), ((1, 3, 4), "move")])
def test_messages_equal_what_the_environment_produces_for_the_same_moves(invalid_on, answer_format):
    """Catches: prompts or feedback written by play.py instead of the environment, a different first
    message (the system prompt of another answer format: the widget once asked the move-only model to reason), a
    different order of model and opponent moves, invalid answers handled differently, or a turn cap other than the
    environment's default (several answers here are invalid)."""
    env = load_environment(num_train_examples=12, num_eval_examples=0, answer_format=answer_format)
    rows = env.get_dataset().to_list()
    assert {row["info"]["model_starts"] for row in rows} == {True, False}
    invalid_seen = 0
    for i, row in enumerate(rows):
        expected = drive_environment(env, row, scripted_model(i, invalid_on))
        human = env_opponent_as_human(row)
        game = Game(model_starts=row["info"]["model_starts"], seed=row["info"]["seed"], answer_format=answer_format)
        if not game.model_starts:
            game.human_move(row["info"]["board"].index("O"))
        answer = scripted_model(i, invalid_on)
        while not game.over:
            game.human_move(human(game.board)) if game.to_move == "human" else game.model_move(answer)
        assert game.messages == expected, f"row {i}"
        invalid_seen += game.state["invalid_moves"]
    assert (invalid_seen > 0) == bool(invalid_on)
    assert "opponent_cell" not in vars(env)  # the human's seat never leaks into another environment


def test_illegal_human_moves_are_refused_with_a_clear_message():
    """Catches: overwriting a mark, moving twice, or playing on after the game ended."""
    game = Game(model_starts=False)
    with pytest.raises(IllegalMove, match="model's turn|no cell"):
        game.human_move(9)
    game.human_move(0)
    with pytest.raises(IllegalMove, match="model's turn"):
        game.human_move(1)
    game.model_move(lambda messages: "<move>4</move>")
    for taken, by in ((0, "O"), (4, "X")):
        with pytest.raises(IllegalMove, match=f"Cell {taken} is already taken by {by}"):
            game.human_move(taken)
    before = [dict(m) for m in game.messages]
    with pytest.raises(IllegalMove, match="no cell"):
        game.human_move(-1)
    assert game.messages == before and game.board == ["O", None, None, None, "X", None, None, None, None]

    finished = play_scripted(expert_answer(0), random_human(0))
    for cell in range(9):
        with pytest.raises(IllegalMove, match="game is over"):
            finished.human_move(cell)
    with pytest.raises(IllegalMove, match="game is over"):
        finished.model_move(expert_answer(0))


def test_invalid_model_answers_are_judged_like_the_environment_and_the_turn_cap_ends_the_game():
    """Catches: an invalid answer changing the board, not being counted, or a game that never ends."""
    game = Game(model_starts=True, max_turns=3)
    game.model_move(lambda messages: "<think>hmm</think> no move")
    assert game.think == "hmm" and game.to_move == "model" and game.board == [None] * 9
    assert game.messages[-1]["content"].startswith("Invalid move: no <move>N</move> tag found.")
    game.model_move(lambda messages: "<move>4</move>")
    game.human_move(0)
    assert game.to_move == "model" and "You played 4. O played 0." in game.messages[-1]["content"]
    game.model_move(lambda messages: "<move>0</move>")  # taken: the third answer hits the cap
    assert game.over and game.state["winner"] is None and game.state["invalid_moves"] == 2
    assert "cell 0 is already taken by O" in game.messages[-1]["content"]
    assert "Turn limit (3 answers) reached" in game.messages[-1]["content"]
    assert game.result_text() == "Turn limit reached: the game ends unfinished."


def test_the_widget_plays_a_game_when_its_buttons_are_pressed():
    """Catches: handlers not wired to the game, a board that does not refresh, clicks not refused,
    or the 'who starts' toggle and 'new game' button being ignored."""
    board = PlayWidget(expert_answer(3))
    assert board.starter.value == YOU_START and board.game.to_move == "human"
    # Empty cells show their number: an empty description is never redrawn by ipywidgets' front
    # end, which left the last game's marks on screen after "New game" (seen in a browser).
    assert [b.description for b in board.cells] == [str(c) for c in range(9)]
    assert not any(b.disabled for b in board.cells)

    board.cells[0].click()  # human O at 0, then the expert answers at once
    shown = [b.description for b in board.cells]
    assert shown.count("O") == 1 and shown.count("X") == 1 and shown[0] == "O"
    assert board.think.value and board.think.value == board.game.think
    assert "O moved first, to cell 0." in board.log.value and "[model]" in board.log.value
    x_cell = shown.index("X")
    assert board.cells[0].disabled and board.cells[x_cell].disabled

    board.cells[x_cell].click()  # an occupied cell: refused, nothing changes
    assert f"Cell {x_cell} is already taken by X" in board.status.value
    assert [b.description for b in board.cells] == shown

    while not board.game.over:
        board.cells[next(c for c in range(9) if board.game.board[c] is None)].click()
    assert board.status.value in ("<b>The model (X) wins.</b>", "<b>Draw.</b>")
    assert all(b.disabled for b in board.cells)
    assert "Game over." in board.log.value
    board.cells[0].click()
    assert "game is over" in board.status.value

    board.starter.value = MODEL_STARTS
    board.new_game.click()
    shown = [b.description for b in board.cells]
    assert shown.count("X") == 1 and shown.count("O") == 0 and board.game.to_move == "human"
    assert all(shown[c] == str(c) for c in range(9) if board.game.board[c] is None)
    assert "You play X and move first." in board.log.value


def test_a_model_error_is_shown_instead_of_a_silent_board():
    """Catches: an exception from the server vanishing inside a button handler."""

    def broken(messages):
        raise ConnectionError("server down")

    board = PlayWidget(broken)
    board.cells[4].click()
    assert "server down" in board.status.value and all(b.disabled for b in board.cells)
