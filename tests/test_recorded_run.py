"""RESULTS.md's numbers of the recorded course run come from the executed copies in executed/cpu/ (issue 67): each
row of its "recorded run" table names a notebook and a value that notebook's published outputs must show, and the
seconds per notebook are the published copy's own, from the timestamps nbclient wrote in its cells."""

import json
import re
from pathlib import Path

import pytest

from course_lib import publish_results

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "RESULTS.md"
COPIES = ROOT / "executed" / "cpu"
MARKER = "<!-- recorded-run numbers: tests/test_recorded_run.py checks each against executed/cpu/ -->"
ROW = re.compile(r"^\|\s*(\d\d)\s*\|[^|]*\|\s*`([^`]+)`\s*\|", re.MULTILINE)
SECONDS_MARKER = "<!-- recorded-run seconds: each notebook's, from its executed copy's cell timestamps -->"
SECONDS = re.compile(r"\|\s*(\d\d) [^|]+\|\s*([\d,]+)\s*\|")


def table_after(text: str, marker: str) -> str:
    """The markdown table that follows `marker` (up to the first blank line after it)."""
    start = text.index(marker) + len(marker)
    return text[start:].strip("\n").split("\n\n")[0]


def shown(notebook: dict) -> str:
    """Everything the notebook's outputs show as text."""
    texts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            texts.append("".join(output.get("text", "")))
            for key, value in output.get("data", {}).items():
                if key.startswith("text/"):
                    texts.append("".join(value) if isinstance(value, list) else value)
    return "\n".join(texts)


def copy_of(number: str, folder: Path = COPIES) -> dict:
    (path,) = folder.glob(f"{number}_*.ipynb")
    return json.loads(path.read_text())


def mismatches(results: str, folder: Path = COPIES) -> list[str]:
    """Each recorded-run value RESULTS.md states that its notebook's executed copy does not show."""
    rows = ROW.findall(table_after(results, MARKER))
    assert rows, "RESULTS.md's recorded-run table has no rows"
    return [f"{number}: {value!r}" for number, value in rows if value not in shown(copy_of(number, folder))]


def test_every_recorded_run_number_in_results_is_what_its_executed_copy_shows():
    """Catches: RESULTS.md quoting a number the published notebook does not show (tool SFT "4/60 -> 17/60" in
    RESULTS against "0/40 -> 13/40" in notebook 08's executed copy)."""
    assert mismatches(RESULTS.read_text()) == []


def test_a_planted_mismatch_is_found(tmp_path):
    notebook = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "stream", "text": "13/40 right\n"}]}]}
    (tmp_path / "08_x.ipynb").write_text(json.dumps(notebook))
    table = f"{MARKER}\n| notebook | what | shown |\n|---|---|---|\n| 08 | tool SFT | `{{}}` |\n"
    assert mismatches(table.format("13/40"), tmp_path) == []
    assert mismatches(table.format("17/60"), tmp_path) == ["08: '17/60'"]


@pytest.mark.parametrize("number, seconds", SECONDS.findall(table_after(RESULTS.read_text(), SECONDS_MARKER)))
def test_the_seconds_per_notebook_are_the_executed_copys(number, seconds):
    """Catches: a timing table from another run than the published one."""
    _, measured = publish_results.run_window(copy_of(number))
    assert abs(measured - int(seconds.replace(",", ""))) <= 1, (number, measured)
