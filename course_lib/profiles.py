"""Hardware profiles: one place for every budget the notebooks use.

A profile changes numbers and model names only, never code paths. It is picked from the
hardware (no GPU -> `cpu`, one GPU -> `gpu`, several -> `full`) and can be forced with
`COURSE_PROFILE=smoke|cpu|gpu|full`. `smoke` is what CI runs: every cell, tiny budgets.
A GPU profile needs a GPU (asking for one without it is a clear error) but not vLLM: where vLLM
cannot run, `get_profile` returns it with transformers serving and generating, and says so once.
"""

import functools
import os
import platform
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from course_lib.hardware import INSTALL_VLLM, cuda_capability, why_no_vllm

PROFILE_VARIABLE = "COURSE_PROFILE"
OUTPUT_DIR_VARIABLE = "COURSE_OUTPUT_DIR"
EMBEDDED_MODEL = "embedded:SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    model: str  # EMBEDDED_MODEL or a Hugging Face Hub id
    server: str  # "transformers" (CPU, or a GPU without vLLM) or "vllm"
    server_start_timeout_s: int
    request_timeout_s: int
    # 00: first chat
    chat_max_tokens: int
    # 02-04: small environments (examples x rollouts, tokens per model turn)
    env_num_examples: int
    env_rollouts_per_example: int
    env_max_tokens: int
    max_concurrent: int  # requests in flight; on a CPU, the largest batch the local model answers at once
    check_replies: int  # 04-05: fuzzed replies per environment check (course_lib/check_environment.py)
    # 05-06: tic-tac-toe evaluation (games per opponent, tokens per model turn)
    ttt_eval_games: int
    ttt_max_tokens_per_turn: int
    # 07-08: SFT data and warm-up
    sft_num_games: int
    sft_epochs: float
    sft_learning_rate: float
    sft_batch_size: int
    sft_use_lora: bool
    # 09: GRPO (rollouts per step = prompts_per_step x num_generations)
    grpo_max_steps: int
    grpo_prompts_per_step: int  # = num_groups: one prompt per opponent-skill bucket
    grpo_num_generations: int
    grpo_micro_batch_size: int  # episodes per forward/backward pass: lower it if out of memory
    grpo_max_tokens_per_turn: int
    grpo_max_episode_tokens: int
    grpo_learning_rate: float
    grpo_use_lora: bool
    grpo_vllm_mode: str  # "" = transformers generate, "colocate" or "server"

    @property
    def model_name(self) -> str:
        """The model's short name ("SmolLM2-135M-Instruct", "LFM2-1.2B"): the player name in result tables."""
        return self.model.split(":")[-1].split("/")[-1]

    def as_table(self) -> dict:
        return asdict(self)


_BASE = Profile(
    name="cpu",
    description="a laptop or a 2-core CI box, no GPU: the embedded 135M model, short honest runs",
    model=EMBEDDED_MODEL,
    server="transformers",
    server_start_timeout_s=180,
    request_timeout_s=600,
    chat_max_tokens=64,
    env_num_examples=20,
    env_rollouts_per_example=3,
    env_max_tokens=192,
    max_concurrent=32,
    check_replies=2_000,  # about 20 s per environment on 2 cores
    ttt_eval_games=20,  # per opponent, the same games for every model; intervals about +-20 points
    ttt_max_tokens_per_turn=56,  # the expert's answers, which SFT teaches, are at most 54 tokens
    sft_num_games=300,
    sft_epochs=2,
    sft_learning_rate=5e-5,
    sft_batch_size=8,
    sft_use_lora=False,
    grpo_max_steps=10,
    grpo_prompts_per_step=2,
    grpo_num_generations=8,
    grpo_micro_batch_size=4,
    grpo_max_tokens_per_turn=56,
    grpo_max_episode_tokens=352,
    grpo_learning_rate=5e-6,
    grpo_use_lora=False,
    grpo_vllm_mode="",
)

PROFILES = {
    "smoke": replace(
        _BASE,
        name="smoke",
        description="CI: proves every cell runs, with tiny budgets (numbers mean nothing)",
        chat_max_tokens=24,
        env_num_examples=2,
        env_rollouts_per_example=2,
        env_max_tokens=48,
        check_replies=200,
        ttt_eval_games=2,
        ttt_max_tokens_per_turn=16,
        sft_num_games=16,
        sft_epochs=0.25,  # 2 steps of 2 games
        sft_batch_size=2,
        grpo_max_steps=2,
        grpo_num_generations=2,
        grpo_micro_batch_size=2,
        grpo_max_tokens_per_turn=16,
        grpo_max_episode_tokens=48,  # about 3 turns: each step's games cost seconds, not minutes
    ),
    "cpu": _BASE,
    "gpu": replace(
        _BASE,
        name="gpu",
        description="one GPU (Colab T4 16 GB or better): a 1.2B hub model served by vLLM "
                    "(not yet run by the course team: budgets are untested estimates)",
        model="LiquidAI/LFM2-1.2B",
        server="vllm",
        server_start_timeout_s=600,
        chat_max_tokens=256,
        env_num_examples=100,
        env_rollouts_per_example=4,
        env_max_tokens=512,
        max_concurrent=64,
        check_replies=10_000,
        ttt_eval_games=200,
        ttt_max_tokens_per_turn=256,
        sft_num_games=1000,
        sft_epochs=2,
        sft_learning_rate=2e-4,
        sft_batch_size=16,
        sft_use_lora=True,
        grpo_max_steps=200,
        grpo_prompts_per_step=32,  # 256 rollouts per step
        grpo_micro_batch_size=8,
        grpo_max_tokens_per_turn=256,
        grpo_max_episode_tokens=1536,
        grpo_learning_rate=1e-5,
        grpo_use_lora=True,
        grpo_vllm_mode="colocate",
    ),
    "full": replace(
        _BASE,
        name="full",
        description="a GPU box with several GPUs: a 2.6B hub model, vLLM server + accelerate "
                    "(not yet run by the course team: budgets are untested estimates)",
        model="LiquidAI/LFM2-2.6B",
        server="vllm",
        server_start_timeout_s=900,
        chat_max_tokens=256,
        env_num_examples=200,
        env_rollouts_per_example=8,
        env_max_tokens=1024,
        max_concurrent=128,
        check_replies=10_000,
        ttt_eval_games=500,
        ttt_max_tokens_per_turn=512,
        sft_num_games=2000,
        sft_epochs=2,
        sft_learning_rate=2e-4,
        sft_batch_size=32,
        sft_use_lora=True,
        grpo_max_steps=500,
        grpo_prompts_per_step=48,  # 384 rollouts: splits evenly over 3 training GPUs x 8 x 16
        grpo_micro_batch_size=8,
        grpo_max_tokens_per_turn=512,
        grpo_max_episode_tokens=3072,
        grpo_learning_rate=1e-5,
        grpo_use_lora=True,
        grpo_vllm_mode="server",
    ),
}


def detect_hardware() -> dict:
    """What this machine has, without importing torch if it is not installed."""
    info = {"platform": platform.platform(), "cpu_cores": os.cpu_count(), "gpus": []}
    try:
        import torch

        if torch.cuda.is_available():
            info["gpus"] = [
                f"{torch.cuda.get_device_name(i)} "
                f"({torch.cuda.get_device_properties(i).total_memory / 2**30:.0f} GiB)"
                for i in range(torch.cuda.device_count())
            ]
    except ImportError:
        pass
    info["colab"] = "google.colab" in __import__("sys").modules
    return info


def profile_name_for(gpu_count: int) -> str:
    return "cpu" if gpu_count == 0 else "gpu" if gpu_count == 1 else "full"


def get_profile(name: str | None = None) -> Profile:
    """The profile named, else $COURSE_PROFILE, else the one that fits the hardware."""
    name = name or os.environ.get(PROFILE_VARIABLE) or profile_name_for(len(detect_hardware()["gpus"]))
    if name not in PROFILES:
        raise ValueError(f"Unknown profile {name!r}: set {PROFILE_VARIABLE} to one of {sorted(PROFILES)}")
    profile = PROFILES[name]
    if profile.server != "vllm":
        return profile
    capability = cuda_capability()
    if capability is None:
        raise ValueError(f"The {name!r} profile needs an NVIDIA GPU, and PyTorch sees none "
                         f"(torch.cuda.is_available() is False). Unset {PROFILE_VARIABLE} to pick the profile "
                         f"from the hardware, or set {PROFILE_VARIABLE}=cpu. On Colab: Runtime > Change runtime "
                         "type > a GPU, then run the notebook again from the top.")
    reason = why_no_vllm(capability)
    if reason is None:
        return profile
    _say_once(f"{reason}: the {name!r} profile serves with `transformers serve --device cuda "
              "--continuous-batching` and GRPO generates with transformers. That works; vLLM would be "
              f"several times faster ({INSTALL_VLLM}, Linux + NVIDIA GPU).")
    return replace(profile, server="transformers", grpo_vllm_mode="")


@functools.cache
def _say_once(message: str) -> None:
    print(message)


def output_dir(profile: Profile | None = None) -> Path:
    """Where notebooks write figures, results and checkpoints: outputs/<profile>/ by default."""
    profile = profile or get_profile()
    repo_root = Path(__file__).resolve().parent.parent
    base = repo_root if (repo_root / "notebooks").is_dir() else Path.cwd()  # editable vs wheel install
    default = base / "outputs" / profile.name
    path = Path(os.environ.get(OUTPUT_DIR_VARIABLE, default))
    path.mkdir(parents=True, exist_ok=True)
    return path
