"""The experiments of notebooks 06, 07 and 10: the learner reads a plot, writes what it shows into
`answer`, then changes the setting to see what moves; a check in course_lib/exercises.py says whether
the reading is right.

Every check passes the right reading, fails a wrong one (and the reading at another setting) with one
sentence (ExerciseError), and lets "Run All" go on while `answer` is None. The notebook's own cells are
checked too: its check cell starts unanswered, the worked answer below it (a collapsed <details> block)
states the value the check accepts, and the plot is drawn at the setting the question asks about, so a
reader of the executed copy can answer without running it.
"""

import json
import re

import pytest

from course_lib import exercise_mechanism, exercises
from course_lib.exercise_mechanism import ExerciseError

EXPERIMENTS = [  # notebook, check, the right reading, wrong readings (the mistake each stands for)
    ("06_evaluate_models.ipynb", exercises.check_wald_coverage, 0.64, [0.88, 0.925, 0.95, "0.64"]),
    # 0.88: read at games = 100; 0.925: read the Wilson curve; 0.95: the nominal level; "0.64": text, not a number
    ("07_sft_data_generation.ipynb", exercises.check_strong_opponent_draws, 0.69, [0.36, 0.31, 0.9]),
    # 0.36: read the upper bar (every game); 0.31: read the wins' part; 0.9: a guess
    ("10_evaluation_and_plots.ipynb", exercises.check_games_to_confirm, 250, [200, 300, 100, 225]),
    # 200: p 0.0106 read as below 0.01; 300: not the fewest; 100: the cpu profile's games; 225: not a step of 50
]
IDS = [notebook[:2] for notebook, *_ in EXPERIMENTS]


@pytest.mark.parametrize("notebook, check, right, wrong", EXPERIMENTS, ids=IDS)
def test_the_right_reading_passes(notebook, check, right, wrong, capsys):
    check(right)
    assert capsys.readouterr().out.startswith("Correct: ")


@pytest.mark.parametrize("notebook, check, right, wrong", EXPERIMENTS, ids=IDS)
def test_a_wrong_reading_fails_with_one_sentence(notebook, check, right, wrong):
    """Catches: a check that accepts anything, or answers a mistake with a traceback instead of a hint."""
    for answer in wrong:
        with pytest.raises(ExerciseError) as error:
            check(answer)
        assert len(str(error.value)) > 30 and "\n" not in str(error.value), answer


@pytest.mark.parametrize("notebook, check, right, wrong", EXPERIMENTS, ids=IDS)
def test_no_answer_yet_lets_the_notebook_run_on(notebook, check, right, wrong, capsys):
    """Catches: a check that fails "Run All" (CI, make course) while the learner has not answered."""
    check(None)
    assert capsys.readouterr().out.startswith("Not answered yet")


def cells(notebook: str) -> list[dict]:
    return json.loads((exercise_mechanism.NOTEBOOKS / notebook).read_text())["cells"]


@pytest.mark.parametrize("notebook, check, right, wrong", EXPERIMENTS, ids=IDS)
def test_the_notebook_asks_then_checks_then_explains(notebook, check, right, wrong):
    """Catches: an answer filled in above the check (then "Run All" passes with no input), a worked
    answer that is not collapsed or sits above the check, or one that disagrees with the check."""
    found = cells(notebook)
    (at,) = [i for i, c in enumerate(found) if f"exercises.{check.__name__}(answer)" in "".join(c["source"])]
    source = "".join(found[at]["source"])
    assert found[at]["cell_type"] == "code" and "check" in found[at]["metadata"].get("tags", [])
    assert re.search(r"^answer = None\b", source, re.MULTILINE), "the check cell starts unanswered"
    after = found[at + 1]
    text = "".join(after["source"])
    assert after["cell_type"] == "markdown" and text.startswith("<details>"), "a collapsed worked answer follows"
    assert "solution" not in after["metadata"].get("tags", []), "tests/test_exercises.py runs 'solution' cells"
    stated = re.search(r"\*\*Answer: ([0-9]+(?:\.[0-9]+)?)", text)
    assert stated, "the worked answer states the value as **Answer: ...**"
    check(float(stated.group(1)) if "." in stated.group(1) else int(stated.group(1)))


@pytest.mark.parametrize("notebook, check, right, wrong", EXPERIMENTS, ids=IDS)
def test_the_published_plot_shows_the_setting_the_question_asks_about(notebook, check, right, wrong):
    """Catches: an executed copy whose plot is drawn at another setting than the one the question names, so
    that a reader on GitHub cannot answer (the plot cell just above the check sets it on its first line).
    10 asks for the fewest games that confirm, so its plot draws p at every setting as well."""
    found = cells(notebook)
    (at,) = [i for i, c in enumerate(found) if f"exercises.{check.__name__}(answer)" in "".join(c["source"])]
    plot_cell = "".join(found[at - 1]["source"])
    name, value = re.match(r"(\w+) = ([0-9.]+)", plot_cell.splitlines()[0]).groups()
    if notebook.startswith("10"):
        assert name == "games" and "range(50, 301, 50)" in plot_cell and "p_value" in plot_cell
        return
    asked = {"06": ("games", 20), "07": ("max_random_move_prob", 0.3), "09": ("window", 5)}
    assert name == asked[notebook[:2]][0], f"the plot cell's first line sets {name}, not the setting the question names"
    assert float(value) == asked[notebook[:2]][1], f"{name} starts at {value}, not at the value the question asks about"
