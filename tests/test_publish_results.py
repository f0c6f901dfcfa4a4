"""The executed copies a reader sees on GitHub: only a copy whose code is the notebook's current code
is published, with a note on the run that made it, and its figures get smaller, not different."""

import base64
import io
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402

from course_lib import publish_results  # noqa: E402


def figure_png() -> str:
    figure, axis = plt.subplots(figsize=(4, 3))
    axis.plot(range(50), [i**0.5 for i in range(50)], label="a curve")
    axis.legend()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def notebook(code: str, image: str | None = None) -> dict:
    cell = {"cell_type": "code", "id": "c1", "metadata": {}, "source": [code], "outputs": [], "execution_count": None}
    if image:
        cell["metadata"]["execution"] = {
            "iopub.execute_input": "2026-11-25T10:00:00.000000Z",
            "shell.execute_reply": "2026-11-25T10:02:30.000000Z",
        }
        cell["outputs"] = [{"output_type": "display_data", "metadata": {}, "data": {"image/png": image}}]
    return {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def course_folders(tmp_path, monkeypatch):
    """notebooks/, outputs/ (with notebooks/ in it) and executed/ under tmp_path, as publish_results sees them."""
    notebooks, outputs, published = tmp_path / "notebooks", tmp_path / "outputs", tmp_path / "executed"
    (outputs / "notebooks").mkdir(parents=True)
    notebooks.mkdir()
    monkeypatch.setattr(publish_results, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(publish_results, "PUBLISHED", published)
    monkeypatch.setattr(publish_results, "output_dir", lambda profile: outputs)
    return notebooks, outputs, published


def test_only_current_copies_are_published_with_their_run_and_smaller_figures(tmp_path, monkeypatch):
    """Catches: a stale executed copy shown as the course's result; a published copy deleted because
    this clone has no outputs/; a figure made larger or unreadable."""
    notebooks, outputs, published = course_folders(tmp_path, monkeypatch)
    image = figure_png()
    for name, code in (("01_a.ipynb", "plot()"), ("02_b.ipynb", "new_code()")):
        (notebooks / name).write_text(json.dumps(notebook(code)))
    (outputs / "notebooks" / "01_a.ipynb").write_text(json.dumps(notebook("plot()", image)))
    (outputs / "notebooks" / "02_b.ipynb").write_text(json.dumps(notebook("old_code()", image)))

    left_out = publish_results.publish("cpu")

    assert left_out == ["02_b.ipynb: its executed copy is older than its code"]
    copy = json.loads((published / "cpu" / "01_a.ipynb").read_text())
    note = copy["cells"][0]["source"][0]  # which run made it, its times in RESULTS.md (not a banner in every copy)
    assert note.startswith("> **Executed copy**") and "recorded run" in note and "UTC" not in note
    shown = copy["cells"][1]["outputs"][0]["data"]["image/png"]
    assert len(shown) <= len(image)
    before, after = (Image.open(io.BytesIO(base64.b64decode(x))).convert("RGB") for x in (image, shown))
    assert (
        before.size == after.size
        and max(abs(a - b) for a, b in zip(before.getpixel((200, 150)), after.getpixel((200, 150)))) < 16
    )

    (outputs / "notebooks" / "01_a.ipynb").unlink()  # a fresh clone: nothing under outputs/
    assert publish_results.publish("cpu") == ["02_b.ipynb: its executed copy is older than its code"]
    assert (published / "cpu" / "01_a.ipynb").is_file()  # still current: kept
    (notebooks / "01_a.ipynb").write_text(json.dumps(notebook("plot(changed=True)")))
    assert publish_results.publish("cpu")[0] == "01_a.ipynb: not run in this profile"
    assert not (published / "cpu" / "01_a.ipynb").exists()  # its results no longer hold


def test_a_run_at_other_budgets_is_not_published_over_the_profiles_own(tmp_path, monkeypatch):
    """Catches: a trial run at cut budgets (same code, say GRPO 3 steps instead of 5) published as the
    course's result over the copy of a run at the profile's budgets; the help option taken as a profile."""
    from course_lib.profiles import PROFILES
    from course_lib.run_notebooks import BUDGETS_KEY

    notebooks, outputs, published = course_folders(tmp_path, monkeypatch)
    (notebooks / "09_a.ipynb").write_text(json.dumps(notebook("train()")))
    executed = notebook("train()", figure_png())
    executed["metadata"][BUDGETS_KEY] = PROFILES["cpu"].as_table()
    (outputs / "notebooks" / "09_a.ipynb").write_text(json.dumps(executed))
    assert publish_results.publish("cpu") == []  # the profile's own budgets: published
    first = (published / "cpu" / "09_a.ipynb").read_text()

    executed["metadata"][BUDGETS_KEY]["grpo.max_steps"] = 3
    (outputs / "notebooks" / "09_a.ipynb").write_text(json.dumps(executed))
    assert publish_results.publish("cpu") == [
        f"09_a.ipynb: its executed copy ran at other budgets (grpo.max_steps 3, now {PROFILES['cpu'].grpo.max_steps})"
    ]
    assert (published / "cpu" / "09_a.ipynb").read_text() == first  # the copy at the profile's budgets stays
    assert publish_results.publish_from_command_line(["cpu", "--help"]) == 0
    assert publish_results.publish_from_command_line(["cpu", "smoke"]) == 2


def test_the_published_copy_shows_the_text_written_after_its_run():
    """Catches: a header's measured time or a result written after the run missing from the copy
    readers see, or text put beside the wrong cell when cells were added since the run."""
    text = {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["new text"]}
    executed = notebook("plot()", figure_png())
    executed["cells"].insert(0, {**text, "source": ["text at run time"]})
    current = notebook("plot()")
    current["cells"].insert(0, text)
    publish_results.with_current_text(executed, current)
    assert executed["cells"][0]["source"] == ["new text"] and executed["cells"][1]["outputs"]
    current["cells"].insert(0, {**text, "id": "m0"})  # a cell added since: the run's own text stays
    executed["cells"][0]["source"] = ["text at run time"]
    publish_results.with_current_text(executed, current)
    assert executed["cells"][0]["source"] == ["text at run time"]


def test_a_progress_bar_is_published_as_it_ended():
    """Catches: every redraw of a progress bar kept as its own output (hundreds of lines on GitHub)."""
    outputs = [
        {"output_type": "stream", "name": "stderr", "text": ["games:   0%| 0/4\r"]},
        {"output_type": "stream", "name": "stderr", "text": ["games:  50%| 2/4\r", "games: 100%| 4/4\n"]},
        {"output_type": "stream", "name": "stdout", "text": ["done\n"]},
    ]
    settled = publish_results.settled_streams(outputs)
    assert [o["name"] for o in settled] == ["stderr", "stdout"]
    assert settled[0]["text"] == "games: 100%| 4/4\n"


def test_the_readme_links_exactly_the_published_copies():
    """Catches: a README link to an executed copy that was removed as stale, or a published one not linked."""
    import re

    readme = (publish_results.ROOT / "README.md").read_text()
    linked = set(re.findall(r"\(executed/cpu/(\d\d_\w+\.ipynb)\)", readme))
    assert linked == {p.name for p in (publish_results.PUBLISHED / "cpu").glob("*.ipynb")}
