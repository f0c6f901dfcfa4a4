"""Notebooks 06 and 09 play in the learner's tic-tac-toe environment (my_envs/my_tictactoe, written in notebook 05)
when it plays as the course's, and otherwise in the course's, saying which and why in one line.

The learner's package is notebook 05's solutions written out by its own package cell (in a tmp dir); "different"
packages are that text with one part changed. No model: scripted players only.
"""

import asyncio
import sys

import pytest
from test_workshop import notebook_namespace, write_and_load

import tictactoe
from course_lib import evaluation, workshop
from course_lib.exercises_tictactoe import how_it_differs, load_module, yours_or_reference
from course_lib.scripted_client import ScriptedClient

USE = "this notebook plays in it"


@pytest.fixture(scope="module")
def package_text(tmp_path_factory):
    """The __init__.py notebook 05 writes from its solutions."""
    folder = tmp_path_factory.mktemp("written")
    saved_envs, saved_path = workshop.MY_ENVS, list(sys.path)
    workshop.MY_ENVS = folder
    try:
        write_and_load("05_tictactoe_env.ipynb", notebook_namespace("05_tictactoe_env.ipynb"))
    finally:
        workshop.MY_ENVS, sys.path[:] = saved_envs, saved_path
        sys.modules.pop("my_tictactoe", None)
    return (folder / "my_tictactoe" / "__init__.py").read_text()


@pytest.fixture(autouse=True)
def fresh_import(monkeypatch):
    monkeypatch.delitem(sys.modules, "my_tictactoe", raising=False)  # restored after the test


def learner_package(tmp_path, text: str):
    folder = tmp_path / "my_envs" / "my_tictactoe"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(text)
    return folder


def one_line(capsys) -> str:
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # one printed line, whatever the difference says
    return out.strip()


def test_a_matching_environment_is_the_one_used_and_says_so(package_text, tmp_path, capsys):
    """Catches: the learner's finished environment ignored by 06 and 09, or used without saying so."""
    mine = yours_or_reference(USE, learner_package(tmp_path, package_text))
    line = one_line(capsys)
    assert mine is not tictactoe and mine.__file__ == str(tmp_path / "my_envs" / "my_tictactoe" / "__init__.py")
    assert line.startswith("Tic-tac-toe environment: yours, my_envs/my_tictactoe from notebook 05") and USE in line
    assert str(tmp_path) not in line  # no absolute path in a notebook's output


def test_the_evaluation_plays_in_the_learners_environment_the_reference_games(package_text, tmp_path):
    """Catches: a `load` that the harness drops on the way (06 would say "yours" and play the course's), or a
    learner's environment accepted although its games differ from the ones stored for notebooks 08 and 10."""
    mine = load_module(learner_package(tmp_path, package_text))
    assert how_it_differs(mine) is None
    env = evaluation.eval_environment("optimal", 4, load=mine.load_environment)
    assert type(env).__module__ == "my_tictactoe"

    async def played(load):
        result = await evaluation.evaluate_player(ScriptedClient("expert"), "expert", "expert", 4, load=load)
        return result.games

    yours, theirs = (asyncio.run(played(load)) for load in (mine.load_environment, tictactoe.load_environment))
    assert yours.equals(theirs)


def test_an_absent_environment_falls_back_to_the_reference_and_says_why(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path / "my_envs")  # where notebook 05 writes it: nothing there
    assert yours_or_reference(USE) is tictactoe
    line = one_line(capsys)
    assert line.startswith("Tic-tac-toe environment: the course's (tictactoe), as yours, my_envs/my_tictactoe, is ")
    assert "absent (notebook 05 writes it)" in line and USE in line


DIFFERENT = {  # a change to the learner's package -> what the fallback line must name
    "another system prompt": (
        "You are playing tic-tac-toe as X against",
        "You play tic-tac-toe as X against",
        "its system prompt is 'You play",
    ),
    "another board rendering": (
        "board[cell] or str(cell)",
        'board[cell] or "."',
        "has the question",
    ),
    "another opponent's dice": (
        'rng = random.Random(f"{game_seed}:{board_to_text(board)}")',
        'rng = random.Random(f"{game_seed};{board_to_text(board)}")',
        "has the info",
    ),
    "another format reward weight": ("weights = [1.0, 0.2, -penalty", "weights = [1.0, 0.25, -penalty", "its rubric"),
    "no diagonal wins": (", (0, 4, 8), (2, 4, 6)]", "]", "in game seed"),
    "a module that does not import": (
        "MODEL = 'X'",
        "MODEL = 'X'\nraise RuntimeError('half written')",
        "does not load or play: RuntimeError: half written",
    ),
}


@pytest.mark.parametrize("change", DIFFERENT)
def test_a_different_environment_falls_back_to_the_reference_and_names_the_difference(
    change, package_text, tmp_path, capsys
):
    """Catches: a learner's environment that plays other games (other prompts, dice, rewards or rules) used by 06
    and 09 as if it were the course's (their stored games are shared with 08 and 10), or a fallback that does not
    say what differs."""
    old, new, named = DIFFERENT[change]
    assert old in package_text
    assert yours_or_reference(USE, learner_package(tmp_path, package_text.replace(old, new, 1))) is tictactoe
    line = one_line(capsys)
    assert line.startswith("Tic-tac-toe environment: the course's (tictactoe), as yours, my_envs/my_tictactoe, does ")
    assert named in line and line.endswith(f"; {USE}.")
