"""Execute the course's notebooks in order, in the current profile (the README's main command).

    COURSE_PROFILE=cpu python -m course_lib.run_notebooks [01 05 ...]

Executed copies go to outputs/<profile>/notebooks/ next to the figures the notebooks write;
a table of times per notebook is printed at the end and saved to outputs/<profile>/timings.csv
(one row per notebook run: when it finished, on which CPU, how long). Stops at the first failing
notebook and says which cell failed.
"""

import csv
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_lib.profiles import get_profile, output_dir

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = ROOT / "notebooks"
BUDGETS_KEY = "course_budgets"  # an executed copy's metadata: the profile's settings it ran with (publish checks them)


def import_this_checkout_first() -> None:
    """Kernels start in notebooks/, where `import course_lib` would find whatever checkout the editable
    install points at (another clone's code, writing into its outputs/): put this one first for them."""
    paths = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)


def run(prefixes: list[str]) -> int:
    import_this_checkout_first()
    profile = get_profile()
    out = output_dir(profile) / "notebooks"
    out.mkdir(parents=True, exist_ok=True)
    notebooks = sorted(p for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb") if not prefixes or p.name[:2] in prefixes)
    print(f"Profile {profile.name!r}: running {len(notebooks)} notebooks; executed copies in {out}")
    times = {}
    for path in notebooks:
        print(f"▶ {path.name} ...", flush=True)
        notebook = nbformat.read(path, as_version=4)
        start = time.monotonic()
        try:
            NotebookClient(
                notebook, timeout=None, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS_DIR)}}
            ).execute()
        except Exception as error:  # a failing cell, or a kernel that died (out of memory?)
            nbformat.write(notebook, out / path.name)
            print(
                f"✗ {path.name} failed after {time.monotonic() - start:.0f} s ({type(error).__name__}); "
                f"the executed copy is {out / path.name}\n{error}"
            )
            return 1
        finally:
            times[path.name] = round(time.monotonic() - start, 1)
        notebook.metadata[BUDGETS_KEY] = profile.as_table()
        nbformat.write(notebook, out / path.name)
        print(f"✓ {path.name}: {times[path.name]:.0f} s", flush=True)
    print(f"All {len(notebooks)} notebooks ran in {sum(times.values()) / 60:.1f} min:")
    for name, seconds in times.items():
        print(f"  {seconds:7.0f} s  {name}")
    print(f"  {sum(times.values()):7.0f} s  in all; appended to {record_times(profile, times)}")
    return 0


def cpu_name() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def record_times(profile, times: dict[str, float]) -> Path:
    """Append this run's times to outputs/<profile>/timings.csv; earlier runs' rows stay."""
    path = output_dir(profile) / "timings.csv"
    new = not path.is_file()
    recorded = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    host = f"{cpu_name()}, {os.cpu_count()} cores"
    with path.open("a", newline="") as file:
        writer = csv.writer(file)
        if new:
            writer.writerow(["notebook", "seconds", "recorded", "host"])
        writer.writerows([name, seconds, recorded, host] for name, seconds in times.items())
    return path


if __name__ == "__main__":
    options = [arg for arg in sys.argv[1:] if arg.startswith("-")]  # not notebook prefixes
    if options:
        print(__doc__)
        sys.exit(0 if set(options) <= {"-h", "--help"} else 2)
    sys.exit(run(sys.argv[1:]))
