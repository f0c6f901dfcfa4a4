"""Tests for the recorded games of course_lib/play.py: the reason checker, the figure and the static page
assets/play_recorded_games.html. No model, no server, no browser (dev/browser_play_page.py opens the page
in one)."""

import html
import re
from pathlib import Path

import matplotlib
import pytest

from course_lib import play
from tictactoe.game import render

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "assets" / "play_recorded_games.html"


def board(text: str) -> list:
    """A board from 9 characters, "." for an empty cell: "OO.OX...." """
    return [None if c == "." else c for c in text]


# --- the reason checker ---------------------------------------------------------------------------

X_CAN_WIN = board("OO.OX.X..")  # X holds 4 and 6: cell 2 completes 2-4-6


def test_a_true_win_claim_passes():
    """Catches: a checker that flags true claims, whatever order the model writes the line in."""
    assert play.check_reason("Cell 2 completes my line 2-4-6, so I win now.", X_CAN_WIN, move=2) == []
    assert play.check_reason("Cell 2 completes my line 6-4-2, so I win now.", X_CAN_WIN, move=2) == []


def test_a_true_block_claim_passes():
    """Catches: a checker that reads the block sentence's line or cell from the wrong group."""
    o_threatens = board("OO..X....")
    assert play.check_reason("Empty cells: 2 3 5 6 7 8. O threatens 0-1-2; I block at cell 2.", o_threatens, 2) == []


@pytest.mark.parametrize(
    "reason, cells, problem",
    [
        ("Cell 6 completes my line 6-4-8, so I win now.", "OOXOX....", "6-4-8 is not a line of the board"),
        ("Cell 0 completes my line 0-4-8, so I win now.", "..X.XOO.O", "cell 8 of 0-4-8 is O, not X"),
        ("Cell 7 completes my line 0-4-8, so I win now.", "XOX.XOO.O", "cell 7 is not on 0-4-8"),
        ("Cell 4 completes my line 0-4-8, so I win now.", "X...O...X", "cell 4 is already taken by O"),
        ("O threatens 1-4-7; I block at cell 2.", "OO..X....", "cell 2 is not on 1-4-7"),
        ("O threatens 2-5-8; I block at cell 2.", "OO..X....", "cell 5 of 2-5-8 is empty, not O"),
    ],
)
def test_a_false_claim_is_flagged_with_what_is_wrong(reason, cells, problem):
    """Catches: a wrong reason that goes uncommented (the recorded games' "6-4-8", "0-4-8" with an O on 8,
    a cell off the line it names, a taken cell, a threat O does not have)."""
    wrong = play.check_reason(reason, board(cells))
    assert len(wrong) == 1 and problem in wrong[0], wrong


def test_the_flag_says_what_the_board_really_allows():
    """Catches: a flag that only says "wrong": it names the line the cell really completes, or none."""
    (wrong,) = play.check_reason("Cell 6 completes my line 6-4-8, so I win now.", board("OOXOX...."))
    assert "X completes 2-4-6 at cell 6" in wrong
    (wrong,) = play.check_reason("Cell 0 completes my line 0-4-8, so I win now.", board("..X.XOO.O"))
    assert "X completes no line at cell 0" in wrong
    (wrong,) = play.check_reason("Cell 2 completes my line 0-4-8.", X_CAN_WIN)
    assert "X completes 2-4-6 at cell 2" in wrong


def test_a_true_claim_about_another_cell_than_the_move_is_flagged():
    """Catches: a reason that names the winning cell while the model plays elsewhere, marked as fine."""
    (wrong,) = play.check_reason("Cell 2 completes my line 2-4-6, so I win now.", X_CAN_WIN, move=5)
    assert "the move is cell 5" in wrong


@pytest.mark.parametrize("seed", range(8))
def test_the_scripted_experts_reasons_are_never_flagged(seed):
    """Catches: a checker that flags true sentences in real positions (the expert's reasons are what the
    SFT data teaches, and they are right), e.g. a line read backwards or the wrong player's marks."""
    for model_starts in (True, False):
        game = play.play_scripted(play.expert_answer(seed), play.random_human(seed), model_starts)
        assert [turn.wrong for turn in play.game_turns(game.messages) if turn.wrong] == []


def test_sentences_the_checker_does_not_read_are_not_flagged():
    """Catches: a checker that flags every reason it cannot read (forks, the centre, no reason)."""
    for reason in ("", "I take the centre, cell 4, which lies on four lines.", "O could fork at cell 2."):
        assert play.check_reason(reason, board(".........")) == []


# --- game turns and the figure --------------------------------------------------------------------


def conversation(*exchanges) -> list[dict]:
    """Messages from (board text, answer) pairs, drawn as the environment draws boards."""
    messages = [{"role": "system", "content": "rules"}]
    for cells, answer in exchanges:
        messages.append({"role": "user", "content": f"Your board:\n\n{render(board(cells))}\n\nYour move."})
        messages.append({"role": "assistant", "content": answer})
    return messages


def test_turns_read_the_board_seen_the_reason_the_move_and_an_invalid_answer():
    """Catches: a turn drawn on the board after the move, a reason read from the wrong tag, a refused
    move (a taken cell) drawn as if played, and an answer with no reason shown as nothing."""
    messages = conversation(
        ("O........", "<think>I take the centre.</think>\n<move>4</move>"),
        ("OO..X....", "<think>Hmm.</think><move>0</move>"),
        ("OO..X....", "<move>2</move>"),
    )
    first, refused, block = play.game_turns(messages)
    assert first.board == board("O........") and first.reason == "I take the centre." and first.move == 4
    assert refused.move == 0 and refused.invalid == "cell 0 is already taken by O"
    assert block.move == 2 and block.invalid is None and block.reason == ""
    assert block.said == 'No <think> reason; it wrote: "<move>2</move>"'  # what a caption shows instead


def test_the_figure_has_one_board_per_model_answer_and_marks_a_wrong_reason():
    """Catches: a figure that needs a model or a server, a board missing or drawn twice, and a wrong reason
    left out of the picture."""
    game = play.recorded_games()[0]  # the earlier reasoning model's game of notebook 00
    fig = play.plot_game(game["messages"], game["title"])
    turns = play.game_turns(game["messages"])
    assert len(fig.axes) == len(turns) == sum(m["role"] == "assistant" for m in game["messages"])
    shown = [" ".join(t.get_text() for t in ax.texts) for ax in fig.axes]
    for text, turn in zip(shown, turns):
        assert ("The reason is wrong" in text) == bool(turn.wrong)
    assert any(turn.wrong for turn in turns)  # the recorded game's "6-4-8"
    matplotlib.pyplot.close(fig)


# --- the static page --------------------------------------------------------------------------------


def test_the_committed_page_is_what_the_stored_games_make():
    """Catches: a page edited by hand, or stored games or drawing code changed without rerunning
    `python dev/make_play_page.py`."""
    assert PAGE.read_text() == play.recorded_games_page(play.page_games()), "run python dev/make_play_page.py"


def test_the_page_shows_every_move_reason_and_wrong_reason_of_every_recorded_game():
    """Catches: a game, a board, a move or a reason missing from the page, or a wrong reason not marked."""
    page = PAGE.read_text()
    games = play.page_games()
    assert len(games) == len(play.COURSE_GAMES) + len(play.REASONING_GAMES) >= 4
    turns = [turn for game in games for turn in play.game_turns(game["messages"])]
    assert page.count('class="board"') == len(turns)
    for game in games:
        assert html.escape(game["about"]) in page and html.escape(play.game_result(game["messages"])) in page
        for number, turn in enumerate(play.game_turns(game["messages"]), start=1):
            assert f"X's answer {number}: cell {turn.move}" in page
            assert html.escape(turn.reason) in page
            for claim in turn.wrong:
                assert html.escape(claim) in page
    assert page.count('class="wrong-reason"') == sum(bool(turn.wrong) for turn in turns) >= 1


def test_the_page_needs_no_network_and_no_other_file():
    """Catches: a CDN stylesheet or font, a script, an image or a link that would not load offline."""
    page = PAGE.read_text()
    assert not re.search(r"https?:|//[a-z]|\b(?:src|href)\s*=|<script|<link|@import|url\(", page, re.IGNORECASE)
