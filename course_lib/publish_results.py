"""Publish the executed notebooks of a course run, so a reader on GitHub sees every output and figure.

    make course                                   # runs the notebooks; executed copies in outputs/cpu/notebooks/
    python -m course_lib.publish_results [cpu]    # copies them to executed/<profile>/, figures compressed

A copy is published only if its code is the notebook's current code and it ran at the profile's
current budgets (a stale copy would show results the code or the budgets no longer give: it is
listed, with the command that refreshes it). Each published copy opens with a note saying which run
made it (profile, start, duration, from the cells' own timestamps); figures are re-encoded as
256-colour PNGs (about 3x smaller, no visible change for line plots).
"""

import base64
import io
import json
import sys
from datetime import datetime
from pathlib import Path

from PIL import Image

from course_lib.profiles import PROFILES, output_dir
from course_lib.run_notebooks import BUDGETS_KEY

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PUBLISHED = ROOT / "executed"


def code_of(notebook: dict) -> list[str]:
    return ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]


def smaller_png(data: str) -> str:
    """The base64 PNG as a 256-colour PNG, when that is smaller."""
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    buffer = io.BytesIO()
    image.convert("RGB").quantize(256).save(buffer, format="PNG", optimize=True)
    smaller = base64.b64encode(buffer.getvalue()).decode()
    return smaller if len(smaller) < len(data) else data


def settled_streams(outputs: list[dict]) -> list[dict]:
    """Consecutive stdout/stderr outputs merged, each line as a terminal leaves it (a progress bar
    redrawn with carriage returns shows its last state, not every update)."""
    merged = []
    for output in outputs:
        if output.get("output_type") == "stream" and merged and merged[-1].get("name") == output.get("name"):
            merged[-1] = {**merged[-1], "text": "".join(merged[-1]["text"]) + "".join(output["text"])}
        else:
            merged.append(output)
    for output in merged:
        if output.get("output_type") == "stream":
            lines = "".join(output["text"]).split("\n")
            output["text"] = "\n".join(line.rstrip("\r").split("\r")[-1] for line in lines)
    return merged


def run_window(notebook: dict) -> tuple[datetime, float] | None:
    """When the run started and how long it took, from the timestamps nbclient writes in each cell."""
    stamps = [
        datetime.fromisoformat(time.replace("Z", "+00:00"))
        for cell in notebook["cells"]
        for key, time in cell.get("metadata", {}).get("execution", {}).items()
        if key in ("iopub.execute_input", "shell.execute_reply")
    ]
    return (min(stamps), (max(stamps) - min(stamps)).total_seconds()) if stamps else None


def changed_budgets(executed: dict, profile) -> str:
    """The budgets the run used that the profile has since changed ("grpo.max_steps 3, now 5"), or ""
    (also for a copy run before `run_notebooks` recorded them)."""
    now = profile.as_table()
    used = executed.get("metadata", {}).get(BUDGETS_KEY, {})
    changed = [key for key, value in used.items() if key != "description" and now.get(key) != value]
    return ", ".join(f"{key} {used[key]!r}, now {now.get(key)!r}" for key in changed)


def with_current_text(executed: dict, current: dict) -> None:
    """Put the notebook's current markdown into its executed copy, cell for cell, when both have the
    same cells: the code is the same, so the outputs hold, and text written after the run (the time
    it measured, the numbers it gave) is what a reader sees beside them."""
    if [cell["cell_type"] for cell in executed["cells"]] == [cell["cell_type"] for cell in current["cells"]]:
        for executed_cell, current_cell in zip(executed["cells"], current["cells"]):
            if current_cell["cell_type"] == "markdown":
                executed_cell["source"] = current_cell["source"]


def publish(profile_name: str = "cpu") -> list[str]:
    """Publish the current executed copies; return the notebooks left out, with why."""
    source_dir = output_dir(PROFILES[profile_name]) / "notebooks"
    target = PUBLISHED / profile_name
    target.mkdir(parents=True, exist_ok=True)
    left_out = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        current = json.loads(path.read_text())
        code, executed_path, published = code_of(current), source_dir / path.name, target / path.name
        executed = json.loads(executed_path.read_text()) if executed_path.is_file() else None
        budgets = changed_budgets(executed, PROFILES[profile_name]) if executed else ""
        if executed is None or code_of(executed) != code or run_window(executed) is None or budgets:
            kept = published.is_file() and code_of(json.loads(published.read_text())) == code
            if not kept:  # the copy published earlier no longer shows this code: its results are not shown
                published.unlink(missing_ok=True)
            if budgets:
                left_out.append(f"{path.name}: its executed copy ran at other budgets ({budgets})")
            elif not kept:
                why = "its executed copy is older than its code" if executed else "not run in this profile"
                left_out.append(f"{path.name}: {why}")
            continue
        with_current_text(executed, current)
        for cell in executed["cells"]:
            if "outputs" in cell:
                cell["outputs"] = settled_streams(cell["outputs"])
            for output in cell.get("outputs", []):
                if "image/png" in output.get("data", {}):
                    output["data"]["image/png"] = smaller_png(output["data"]["image/png"])
        started, seconds = run_window(executed)
        executed["cells"].insert(
            0,
            {
                "cell_type": "markdown",
                "id": "executed-copy-note",
                "metadata": {},
                "source": [
                    f"> **Executed copy** of `notebooks/{path.name}`, run in the `{profile_name}` profile on "
                    f"{started:%Y-%m-%d %H:%M} UTC ({seconds / 60:.1f} min from its first cell to its last); "
                    f"outputs as that run made them. To run it yourself, open "
                    f"[`notebooks/{path.name}`](../../notebooks/{path.name})."
                ],
            },
        )
        published.write_text(json.dumps(executed, indent=1, ensure_ascii=False) + "\n")
    return left_out


def publish_from_command_line(argv: list[str]) -> int:
    if len(argv) > 1 or (argv and argv[0] not in PROFILES):  # `--help`, a typo, or a second argument
        print(__doc__)
        return 0 if set(argv) & {"-h", "--help"} else 2
    profile_name = argv[0] if argv else "cpu"
    left_out = publish(profile_name)
    published = sorted((PUBLISHED / profile_name).glob("*.ipynb"))
    size = sum(p.stat().st_size for p in published) / 1e6
    print(f"{len(published)} executed notebooks in executed/{profile_name}/ ({size:.1f} MB)")
    for line in left_out:
        print(f"  not published: {line} (COURSE_PROFILE={profile_name} python -m course_lib.run_notebooks NN)")
    return 0


if __name__ == "__main__":
    sys.exit(publish_from_command_line(sys.argv[1:]))
