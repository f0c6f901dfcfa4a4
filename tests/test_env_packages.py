"""Each environment folder is a package of its own, as verifiers' environments are: it builds into
a wheel from its own pyproject.toml, and once installed alone (no course on the path) it loads
with vf.load_environment and carries its data files."""

import shutil
import subprocess
import sys
from pathlib import Path

ENVS = Path(__file__).resolve().parent.parent / "course_lib" / "envs"
FOLDERS = sorted(p.name for p in ENVS.iterdir() if (p / "__init__.py").is_file())


def test_every_environment_folder_has_its_pyproject_and_readme():
    for folder in FOLDERS:
        assert (ENVS / folder / "pyproject.toml").is_file() and (ENVS / folder / "README.md").is_file(), folder


def test_each_folder_installs_alone_and_loads_from_there(tmp_path):
    """Catches: a data file left out of the wheel, a module not packaged, an import of the course."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    site, wheels = tmp_path / "site", tmp_path / "wheels"
    for folder in FOLDERS:
        source = shutil.copytree(ENVS / folder, tmp_path / "src" / folder, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run([*pip, "wheel", str(source), "--no-deps", "--no-build-isolation", "-w", str(wheels)], check=True)
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), *map(str, wheels.glob("*.whl"))], check=True)
    script = (
        "import importlib, verifiers as vf\n"
        f"for folder in {FOLDERS!r}:\n"
        "    env = vf.load_environment(folder.replace('_', '-'))\n"
        "    print(folder, importlib.import_module(folder).__file__, len(env.get_eval_dataset()))\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path / "wheels",  # no package folder here: only the installed copies can be found
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    loaded = [line.split() for line in shown.stdout.splitlines() if line.split()[0] in FOLDERS]
    assert [folder for folder, _, _ in loaded] == FOLDERS
    for folder, module_file, rows in loaded:
        assert module_file == str(site / folder / "__init__.py"), module_file  # not the course's copy
        assert int(rows) > 0, folder
