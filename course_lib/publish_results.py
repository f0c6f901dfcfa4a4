"""Publish the executed notebooks of a course run, so a reader on GitHub sees every output and figure.

    make course                                   # runs the notebooks; executed copies in outputs/cpu/notebooks/
    python -m course_lib.publish_results [cpu]    # copies them to executed/<profile>/, figures compressed

A copy is published only if its code is the notebook's current code and it ran at the profile's
current budgets (a stale copy would show results the code or the budgets no longer give: it is
listed, with the command that refreshes it). Each published copy opens with a note saying which run
made it (its date, host and times are in RESULTS.md, not in every notebook); figures are re-encoded as
256-colour PNGs (about 3x smaller, no visible change for line plots). Outputs are cleaned for reading
(`clean_outputs`): no saved progress bars or library warnings, no absolute paths of the machine or host
strings, no `Styler` object reprs where the table itself is saved; markdown links are made to resolve from
executed/<profile>/ (`relinked`).
"""

import base64
import io
import json
import re
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


PROGRESS_BAR = re.compile(r"\d+%\||\d+/\d+ \[\d+:\d+")  # tqdm: "45%|████ | 9/20 [00:03<00:04, ...]"
LIBRARY_NOISE = re.compile(r"warn|^\s*\[[\w.-]+\] ", re.IGNORECASE)  # warnings, "[transformers] Ignoring ..."
WIDGET = "application/vnd.jupyter.widget-view+json"
HOST = re.compile(r"\b(Linux|Darwin|Windows|macOS)-\d[\w.\-]*")  # platform.platform(): kernel, arch, libc
COURSE_FOLDERS = "outputs|my_envs|course_lib|notebooks|data|assets|executed|results|dev|tests"
CHECKOUT_PATH = re.compile(  # an absolute prefix before one of the course's folders (not a library's own)
    rf"(?<![\w.~])(?![^\s'\"]*(?:site|dist)-packages)(?:/[^\s'\"<>()\[\]/]+)+/(?=(?:{COURSE_FOLDERS})\b)"
)
HOME_PATH = re.compile(r"(?<![\w.~])(?:/root|/home/[^\s'\"<>/]+|/Users/[^\s'\"<>/]+)(?=/)")
CACHE_FOLDERS = "llm-rl-course|huggingface"  # what the course and Hugging Face keep under the cache folder
# Run chatter a reader needs once, not in every notebook: the CPU's speed line (said in 00 and 12, the notebooks
# about the course and its machinery); a live dashboard embedded as an iframe (trackio's: blank on GitHub, and its
# address carries a write token) and the lines around it.
SPEED_LINE = re.compile(r"^This CPU: fp32 matmul .*$\n?", re.MULTILINE)
SPEED_SAID_IN = ("00_", "12_")
DASHBOARD_LINE = re.compile(
    r"^(?:\* )?(?:Trackio|Curves also go to trackio|\* Run finished|\* Created new run|\* Resumed).*$\n?",
    re.MULTILINE | re.IGNORECASE,
)
CACHE_PATH = re.compile(  # any cache folder (XDG_CACHE_HOME may point anywhere) before one of those
    rf"(?<![\w.~])(?:/[^\s'\"<>()\[\]/]+)+/(?=(?:{CACHE_FOLDERS})/)"
)


def portable(text: str, checkout: str = str(ROOT)) -> str:
    """Text without the machine in it: the checkout's absolute path gone (paths relative to the course's
    root), the cache folder as `~/.cache` wherever XDG_CACHE_HOME pointed, a home folder as `~`, a platform
    string (`Linux-6.18.44-...-x86_64-with-glibc2.36`) as its OS."""
    text = text.replace(checkout.rstrip("/") + "/", "")
    text = CHECKOUT_PATH.sub("", text)
    text = CACHE_PATH.sub("~/.cache/", text)
    text = HOME_PATH.sub("~", text)
    return HOST.sub(r"\1", text)


def quiet_stream(text: str) -> str:
    """A stderr stream without progress bars and library warnings (what is left, if anything, is kept)."""
    kept = [line for line in text.split("\n") if not (PROGRESS_BAR.search(line) or LIBRARY_NOISE.search(line))]
    return "\n".join(kept).strip("\n") + "\n" if any(line.strip() for line in kept) else ""


def clean_outputs(outputs: list[dict], speed_line: bool = False) -> list[dict]:
    """Outputs as a reader wants them: progress-bar widgets and tqdm/warning streams dropped, the machine's
    paths and host strings made portable, and a `Styler` object's repr dropped where its HTML is saved; an
    embedded dashboard and its lines dropped, and the CPU's speed line unless `speed_line`."""
    cleaned = []
    for output in settled_streams(outputs):
        output = json.loads(json.dumps(output))  # a copy: the caller's outputs stay as they were
        data = output.get("data", {})
        if WIDGET in data or "<iframe" in "".join(data.get("text/html", "")):
            continue  # a progress widget saved at whatever it showed, or a live dashboard: nothing to read on GitHub
        if output.get("output_type") == "stream":
            text = "".join(output["text"])
            text = quiet_stream(text) if output.get("name") == "stderr" else text
            text = DASHBOARD_LINE.sub("", text if speed_line else SPEED_LINE.sub("", text))
            if not text.strip():
                continue
            output["text"] = portable(text)
        for key in list(data):
            if key.startswith("text/"):
                value = "".join(data[key]) if isinstance(data[key], list) else data[key]
                data[key] = portable(value)
        if "Styler at 0x" in data.get("text/plain", "") and "text/html" in data:
            data["text/plain"] = "(the table above)"
        if output.get("output_type") == "error":
            output["traceback"] = [portable(line) for line in output.get("traceback", [])]
        cleaned.append(output)
    return cleaned


def relinked(source: str) -> str:
    """A notebook's markdown, its relative links made to resolve from executed/<profile>/ (one folder deeper)."""
    return re.sub(r"\]\(\.\./(?!\.\./)", "](../../", source)


def cleaned_copy(executed: dict, name: str = "") -> dict:
    """An executed notebook as published: `clean_outputs` on every code cell, `relinked` on every
    markdown cell but the executed-copy note (whose links are written for executed/<profile>/). `name`: the
    notebook's file name (the CPU's speed line stays in 00 and 12 only)."""
    for cell in executed["cells"]:
        if "outputs" in cell:
            cell["outputs"] = clean_outputs(cell["outputs"], speed_line=name.startswith(SPEED_SAID_IN))
        elif cell["cell_type"] == "markdown" and cell.get("id") != "executed-copy-note":
            source = relinked("".join(cell["source"]))
            lines = source.split("\n")
            cell["source"] = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    return executed


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
        cleaned_copy(executed, path.name)
        for cell in executed["cells"]:
            for output in cell.get("outputs", []):
                if "image/png" in output.get("data", {}):
                    output["data"]["image/png"] = smaller_png(output["data"]["image/png"])
        executed["cells"].insert(
            0,
            {
                "cell_type": "markdown",
                "id": "executed-copy-note",
                "metadata": {},
                "source": [
                    f"> **Executed copy** of `notebooks/{path.name}`, from the course's recorded run in the "
                    f"`{profile_name}` profile (RESULTS.md says when, on which machine and how long each notebook "
                    f"took); outputs as that run made them. To run it yourself, open "
                    f"[`notebooks/{path.name}`](../../notebooks/{path.name})."
                ],
            },
        )
        published.write_text(json.dumps(executed, indent=1, ensure_ascii=False) + "\n")
    return left_out


def clean_published(profile_name: str = "cpu") -> list[str]:
    """Clean the copies already in executed/<profile>/ in place (their outputs stay the run's); return their names."""
    names = []
    for path in sorted((PUBLISHED / profile_name).glob("[0-9][0-9]_*.ipynb")):
        notebook = cleaned_copy(json.loads(path.read_text()), path.name)
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
        names.append(path.name)
    return names


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
