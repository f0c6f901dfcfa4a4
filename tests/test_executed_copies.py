"""The executed copies in executed/ (what a reader sees on GitHub) read cleanly: no saved progress bars or
library warnings, nothing of the machine that ran them, tables as tables, and text that does not type a
number of this run (the output beside it prints it; RESULTS.md keeps the recorded run's)."""

import json
import re
from pathlib import Path

import pytest

from course_lib import publish_results

ROOT = Path(__file__).resolve().parent.parent
COPIES = sorted((ROOT / "executed").rglob("[0-9][0-9]_*.ipynb"))
MACHINE_PATH = re.compile(r"(?<![\w.~])/(?:work|root|home|Users|tmp)/")
HOST_STRING = re.compile(r"\b(?:Linux|Darwin|Windows)-\d[\w.\-]*")


def output_texts(notebook: dict):
    """(cell index, output type, text) for every text an output shows."""
    for index, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                yield index, f"stream {output.get('name')}", "".join(output["text"])
            for key, value in output.get("data", {}).items():
                if key.startswith("text/"):
                    yield index, key, "".join(value) if isinstance(value, list) else value
            if output.get("output_type") == "error":
                yield index, "error", "\n".join(output.get("traceback", []))


@pytest.mark.parametrize("path", COPIES, ids=lambda p: p.name)
def test_no_saved_progress_bars_or_library_warnings(path):
    """Catches: progress widgets saved at "0%", tqdm blocks of a hundred lines, the same tokenizer warning
    in every notebook (what `make publish` now drops with `publish_results.clean_outputs`)."""
    notebook = json.loads(path.read_text())
    widgets = [
        i
        for i, c in enumerate(notebook["cells"])
        for o in c.get("outputs", [])
        if publish_results.WIDGET in o.get("data", {})
    ]
    assert widgets == [], f"progress widgets in cells {widgets}"
    bars = [i for i, kind, text in output_texts(notebook) if kind.startswith("stream") and re.search(r"\d+%\|", text)]
    assert bars == [], f"tqdm progress bars in cells {bars}"
    noisy = [
        (i, text[:80])
        for i, kind, text in output_texts(notebook)
        if kind == "stream stderr" and any(publish_results.LIBRARY_NOISE.search(line) for line in text.split("\n"))
    ]
    assert noisy == [], f"library warnings on stderr: {noisy}"


@pytest.mark.parametrize("path", COPIES, ids=lambda p: p.name)
def test_no_absolute_paths_host_strings_or_object_reprs(path):
    """Catches: the machine that made the run shown to every reader (/work/main/..., /root/.cache/...,
    `Linux-6.18...`), and a styled table shown as `<pandas.io.formats.style.Styler at 0x...>`."""
    found = []
    for index, kind, text in output_texts(json.loads(path.read_text())):
        for pattern in (MACHINE_PATH, HOST_STRING, re.compile(r"<pandas\.io\.formats\.style\.Styler at 0x")):
            found += [(index, kind, match.group(0)) for match in pattern.finditer(text)]
    assert found == []


# Being rewritten by other work on the course (their text still quotes runs): checked once that lands.
BEING_REWRITTEN: set[str] = set()
PERCENT = re.compile(r"(?<![\w.{:%])\d+(?:[.,]\d+)?\s?%")
# "p = 0.02", "p 0.25": a measurement; "p < 0.01" is a rule (a test's threshold), not a number of a run
P_VALUE = re.compile(r"\bp(?:-value)?\s*(?:=\s*)?(?:\d+(?:\.\d+)?e-\d+|0?\.\d+)")
CONFIDENCE_LEVEL = re.compile(r"\"?\b95%\"?(?=\s*(?:\w+\s+){0,2}?(?:intervals?|confidence|CI)\b)|\"95%\"")
CITES_THE_RECORD = re.compile(r"RESULTS|recorded run|JOURNAL|[Tt]he original\b")  # ours, or the original course's


def run_numbers(markdown: str) -> list[str]:
    """The percentages and p-values a markdown cell types outside a sentence that cites the course's
    record. Code (fenced or inline) and collapsed worked answers (`<details>`: exact values an exercise's
    check verifies) are not text of the run; a confidence level ("95% interval") is not a measurement."""
    text = re.sub(r"```.*?```|`[^`\n]*`|<details>.*?</details>", " ", markdown, flags=re.S)
    units = []
    for block in re.split(r"\n\s*\n", text):
        rows = [line for line in block.split("\n") if line.lstrip().startswith("|")]
        prose = " ".join(line for line in block.split("\n") if not line.lstrip().startswith("|"))
        units += rows + re.split(r"(?<=[.!?])\s+", prose)
    found = []
    for unit in units:
        if CITES_THE_RECORD.search(unit):
            continue
        unit = CONFIDENCE_LEVEL.sub(" ", unit)
        found += PERCENT.findall(unit) + P_VALUE.findall(unit)
    return found


@pytest.mark.parametrize("path", [p for p in COPIES if p.name[:2] not in BEING_REWRITTEN], ids=lambda p: p.name)
def test_text_types_no_number_of_this_run(path):
    """Catches: markdown beside an output quoting a different run ("45% -> 53%, p 0.13" above a cell that
    printed 47.7% -> 51.6%). The cell that computes a number prints it; the text says what to look for, or
    cites RESULTS.md for the recorded run."""
    cells = json.loads(path.read_text())["cells"]
    found = {
        cell.get("id"): numbers
        for cell in cells
        if cell["cell_type"] == "markdown" and (numbers := run_numbers("".join(cell["source"])))
    }
    assert found == {}


def test_the_number_rule_sees_runs_and_spares_citations_and_confidence_levels():
    """Catches: a rule too loose to see a quoted run, or so strict it flags a 95% interval or a citation."""
    assert run_numbers("After SFT it wins 52% of its games (p 0.25).") == ["52%", "p 0.25"]
    assert run_numbers("p = 4e-31 here.") == ["p = 4e-31"]
    assert run_numbers("The recorded run (RESULTS.md) wins 52%.") == []
    assert run_numbers("The original's model drew 85% against the optimal opponent.") == []
    assert run_numbers('Every rate has a 95% Wilson interval; how often is a "95%" interval right?') == []
    assert run_numbers("`f'{x:.2%}'` and <details>Answer: 64%</details>") == []
    assert run_numbers("| model | 45% |\n|---|---|") == ["45%"]
    assert run_numbers("Better if it rises with p < 0.01 and neither falls with p < 0.05.") == []


def test_the_cleaner_drops_bars_warnings_and_the_machine():
    """Catches: `make publish` keeping what the pins above forbid, or dropping a real message."""
    outputs = [
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {publish_results.WIDGET: {}, "text/plain": ["Map: 0%|"]},
        },
        {"output_type": "stream", "name": "stderr", "text": ["games:  45%|████ | 9/20 [00:03<00:04]\r"]},
        {"output_type": "stream", "name": "stderr", "text": ["[transformers] Ignoring clean_up_tokenization_spaces\n"]},
        {
            "output_type": "stream",
            "name": "stdout",
            "text": ["saved /work/main/outputs/cpu/06.csv on Linux-6.18-x86_64\n"],
        },
        {"output_type": "stream", "name": "stderr", "text": ["ExerciseError: my_wilson(0, 20) gave (0, 0)\n"]},
        {
            "output_type": "execute_result",
            "metadata": {},
            "execution_count": 1,
            "data": {"text/plain": ["<pandas.io.formats.style.Styler at 0x7fd10908ea50>"], "text/html": ["<table/>"]},
        },
    ]
    cleaned = publish_results.clean_outputs(outputs)
    assert [o.get("name") for o in cleaned] == ["stdout", "stderr", None]
    assert cleaned[0]["text"] == "saved outputs/cpu/06.csv on Linux\n"
    assert "ExerciseError" in cleaned[1]["text"]
    assert "Styler" not in cleaned[2]["data"]["text/plain"] and cleaned[2]["data"]["text/html"] == "<table/>"
    assert publish_results.portable("/root/.cache/llm-rl-course/x") == "~/.cache/llm-rl-course/x"
    # a run with XDG_CACHE_HOME elsewhere (the course run of a fresh clone with empty caches)
    assert publish_results.portable("/work/cache/huggingface/trackio") == "~/.cache/huggingface/trackio"
    assert publish_results.portable("/work/cache/llm-rl-course/SmolLM2") == "~/.cache/llm-rl-course/SmolLM2"
    assert publish_results.relinked("[a](../RESULTS.md) [b](08_x.ipynb)") == "[a](../../RESULTS.md) [b](08_x.ipynb)"


def test_the_cleaner_drops_dashboards_tokens_and_the_speed_line_outside_00_and_12():
    """Catches: trackio's live dashboard published as an iframe with a write token in its address, its status
    lines, and the CPU's speed line repeated in every notebook (issue 67); a real line beside them is kept."""
    iframe = '<iframe src="http://127.0.0.1:7860/?project=x&write_token=abc123" width="100%"></iframe>'
    outputs = [
        {"output_type": "display_data", "metadata": {}, "data": {"text/html": [iframe], "text/plain": ["<HTML>"]}},
        {
            "output_type": "stream",
            "name": "stdout",
            "text": [
                "Profile 'cpu': picked from the hardware.\n",
                "This CPU: fp32 matmul 140 GFLOP/s (measured now; other running jobs lower it), about the 140 of ...\n",
                "* Trackio project initialized: llm-rl-environments\n",
                "* Run finished. Uploading logs to Trackio (please wait...)\n",
                "saved outputs/cpu/grpo/final\n",
            ],
        },
    ]
    for name, speed_kept in (("09_grpo_training.ipynb", False), ("00_start_here.ipynb", True)):
        cleaned = publish_results.cleaned_copy({"cells": [{"cell_type": "code", "outputs": outputs}]}, name)
        shown = json.dumps(cleaned)
        assert "iframe" not in shown and "write_token" not in shown and "Trackio" not in shown
        assert "saved outputs/cpu/grpo/final" in shown and "Profile 'cpu'" in shown
        assert ("This CPU: fp32 matmul" in shown) == speed_kept, name


@pytest.mark.parametrize("path", COPIES, ids=lambda p: p.name)
def test_no_dashboard_token_speed_line_or_run_banner(path):
    """Catches (issue 67): trackio's iframe and its write token published, the CPU's speed line in every notebook
    instead of 00 and 12, and a banner with the run's UTC time on every copy (RESULTS.md has the run's times)."""
    notebook = json.loads(path.read_text())
    texts = "\n".join(text for _, _, text in output_texts(notebook))
    assert "<iframe" not in texts and "write_token" not in texts and "Trackio" not in texts
    assert ("This CPU: fp32 matmul" in texts) == path.name.startswith(publish_results.SPEED_SAID_IN)
    note = "".join(notebook["cells"][0]["source"])
    assert note.startswith("> **Executed copy**") and "UTC" not in note
