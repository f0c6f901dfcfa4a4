"""Every notebook is a valid, clean file and opens by telling the learner what to expect."""

import json
from pathlib import Path

import nbformat
import pytest

COLAB_BOOTSTRAP = """\
# Set up the course: on Colab, fetch it and install what this runtime needs (once, a few minutes);
# everywhere, print the profile chosen for this machine and why (course_lib/bootstrap.py).
import sys
if "google.colab" in sys.modules:
    !git clone -q https://github.com/llm-rl-course/llm-rl-environments /content/course 2>/dev/null
    sys.path.insert(0, "/content/course")
from course_lib.bootstrap import setup
setup()"""
NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_the_course_has_its_twelve_notebooks_in_order():
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(12)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_valid_with_cell_ids_and_no_saved_outputs(path):
    # Read the raw JSON: nbformat.read would silently add missing cell ids.
    raw = json.loads(path.read_text())
    assert all("id" in cell for cell in raw["cells"]), "a cell has no id (nbformat will reject it)"
    nbformat.validate(nbformat.from_dict(raw))
    code_cells = [cell for cell in raw["cells"] if cell["cell_type"] == "code"]
    assert not any(cell["outputs"] for cell in code_cells), "outputs are committed: clear them"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_opens_with_goal_budget_per_profile_and_what_to_see(path):
    opening = "".join(json.loads(path.read_text())["cells"][0]["source"])
    assert "**Goal:**" in opening
    assert "**Time and hardware:**" in opening
    assert all(f"`{profile}`" in opening for profile in ("smoke", "cpu", "gpu", "full"))
    assert "**What you should see:**" in opening


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_second_cell_is_the_same_colab_bootstrap_everywhere(path):
    """Catches: a notebook that cannot run alone on Colab (no clone, no install, wrong path), or
    one that does not say which profile it runs in."""
    cell = json.loads(path.read_text())["cells"][1]
    assert cell["cell_type"] == "code" and "".join(cell["source"]).strip() == COLAB_BOOTSTRAP


def test_run_notebooks_help_prints_usage_instead_of_running_nothing():
    """Catches: `--help` taken as a notebook prefix, which ran no notebook and reported success."""
    import subprocess
    import sys

    shown = subprocess.run([sys.executable, "-m", "course_lib.run_notebooks", "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "COURSE_PROFILE=cpu python -m course_lib.run_notebooks" in shown.stdout
    assert "running" not in shown.stdout
    wrong = subprocess.run(
        [sys.executable, "-m", "course_lib.run_notebooks", "--profile"], capture_output=True, text=True
    )
    assert wrong.returncode == 2
