"""Every notebook is a valid, clean file and opens by telling the learner what to expect."""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.bootstrap import first_cell

COLAB_BOOTSTRAP = first_cell()  # from course_lib/bootstrap.py: the course's address in one place
NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_the_course_has_its_thirteen_notebooks_in_order():
    """Catches: a notebook missing, misnumbered or added without updating the lists of notebooks
    (README's table, notebook 00's map, CONTRIBUTING): 00-11 the course, 12 the appendix."""
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(13)]
    assert NOTEBOOKS[-1].name == "12_appendix_infrastructure.ipynb"


def getsource_count(path: Path) -> int:
    return sum("".join(cell["source"]).count("getsource") for cell in json.loads(path.read_text())["cells"])


GETSOURCE_LIMIT = 15  # printouts of library source across the course (CONTRIBUTING: "15 such printouts at most")


def test_the_course_prints_library_source_at_most_15_times():
    """Catches: lessons turned back into reading engine internals (`inspect.getsource` of library
    code) instead of code the learner writes."""
    counts = {path.name: getsource_count(path) for path in NOTEBOOKS}
    assert sum(counts.values()) <= GETSOURCE_LIMIT, counts


def test_start_here_prints_no_source_and_the_appendix_at_most_once():
    """Catches: notebook 00, the course's first screen, filled again with library internals, or the
    appendix growing into a source listing."""
    by_name = {path.name: path for path in NOTEBOOKS}
    assert getsource_count(by_name["00_start_here.ipynb"]) == 0
    assert getsource_count(by_name["12_appendix_infrastructure.ipynb"]) <= 1


def test_readme_lists_every_notebook_with_a_colab_badge():
    """Catches: a notebook added (or renamed) without its row in the README's table, or a row whose
    Colab link opens another notebook."""
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    for path in NOTEBOOKS:
        assert f"](notebooks/{path.name})" in readme, f"README has no row linking {path.name}"
        colab = f"https://colab.research.google.com/github/llm-rl-course/llm-rl-environments/blob/main/notebooks/{path.name}"
        assert colab in readme, f"README has no Colab badge for {path.name}"


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


MARKDOWN_WORDS = 2_500  # a friendly page, like the original's chapters; the evidence lives in RESULTS.md


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_text_is_at_most_2500_words(path):
    """Catches: a notebook growing back into a lab notebook (05 once had 5,396 words of markdown)."""
    cells = json.loads(path.read_text())["cells"]
    words = sum(len("".join(cell["source"]).split()) for cell in cells if cell["cell_type"] == "markdown")
    assert words <= MARKDOWN_WORDS, f"{words} words of markdown: move provenance to RESULTS.md, cut repetition"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_second_cell_is_the_same_colab_bootstrap_everywhere(path):
    """Catches: a notebook that cannot run alone on Colab (no clone, no install, wrong path), or
    one that does not say which profile it runs in."""
    cell = json.loads(path.read_text())["cells"][1]
    assert cell["cell_type"] == "code" and "".join(cell["source"]).strip() == COLAB_BOOTSTRAP


def run_first_cell_on_colab(tmp_path, repo: str) -> subprocess.CompletedProcess:
    """The first cell's fetch, as Colab runs it (google.colab imported), up to the import it enables."""
    fetch = first_cell().split("from course_lib.bootstrap")[0]
    fake_colab = tmp_path / "google" / "colab"
    fake_colab.mkdir(parents=True)
    (fake_colab / "__init__.py").write_text("")
    (tmp_path / "google" / "__init__.py").write_text("")
    script = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import google.colab\n{fetch}"
    env = {"PATH": "/usr/bin:/bin", "COURSE_REPO": repo, "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)


def test_a_clone_that_fails_says_why_and_how_to_point_at_a_fork(tmp_path):
    """Catches: git's error hidden (the cell once sent it to /dev/null, and the learner met
    `ModuleNotFoundError: course_lib` a line later), or no word on how to fetch from elsewhere."""
    if Path("/content/course/course_lib").is_dir():
        pytest.skip("this machine has the course at /content/course: the cell would not clone")
    missing = tmp_path / "no-such-repository"
    done = run_first_cell_on_colab(tmp_path, str(missing))
    assert done.returncode != 0
    assert f"Could not fetch the course from {missing}" in done.stderr
    assert "does not exist" in done.stderr or "not a git repository" in done.stderr or "fatal" in done.stderr
    assert "%env COURSE_REPO=" in done.stderr and "upload the course" in done.stderr


def test_the_course_address_is_written_from_one_place(tmp_path):
    """Catches: a notebook or a README link left pointing at the old address after a fork's one command."""
    import shutil

    from course_lib import bootstrap

    copy = tmp_path / "course"
    shutil.copytree(Path(bootstrap.ROOT) / "notebooks", copy / "notebooks")
    shutil.copy(Path(bootstrap.ROOT) / "README.md", copy / "README.md")
    fork = "https://github.com/someone/my-fork"
    bootstrap.point_at(fork, root=copy)
    for path in sorted((copy / "notebooks").glob("*.ipynb")):
        assert "".join(json.loads(path.read_text())["cells"][1]["source"]) == first_cell(fork)
    readme = (copy / "README.md").read_text()
    assert "github/someone/my-fork/blob/main/notebooks/" in readme
    assert "github/llm-rl-course/llm-rl-environments/blob" not in readme


def test_run_notebooks_help_prints_usage_instead_of_running_nothing():
    """Catches: `--help` taken as a notebook prefix, which ran no notebook and reported success."""
    shown = subprocess.run([sys.executable, "-m", "course_lib.run_notebooks", "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "COURSE_PROFILE=cpu python -m course_lib.run_notebooks" in shown.stdout
    assert "running" not in shown.stdout
    wrong = subprocess.run(
        [sys.executable, "-m", "course_lib.run_notebooks", "--profile"], capture_output=True, text=True
    )
    assert wrong.returncode == 2


def test_run_notebooks_kernels_import_this_checkout_not_another(tmp_path, monkeypatch):
    """Catches: `make course` in a second clone whose kernels (started in notebooks/) import the checkout the
    editable install points at, running its code and writing into its outputs/ (it happened, results/JOURNAL.md)."""
    from course_lib import run_notebooks

    other = tmp_path / "other_checkout" / "course_lib"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(other.parent))
    run_notebooks.import_this_checkout_first()
    kernel_view = subprocess.run(
        [sys.executable, "-c", "import course_lib; print(course_lib.__file__)"],
        cwd=run_notebooks.NOTEBOOKS_DIR,
        capture_output=True,
        text=True,
    )
    assert kernel_view.stdout.strip() == str(run_notebooks.ROOT / "course_lib" / "__init__.py")


def test_contributings_layout_drawing_names_every_module_and_nothing_else():
    """Catches: a course_lib module or environment folder left out of CONTRIBUTING's layout drawing
    (shipped_models.py was), or a file the drawing names that no longer exists."""
    import re

    root = Path(__file__).parent.parent
    text = (root / "CONTRIBUTING.md").read_text()
    start = text.index("```\ncourse_lib/")
    drawing = text[start : text.index("```", start + 3)]
    package = root / "course_lib"
    modules = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    folders = [f"{p.name}/" for p in (package / "envs").iterdir() if p.is_dir() and not p.name.startswith("_")]
    assert [name for name in modules + folders if name not in drawing] == []
    existing = {p.name for p in package.rglob("*.py")}
    assert [name for name in re.findall(r"\b\w+\.py\b", drawing) if name not in existing] == []
