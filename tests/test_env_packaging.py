"""Each environment is a folder a learner can copy alone, and every one ships with its data.

Catches: an environment importing course_lib (or a sibling environment) again, data found through
the repository's layout instead of package resources, a data file missing from the wheel, or the
same file importable under two module names.
"""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENVS = ROOT / "course_lib" / "envs"
LOADS = {  # environment folder -> the ids it is loaded by (with small arguments)
    "reverse_text": {"reverse-text": {"num_eval_examples": 5}},
    "double_check": {"double-check": {"num_eval_examples": 5}},
    "tictactoe": {"tictactoe": {"num_train_examples": 4, "num_eval_examples": 4}},
    "wiki_search": {"wiki-search": {}, "wiki_search.session": {}},
}
# Loads each id with only the copy's folder and site-packages on sys.path (-I drops PYTHONPATH and
# the working directory), then checks the module came from the copy and course_lib was never imported.
LOAD_ALONE = """
import sys
sys.path.insert(0, {folder!r})
import verifiers as vf
for env_id, args in {loads!r}.items():
    env = vf.load_environment(env_id, **args)
    assert len(env.get_eval_dataset()) > 0, env_id
module = sys.modules[{name!r}]
assert module.__file__.startswith({folder!r}), module.__file__
imported = sorted(m for m in sys.modules if m.split(".")[0] in ("course_lib",) + {others!r})
assert not imported, f"the environment imported {{imported}}"
print("loaded alone")
"""


def test_the_envs_folder_holds_only_environment_folders():
    """Catches: a new environment added as a loose file, or course_lib/envs/ made a package again
    (then `course_lib.envs.x` and `x` would be two copies of one module)."""
    assert sorted(p.name for p in ENVS.iterdir() if p.name != "__pycache__") == sorted(LOADS)
    assert all((ENVS / name / "__init__.py").is_file() for name in LOADS)


@pytest.mark.parametrize("name", LOADS)
def test_an_environment_copied_alone_loads(name, tmp_path):
    shutil.copytree(ENVS / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    others = tuple(other for other in LOADS if other != name)
    code = LOAD_ALONE.format(folder=str(tmp_path), loads=LOADS[name], name=name, others=others)
    result = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and "loaded alone" in result.stdout, result.stderr[-3000:]


# Loads every id from an installed wheel (pip install --target), -I as above: the modules must come
# from the installed folder and find their data there (importlib.resources, not the repository).
LOAD_INSTALLED = """
import sys
sys.path.insert(0, {site!r})
import verifiers as vf
for env_id, args in {loads!r}.items():
    env = vf.load_environment(env_id, **args)
    assert len(env.get_eval_dataset()) > 0, env_id
for name in {names!r}:
    assert sys.modules[name].__file__.startswith({site!r}), sys.modules[name].__file__
print("loaded from the wheel")
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The project's wheel (pip wheel --no-deps, about 10-20 s). It builds from a copy of what the
    wheel is made of, so no build/ or egg-info lands in the repository."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "source"
    shutil.copytree(ROOT / "course_lib", source / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (built,) = tmp_path.glob("course_lib-*.whl")
    return built


@pytest.mark.timeout(120)
def test_the_wheel_holds_every_environment_and_its_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in LOADS:
        shipped = {
            str(path.relative_to(ENVS))
            for path in (ENVS / name).rglob("*")
            if path.is_file() and path.suffix in (".py", ".jsonl") and "__pycache__" not in path.parts
        }
        assert shipped and shipped <= names, sorted(shipped - names)
        assert any(path.endswith(".jsonl") for path in shipped) or name == "tictactoe"
    assert not [n for n in names if n.startswith("course_lib/envs/") or ".egg-info" in n]


def install_and_load_every_environment(wheels: list[Path], tmp_path: Path) -> None:
    """pip install the wheels into tmp_path/site and load every environment id from there alone."""
    site = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site)]
    result = subprocess.run([*install, *map(str, wheels)], capture_output=True, text=True, timeout=110)
    assert result.returncode == 0, result.stderr[-3000:]
    loads = {env_id: args for ids in LOADS.values() for env_id, args in ids.items()}
    code = LOAD_INSTALLED.format(site=str(site), loads=loads, names=sorted(LOADS))
    result = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and "loaded from the wheel" in result.stdout, result.stderr[-3000:]


@pytest.mark.timeout(240)
def test_every_environment_loads_from_the_installed_wheel(wheel, tmp_path):
    """Catches: a data file read through the repository's layout, which works from a clone only,
    or one the wheel lacks (the environment then fails to load once installed)."""
    install_and_load_every_environment([wheel], tmp_path)


@pytest.mark.timeout(300)
def test_each_environment_folder_is_a_package_of_its_own(tmp_path):
    """Catches: a folder without its pyproject.toml or README (it could not be installed or pushed
    alone, as verifiers' own environments are), or a pyproject whose wheel lacks a module or data."""
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    for name in LOADS:
        assert (ENVS / name / "pyproject.toml").is_file() and (ENVS / name / "README.md").is_file(), name
        source = shutil.copytree(ENVS / name, tmp_path / "src" / name, ignore=shutil.ignore_patterns("__pycache__"))
        build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)]
        result = subprocess.run(build, capture_output=True, text=True, timeout=110)
        assert result.returncode == 0, result.stderr[-3000:]
    install_and_load_every_environment(sorted(wheels.glob("*.whl")), tmp_path)
