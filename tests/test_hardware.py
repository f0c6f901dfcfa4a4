"""Precision by the card, vLLM or not, and freeing a trainer: GPUs simulated by faking
`cuda_capability()` (a T4 is 7.5, an A100 8.0, an H100 9.0) and TRL's config classes."""

import types

import pytest
import trl

from course_lib import grpo, hardware, serving, sft
from course_lib.profiles import PROFILES

CARDS = [(None, "float32"), ((7, 5), "float16"), ((8, 0), "bfloat16"), ((9, 0), "bfloat16")]


@pytest.mark.parametrize("capability, dtype", CARDS)
def test_precision_by_compute_capability(capability, dtype):
    """Catches: bfloat16 on a T4 (torch says it is supported, but it is emulated and slow) and a
    half precision on the CPU."""
    assert hardware.precision(capability) == dtype


@pytest.mark.parametrize(
    "capability, lora, dtype",
    [(None, True, "float32"), ((7, 5), True, "float16"), ((7, 5), False, "float32"), ((9, 0), False, "bfloat16")],
)
def test_training_weights_in_float32_wherever_float16_gradients_would_flow(capability, lora, dtype):
    assert hardware.training_dtype(capability, lora) == dtype


def fake_config(monkeypatch, name):
    """Replace a TRL config class by one that returns its arguments (a real one refuses fp16 without a GPU),
    in TRL and in the course modules that imported it."""
    fake = lambda **settings: types.SimpleNamespace(**settings)  # noqa: E731
    for module in (trl, sft, grpo):
        monkeypatch.setattr(module, name, fake, raising=module is trl)


def training_configs(monkeypatch, profile, capability):
    """The SFT and GRPO configs `profile` gets on a machine with this GPU (None: a CPU)."""
    for module in (sft, grpo):
        monkeypatch.setattr(module, "cuda_capability", lambda: capability)
    fake_config(monkeypatch, "SFTConfig")
    fake_config(monkeypatch, "GRPOConfig")
    return [
        sft.sft_config(profile, "/tmp/unused"),
        grpo.grpo_config(profile, "/tmp/unused", [1.0, 0.2, -0.1]),
    ]


@pytest.mark.parametrize("capability, dtype", CARDS)
def test_sft_and_grpo_configs_train_in_the_cards_precision(monkeypatch, capability, dtype):
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)  # a CPU without bfloat16: float32
    for config in training_configs(monkeypatch, PROFILES["gpu"], capability):
        expected = (dtype == "bfloat16", dtype == "float16", capability is None)
        assert (config.bf16, config.fp16, config.use_cpu) == expected
        assert config.gradient_checkpointing == (capability is not None)


@pytest.mark.parametrize(
    "flags, native",
    [("fpu avx2 avx512f avx512_bf16 vaes", True), ("fpu amx_bf16 amx_tile", True), ("fpu avx2 fma", False)],
)
def test_native_bf16_is_read_from_the_cpu_flags(flags, native):
    """Catches: bf16 autocast on an AVX2 laptop, where bfloat16 is emulated and slower than float32."""
    assert hardware.cpu_has_native_bf16(f"processor\t: 0\nflags\t\t: {flags}\n") == native


@pytest.mark.parametrize("variable, autocast", [(None, True), ("0", False)])
def test_a_cpu_with_native_bf16_runs_sft_with_bf16_autocast_and_grpo_in_float32(monkeypatch, variable, autocast):
    """SFT on such a CPU: bf16 autocast over float32 weights unless COURSE_CPU_BF16=0. Catches GRPO with it
    too: its effect was not confirmed in bf16 (results/JOURNAL.md), so GRPO stays float32."""
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)
    if variable is None:
        monkeypatch.delenv(hardware.CPU_BF16_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(hardware.CPU_BF16_VARIABLE, variable)
    sft_config, grpo_config = training_configs(monkeypatch, PROFILES["cpu"], None)
    assert (sft_config.bf16, sft_config.fp16, sft_config.use_cpu) == (autocast, False, True)
    assert (grpo_config.bf16, grpo_config.fp16, grpo_config.use_cpu) == (False, False, True)
    assert hardware.training_dtype(None, lora=False) == "float32"  # the weights stay float32 either way


@pytest.mark.parametrize("capability, dtype", CARDS[1:])
def test_servers_run_in_the_cards_precision(monkeypatch, capability, dtype):
    """Catches: `vllm serve` on a T4 with the model's bfloat16 (vLLM refuses it below 8.0)."""
    monkeypatch.setattr(serving, "cuda_capability", lambda: capability)
    monkeypatch.setattr(serving, "find_program", lambda name: name)  # vLLM is not installed here
    command = serving.server_command(PROFILES["gpu"], "/models/m", 8000)
    assert command[:3] == ["vllm", "serve", "/models/m"] and command[command.index("--dtype") + 1] == dtype


def test_transformers_serve_on_a_gpu_batches_requests_on_cuda(monkeypatch):
    """The gpu profile without vLLM: the same server as on the CPU, on the GPU, serving concurrent
    requests together."""
    monkeypatch.setattr(serving, "cuda_capability", lambda: (7, 5))
    monkeypatch.setattr(serving, "find_program", lambda name: name)
    command = " ".join(serving.server_command(PROFILES["cpu"], "/models/m", 8000))
    assert "transformers serve /models/m --device cuda --continuous-batching --dtype float16" in command


def test_transformers_serve_on_the_cpu_is_unchanged(monkeypatch):
    monkeypatch.setattr(serving, "cuda_capability", lambda: None)
    monkeypatch.setattr(serving, "find_program", lambda name: name)
    assert serving.server_command(PROFILES["cpu"], "/m", 8000) == [
        "transformers",
        "serve",
        "/m",
        "--device",
        "cpu",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
    ]


@pytest.mark.parametrize(
    "capability, variable, installed, reason",
    [
        (None, None, True, "no NVIDIA GPU"),
        ((6, 1), None, True, "below vLLM's minimum 8.0"),
        ((7, 5), None, True, "compute capability 7.5 is below vLLM's minimum 8.0"),  # a T4
        ((8, 0), None, False, "vLLM is not installed"),
        ((9, 0), "0", True, "COURSE_VLLM=0 is set"),
        ((8, 0), None, True, None),
    ],
)
def test_why_no_vllm(monkeypatch, capability, variable, installed, reason):
    monkeypatch.setattr(hardware.importlib.util, "find_spec", lambda name: object() if installed else None)
    if variable is None:
        monkeypatch.delenv(hardware.VLLM_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(hardware.VLLM_VARIABLE, variable)
    found = hardware.why_no_vllm(capability)
    assert found == reason if reason is None else reason in found


def test_release_frees_the_engine_first_then_the_model_then_the_cuda_cache(monkeypatch):
    """Catches: a colocated vLLM engine (0.35 of the GPU) or a model kept alive while the next
    trainer or server loads, the out-of-memory waiting to happen on a 16 GB card."""
    import torch

    calls = []
    trainer = types.SimpleNamespace(
        vllm_generation=types.SimpleNamespace(llm="engine"),
        model="model",
        model_wrapped="model",
        optimizer="optimizer",
        lr_scheduler="scheduler",
        accelerator=types.SimpleNamespace(
            free_memory=lambda: calls.append(("accelerator", trainer.vllm_generation.llm))
        ),
    )
    monkeypatch.setattr(hardware.gc, "collect", lambda: calls.append(("gc", trainer.model)))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(("empty_cache", None)))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (14 * 2**30, 16 * 2**30))
    hardware.release(trainer)
    assert calls == [("accelerator", None), ("gc", None), ("empty_cache", None)]
    assert trainer.model is trainer.optimizer is trainer.vllm_generation.llm is None


def trainer_order_violations(path) -> list[str]:
    """Walk a notebook's code in order: a trainer is alive from its build until `release(trainer)`;
    building another trainer or starting a server meanwhile is a violation."""
    import json

    alive, violations = False, []
    for cell in json.loads(path.read_text())["cells"]:
        for line in "".join(cell["source"]).splitlines() if cell["cell_type"] == "code" else []:
            starts_engine = any(call in line for call in ("start_server(", "start_model(", "_trainer("))
            if starts_engine and alive:
                violations.append(f"{cell['id']}: {line.strip()}")
            if "release(trainer)" in line:
                alive = False
            elif "build_sft_trainer(" in line or "build_grpo_trainer(" in line:
                alive = True
    return violations


@pytest.mark.parametrize("name", ["08_sft_warmup.ipynb", "09_grpo_training.ipynb"])
def test_notebooks_release_each_trainer_before_the_next_engine(name):
    """Catches: 09 building three trainers (each with a colocated vLLM) in one kernel, and 08/09
    starting a server after training without freeing the GPU."""
    from pathlib import Path

    path = Path(__file__).parent.parent / "notebooks" / name
    assert trainer_order_violations(path) == []
    assert "build_" in path.read_text()  # the walk saw a trainer at all


def test_the_cpu_speed_note_scales_the_header_times_to_this_cpu():
    """Catches: a slow CPU told nothing (its learner waits hours for what a header calls minutes),
    or the ratio inverted (a slow CPU told it is fast)."""
    from course_lib.hardware import REFERENCE_MATMUL_GFLOPS, cpu_speed_note

    assert "about the" in cpu_speed_note(REFERENCE_MATMUL_GFLOPS)
    slow = cpu_speed_note(REFERENCE_MATMUL_GFLOPS / 5)
    assert "5.0x slower" in slow and "about 6-9x the times" in slow
    assert "slower" not in cpu_speed_note(REFERENCE_MATMUL_GFLOPS * 2)
