"""What the GPU can do, and what follows for the course.

- `cuda_capability()`: the first GPU's compute capability ((7, 5) on a T4, (8, 0) on an A100),
  None without a GPU.
- `precision(capability)`: the number type to train and serve in. float32 on the CPU; float16
  below compute capability 8.0 (a T4 reports bfloat16 as supported but only emulates it, slowly);
  bfloat16 from 8.0 on (same range as float32, so no loss scaling).
- `mixed_precision(capability, cpu_autocast)`: the trainers' `bf16`/`fp16` flags. On a CPU that multiplies
  bfloat16 natively (AVX-512 BF16 or AMX), SFT trains with bf16 autocast (float32 weights, matrix
  products in bfloat16); GRPO stays float32 there (its effect did not hold up in bf16). Generation
  there uses bfloat16 weights (`local_model.generation_dtype`).
- `why_no_vllm(capability)`: why vLLM cannot be used here, or None. GPU profiles then serve with
  `transformers serve --device cuda --continuous-batching` and GRPO generates with transformers:
  slower, same results.
- `score_answer_tokens_only_on_cpu()`: on a CPU, TRL's trainers score only the tokens they train.
- `release(trainer)`: free a trainer's GPU memory before the next stage loads a model, so that
  one inference engine at a time holds the card.
- `cpu_speed_note()`: this CPU's fp32 matrix-multiply speed against the host the notebooks' `cpu`
  times were measured on, and what it means for those times.
"""

import gc
import importlib.util
import os
import re
from pathlib import Path

CPU_BF16_VARIABLE = "COURSE_CPU_BF16"  # COURSE_CPU_BF16=0: train in float32 even on a CPU with native bfloat16
VLLM_VARIABLE = "COURSE_VLLM"  # COURSE_VLLM=0: never use vLLM, even where it is installed
VLLM_MIN_CAPABILITY = (8, 0)  # recent vLLM releases need Ampere or newer; a T4 is 7.5
INSTALL_VLLM = "pip install -r requirements-gpu.txt"
# fp32 matmul of the 2-core AMD EPYC (AVX-512) every `cpu` time in the notebooks' headers was measured on:
# 136-165 GFLOP/s in `python -m course_lib.benchmark_generation`, idle (RESULTS.md)
REFERENCE_MATMUL_GFLOPS = 150


def cuda_capability() -> tuple[int, int] | None:
    try:
        import torch
    except ImportError:
        return None
    return tuple(torch.cuda.get_device_capability(0)) if torch.cuda.is_available() else None


def precision(capability: tuple[int, int] | None) -> str:
    if capability is None:
        return "float32"
    return "bfloat16" if capability >= (8, 0) else "float16"


def cpu_has_native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX-512 BF16 or AMX; Linux's /proc/cpuinfo).
    Elsewhere (an AVX2 laptop, Apple silicon) bfloat16 is emulated and slower than float32."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", cpuinfo))


def cpu_bf16() -> bool:
    """Whether the course trains with bf16 autocast on this CPU: where bfloat16 is native, unless COURSE_CPU_BF16=0."""
    return os.environ.get(CPU_BF16_VARIABLE) != "0" and cpu_has_native_bf16()


def mixed_precision(capability: tuple[int, int] | None, cpu_autocast: bool) -> dict:
    """The trainers' `bf16` and `fp16` flags. On a GPU they follow `precision`. On a CPU with native
    bfloat16, bf16 autocast where the trainer asks for it (`cpu_autocast`): the weights stay float32, so
    small updates are kept. SFT asks: 1.35x faster in notebook 08 on 2 cores, within noise of float32
    (RESULTS.md, "bf16 autocast"). GRPO does not: in two bf16 runs its effect (fewer invalid answers) was
    not confirmed on 600 fresh games, where three float32 runs' was, and with each game trained at its own
    length bf16 made forward + backward only 1.1x faster (RESULTS.md, "bf16 autocast GRPO with the
    generation copy")."""
    dtype = precision(capability)
    cpu_bf16_autocast = capability is None and cpu_autocast and cpu_bf16()
    return {"bf16": dtype == "bfloat16" or cpu_bf16_autocast, "fp16": dtype == "float16"}


def training_dtype(capability: tuple[int, int] | None, lora: bool) -> str:
    """The dtype to load a model in for training. float16 mixed precision needs float32 weights
    wherever gradients flow (its gradient scaler refuses float16 ones): LoRA trains float32
    adapters on frozen float16 weights; full fine-tuning keeps every weight in float32."""
    dtype = precision(capability)
    return "float32" if dtype == "float16" and not lora else dtype


def why_no_vllm(capability: tuple[int, int] | None) -> str | None:
    if os.environ.get(VLLM_VARIABLE) == "0":
        return f"{VLLM_VARIABLE}=0 is set"
    if capability is None:
        return "no NVIDIA GPU"
    if capability < VLLM_MIN_CAPABILITY:
        return f"this GPU's compute capability {capability[0]}.{capability[1]} is below vLLM's minimum 8.0"
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed"
    return None


def score_answer_tokens_only_on_cpu() -> None:
    """TRL 1.16's fused LM head scores every position of an episode on a device without Triton (the
    prompt and the environment's replies too, whose scores it then throws away), to keep tile shapes
    fixed for compiled backends. On a CPU that only costs time: scoring the model's own tokens alone
    gives the same log-probabilities and gradients, and a fifth less forward + backward time on a
    tic-tac-toe episode (RESULTS.md, "Training on CPU: score only the model's tokens"). SFT and
    GRPO both call it on CPU."""
    import trl.trainer.utils as trl_utils

    scores_all = trl_utils._use_triton
    if getattr(scores_all, "course_patch", False):
        return
    trl_utils._use_triton = lambda device: device.type == "cpu" or scores_all(device)
    trl_utils._use_triton.course_patch = True


def release(trainer) -> None:
    """Free what a trainer holds: its colocated vLLM engine, its model, optimizer and scheduler wherever the
    trainer keeps them (the accelerator, the callback handler, the vLLM generation, a reference model, the
    rollout function's generation copy), then the CUDA cache. Afterwards nothing of the trainer refers to the
    model (tests/test_grpo.py checks it by references), so the next stage's model or server has the GPU
    even while the variable `trainer` still exists. Does nothing harmful on the CPU."""
    import torch

    generation = getattr(trainer, "vllm_generation", None)
    if generation is not None:
        generation.llm = None  # vLLM 0.31's LLM has no shutdown(): its engine goes with the last reference
        generation.model = None
    handler = getattr(trainer, "callback_handler", None)
    if handler is not None:
        handler.model = handler.optimizer = handler.lr_scheduler = None
    trainer.accelerator.free_memory()
    trainer.model = trainer.model_wrapped = trainer.optimizer = trainer.lr_scheduler = None
    for holder in ("ref_model", "rollout_func"):  # a KL term's reference model; the generation copy (PolicyCopy)
        if hasattr(trainer, holder):
            setattr(trainer, holder, None)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info()
        print(f"GPU memory in use after releasing the trainer: {(total - free) / 2**30:.1f} of {total / 2**30:.0f} GiB")


def matmul_gflops(size: int = 1024, repeats: int = 10, tries: int = 3) -> float:
    """fp32 matrix-multiply speed of this machine now, the best of `tries` (about a second; other jobs
    slow it). The best of several: a single try once read 71 GFLOP/s on a host that reads 180."""
    import time

    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm up
    best = 0.0
    for _ in range(tries):
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        best = max(best, 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9)
    return best


def cpu_speed_note(gflops: float | None = None) -> str:
    """What to expect of the headers' `cpu` times here. The matmul ratio alone underestimates, by
    1.3-1.8x on the slower 2-core hosts measured (RESULTS.md, "Slower hosts")."""
    gflops = matmul_gflops() if gflops is None else gflops
    ratio = REFERENCE_MATMUL_GFLOPS / gflops
    measured = f"This CPU: fp32 matmul {gflops:.0f} GFLOP/s (measured now; other running jobs lower it)"
    if ratio < 1.6:  # readings on the reference host itself ranged 105-185 (a kernel starting as another ends)
        return f"{measured}, about the {REFERENCE_MATMUL_GFLOPS} of the host the notebooks' cpu times come from."
    return (
        f"{measured}, {ratio:.1f}x slower than the host the notebooks' cpu times come from: expect training and "
        f"generation to take about {1.3 * ratio:.0f}-{1.8 * ratio:.0f}x the times in the headers "
        '(RESULTS.md, "Slower hosts").'
    )
