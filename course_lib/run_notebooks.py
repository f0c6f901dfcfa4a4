"""Execute the course's notebooks in order, in the current profile (the README's main command).

    COURSE_PROFILE=cpu python -m course_lib.run_notebooks [01 05 ...]

Executed copies go to outputs/<profile>/notebooks/ next to the figures the notebooks write;
a time per notebook is printed and saved to outputs/<profile>/run_times.json. Stops at the
first failing notebook and says which cell failed.
"""

import json
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_lib.profiles import get_profile, output_dir

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"


def run(prefixes: list[str]) -> int:
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
        nbformat.write(notebook, out / path.name)
        print(f"✓ {path.name}: {times[path.name]:.0f} s", flush=True)
    times_file = output_dir(profile) / "run_times.json"  # keep the times of notebooks not run now
    recorded = json.loads(times_file.read_text()) if times_file.is_file() else {}
    times_file.write_text(json.dumps({**recorded, **times}, indent=2, sort_keys=True))
    print(f"All {len(notebooks)} notebooks ran in {sum(times.values()) / 60:.1f} min:")
    for name, seconds in times.items():
        print(f"  {seconds:7.0f} s  {name}")
    return 0


if __name__ == "__main__":
    options = [arg for arg in sys.argv[1:] if arg.startswith("-")]  # not notebook prefixes
    if options:
        print(__doc__)
        sys.exit(0 if set(options) <= {"-h", "--help"} else 2)
    sys.exit(run(sys.argv[1:]))
