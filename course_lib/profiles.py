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
class ChatBudget:  # 00: first chat
    max_tokens: int
    temperature: float


@dataclass(frozen=True)
class ScratchBudget:  # 01: GRPO from scratch on a tiny policy (no language model; the same on any hardware)
    steps: int  # the main run: wins and non-losses reach their targets
    experiment_steps: int  # each experiment and failure-lab run
    eval_games: int  # greedy games per opponent


@dataclass(frozen=True)
class EnvBudget:  # 02-05: the small environments and the environment checks
    num_examples: int
    rollouts_per_example: int
    max_tokens: int  # per model turn
    temperature: float
    check_replies: int  # fuzzed replies per environment check (course_lib/check_environment.py)
    tool_max_tokens: int  # 04: per model turn; the expert's longest (five sections read at once) is 213 tokens
    tool_rollouts_per_question: int  # 08: the held-out tool evaluation, before and after tool SFT
    tool_sft_questions: int  # 04: at most this many training questions for the tool SFT (the wiki has 52)
    tool_sft_epochs: float
    tool_sft_learning_rate: float


@dataclass(frozen=True)
class EvalBudget:  # 05-06, 08-10: tic-tac-toe evaluation, the same seeded games for every model
    games: int  # per opponent
    max_tokens_per_turn: int


@dataclass(frozen=True)
class ApiBudget:  # 06-07: a hosted model (API key set), as a player or as the SFT teacher
    max_tokens_per_turn: int  # reasoning models spend tokens on hidden reasoning
    max_concurrent: int  # requests in flight: stay under the provider's rate limits


@dataclass(frozen=True)
class SFTBudget:  # 07-08: SFT data and warm-up
    num_games: int
    epochs: float
    learning_rate: float
    batch_size: int  # conversations per optimizer step
    micro_batch_size: int  # conversations per forward/backward pass: lower it if out of memory
    use_lora: bool


@dataclass(frozen=True)
class GRPOBudget:  # 09: rollouts per step = prompts_per_step x num_generations
    max_steps: int
    position_games: int  # the start model's own games whose positions GRPO trains on (tictactoe.moves)
    prompts_per_step: int  # positions a step; in a full game, one per opponent-skill bucket
    num_generations: int
    micro_batch_size: int  # episodes per forward/backward pass: lower it if out of memory
    max_tokens_per_turn: int
    max_episode_tokens: int
    learning_rate: float
    temperature: float  # above 0 so that the games of a group can differ
    min_random_move_prob: float  # the opponents' skill range
    max_random_move_prob: float
    use_lora: bool
    vllm_mode: str  # "" = transformers generate, "colocate" or "server"
    beta: float = 0.0  # KL penalty against the start model (TRL's beta); 0: none, and no reference pass
    false_claim_penalty: float = 0.0  # per-move reward lost for a false claim in the reasoning (tictactoe.moves)
    needed_claim_bonus: float = 0.0  # per-move reward added for a win or block played for its true reason


@dataclass(frozen=True)
class EveryCellBudget:  # 09: GRPO whose group is every cell (course_lib/every_cell.py), on the model's own games
    minutes: float  # playing and learning; held-out scoring not counted
    games_at_once: int  # games in lockstep: positions per optimizer step
    learning_rate: float
    lora_rank: int  # 0: full fine-tuning
    lora_layers: int  # LoRA on this many top decoder layers only: the layers below need no backward pass
    held_out: int  # positions of the expert's games scored before, during and after training
    score_every: int  # optimizer steps between held-out scores
    micro_batch: int = 8  # positions per forward/backward pass: lower it if out of memory


@dataclass(frozen=True)
class FactoryBudget:  # 11: TRL's environment_factory and the course's rollout_func bridge, on the same games
    steps: int
    prompts_per_step: int
    num_generations: int
    max_completion_length: int  # environment_factory: the model's and the tools' tokens of a whole game


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    model: str  # EMBEDDED_MODEL or a Hugging Face Hub id
    server: str  # "transformers" (CPU, or a GPU without vLLM) or "vllm"
    server_start_timeout_s: int
    request_timeout_s: int
    max_concurrent: int  # requests in flight; on a CPU, the largest batch the local model answers at once
    answer_format: str  # what the model writes each turn in notebooks 08-10 (tictactoe.ANSWER_FORMATS)
    chat: ChatBudget
    scratch: ScratchBudget
    env: EnvBudget
    eval: EvalBudget
    api: ApiBudget
    sft: SFTBudget
    grpo: GRPOBudget
    every_cell: EveryCellBudget
    factory: FactoryBudget

    @property
    def model_name(self) -> str:
        """The model's short name ("SmolLM2-135M-Instruct", "LFM2-1.2B"): the player name in result tables."""
        return self.model.split(":")[-1].split("/")[-1]

    def as_table(self) -> dict:
        """Every setting under its dotted name ("grpo.max_steps"), the name `with_settings` takes."""
        return {
            f"{key}.{field}" if isinstance(value, dict) else key: inner
            for key, value in asdict(self).items()
            for field, inner in (value.items() if isinstance(value, dict) else [(None, value)])
        }

    def with_settings(self, **settings) -> "Profile":
        """This profile with dotted settings changed: `profile.with_settings(**{"grpo.max_steps": 20})`."""
        table = self.as_table()
        profile = self
        for name, value in settings.items():
            if name not in table:
                raise ValueError(f"no profile setting {name!r}; settings: {', '.join(table)}")
            section, _, field = name.rpartition(".")
            if section:
                value = replace(getattr(profile, section), **{field: value})
            profile = replace(profile, **{section or field: value})
        return profile


_BASE = Profile(
    name="cpu",
    description="a laptop or a 2-core CI box, no GPU: the embedded 135M model, short honest runs",
    model=EMBEDDED_MODEL,
    server="transformers",
    server_start_timeout_s=180,
    request_timeout_s=600,
    max_concurrent=64,  # on 2 cores 1.3x the tokens/s of 32 (RESULTS.md); memory: see README
    # the move alone: SFT on it holds the optimal opponent twice as often as SFT with reasoning at 135M, and its
    # cell is one token, which every cell scored needs (RESULTS.md, "RL that plays better: every cell scored")
    answer_format="move",
    chat=ChatBudget(max_tokens=64, temperature=0.7),
    scratch=ScratchBudget(steps=3000, experiment_steps=400, eval_games=1000),
    env=EnvBudget(
        num_examples=20,
        rollouts_per_example=3,
        max_tokens=192,
        temperature=0.7,
        check_replies=2_000,  # about 20 s per environment on 2 cores
        tool_max_tokens=256,  # a tool call cut off at max_tokens cannot be read as a call (notebook 08, section 9)
        tool_rollouts_per_question=2,  # 3 took 423 s for both models on 2 cores, the course's 90 minutes allow 2
        tool_sft_questions=100,  # all
        tool_sft_epochs=2.0,  # 1 epoch: 16/270 held-out answers right against 90/270 (RESULTS, "One epoch of tool SFT")
        tool_sft_learning_rate=1e-4,
    ),
    # 64 games per opponent, one batch each: intervals about +-12 points, 3-4.5 minutes per model on 2 cores
    # (100 took 5-8); 56 tokens per turn: the expert's answers, which SFT teaches, are at most 54 tokens
    eval=EvalBudget(games=64, max_tokens_per_turn=56),
    api=ApiBudget(max_tokens_per_turn=4096, max_concurrent=8),
    # one conversation per pass: no padding, 1.09-1.18x a step against 2, same losses (RESULTS.md)
    sft=SFTBudget(num_games=300, epochs=2.0, learning_rate=5e-5, batch_size=8, micro_batch_size=1, use_lora=False),
    # The per-move run sweeps.CPU_RECIPE_RUN (data/grpo_moves_cpu/): 20 steps of 8 positions x 8 answers, LoRA,
    # 26 min on 2 cores; a micro-batch holds the whole step, so each group's shared prompt runs once
    grpo=GRPOBudget(
        max_steps=20,
        position_games=128,
        prompts_per_step=8,
        num_generations=8,
        micro_batch_size=64,
        max_tokens_per_turn=56,
        max_episode_tokens=56,
        learning_rate=3e-4,
        temperature=1.0,
        min_random_move_prob=0.0,
        max_random_move_prob=0.5,
        use_lora=True,
        vllm_mode="",
    ),
    # The recipe of RESULTS.md "RL that plays better": 30 minutes, about 6,000 positions on 2 cores (AMD EPYC)
    every_cell=EveryCellBudget(
        minutes=30.0,
        games_at_once=32,
        learning_rate=2e-4,
        lora_rank=16,
        lora_layers=8,
        held_out=200,
        score_every=40,
    ),
    # one step of one group each way: the mechanics (token masks, tool calls, step time) show; 3 steps took 13.8 min
    factory=FactoryBudget(steps=1, prompts_per_step=1, num_generations=4, max_completion_length=256),
)

PROFILES = {
    "smoke": _BASE.with_settings(
        **{
            "name": "smoke",
            "description": "CI: proves every cell runs, with tiny budgets (numbers mean nothing)",
            "chat.max_tokens": 24,
            "scratch.steps": 20,
            "scratch.experiment_steps": 6,
            "scratch.eval_games": 20,
            "env.num_examples": 2,
            "env.rollouts_per_example": 2,
            "env.max_tokens": 48,
            "env.check_replies": 200,
            "env.tool_max_tokens": 48,
            "env.tool_sft_questions": 2,
            "env.tool_sft_epochs": 1.0,
            "eval.games": 2,
            "eval.max_tokens_per_turn": 16,
            "sft.num_games": 16,
            "sft.epochs": 0.125,  # 2 steps of 1 game
            "sft.batch_size": 1,
            "sft.micro_batch_size": 1,
            "grpo.max_steps": 2,
            "grpo.position_games": 4,
            "grpo.prompts_per_step": 1,  # one group of 2 answers a step
            "grpo.num_generations": 2,
            "grpo.micro_batch_size": 2,  # the group in one micro-batch: its shared prompt runs once
            "grpo.max_tokens_per_turn": 16,
            "grpo.max_episode_tokens": 48,  # about 3 turns: each step's games cost seconds, not minutes
            "every_cell.minutes": 0.1,
            "every_cell.games_at_once": 2,
            "every_cell.held_out": 4,
            "every_cell.score_every": 2,
            "factory.steps": 1,
            "factory.prompts_per_step": 1,
            "factory.num_generations": 2,
            "factory.max_completion_length": 48,
        }
    ),
    "cpu": _BASE,
    "gpu": _BASE.with_settings(
        **{
            "name": "gpu",
            "description": "one GPU (Colab T4 16 GB or better): a 1.2B hub model served by vLLM "
            "(not yet run by the course team: budgets are untested estimates)",
            "model": "LiquidAI/LFM2-1.2B",
            "server": "vllm",
            "server_start_timeout_s": 600,
            "max_concurrent": 64,
            "chat.max_tokens": 256,
            "env.num_examples": 100,
            "env.rollouts_per_example": 4,
            "env.tool_rollouts_per_question": 4,
            "env.max_tokens": 512,
            "env.tool_max_tokens": 512,
            "env.check_replies": 10_000,
            "eval.games": 200,
            "eval.max_tokens_per_turn": 256,
            "sft.num_games": 1000,
            "sft.learning_rate": 2e-4,
            "env.tool_sft_learning_rate": 2e-4,  # LoRA, as sft.use_lora
            "sft.batch_size": 16,
            "sft.micro_batch_size": 16,
            "sft.use_lora": True,
            "grpo.max_steps": 30,  # 200 steps of 256 rollouts: 3-4 hours on a T4 by its step time; 30: half an hour
            "grpo.min_random_move_prob": 0.2,  # the original course's first run
            "grpo.max_random_move_prob": 0.7,
            "grpo.prompts_per_step": 32,  # 256 rollouts per step
            "grpo.micro_batch_size": 8,
            "grpo.max_tokens_per_turn": 256,
            "grpo.max_episode_tokens": 1536,
            "grpo.learning_rate": 1e-5,
            "grpo.use_lora": True,
            "grpo.vllm_mode": "colocate",
            "every_cell.games_at_once": 128,  # an expectation, not measured: a GPU step of 128 short prompts
            "factory.steps": 3,
        }
    ),
    "full": _BASE.with_settings(
        **{
            "name": "full",
            "description": "a GPU box with several GPUs: a 2.6B hub model, vLLM server + accelerate "
            "(not yet run by the course team: budgets are untested estimates)",
            "model": "LiquidAI/LFM2-2.6B",
            "server": "vllm",
            "server_start_timeout_s": 900,
            "max_concurrent": 128,
            "chat.max_tokens": 256,
            "env.num_examples": 200,
            "env.rollouts_per_example": 8,
            "env.tool_rollouts_per_question": 8,
            "env.max_tokens": 1024,
            "env.tool_max_tokens": 1024,
            "env.check_replies": 10_000,
            "eval.games": 500,
            "eval.max_tokens_per_turn": 512,
            "sft.num_games": 2000,
            "sft.learning_rate": 2e-4,
            "env.tool_sft_learning_rate": 2e-4,  # LoRA, as sft.use_lora
            "sft.batch_size": 32,
            "sft.micro_batch_size": 32,
            "sft.use_lora": True,
            "grpo.max_steps": 500,
            "grpo.min_random_move_prob": 0.2,  # the original course's first run
            "grpo.max_random_move_prob": 0.7,
            "grpo.prompts_per_step": 48,  # 384 rollouts: splits evenly over 3 training GPUs x 8 x 16
            "grpo.micro_batch_size": 8,
            "grpo.max_tokens_per_turn": 512,
            "grpo.max_episode_tokens": 3072,
            "grpo.learning_rate": 1e-5,
            "grpo.use_lora": True,
            "grpo.vllm_mode": "server",
            "every_cell.games_at_once": 256,  # an expectation, not measured
            "factory.steps": 3,
        }
    ),
}


def detect_hardware() -> dict:
    """What this machine has, without importing torch if it is not installed."""
    info = {"platform": platform.platform(), "cpu_cores": os.cpu_count(), "gpus": []}
    try:
        import torch

        if torch.cuda.is_available():
            info["gpus"] = [
                f"{torch.cuda.get_device_name(i)} ({torch.cuda.get_device_properties(i).total_memory / 2**30:.0f} GiB)"
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
        raise ValueError(
            f"The {name!r} profile needs an NVIDIA GPU, and PyTorch sees none "
            f"(torch.cuda.is_available() is False). Unset {PROFILE_VARIABLE} to pick the profile "
            f"from the hardware, or set {PROFILE_VARIABLE}=cpu. On Colab: Runtime > Change runtime "
            "type > a GPU, then run the notebook again from the top."
        )
    reason = why_no_vllm(capability)
    if reason is None:
        return profile
    _say_once(
        f"{reason}: the {name!r} profile serves with `transformers serve --device cuda "
        "--continuous-batching` and GRPO generates with transformers. That works; vLLM would be "
        f"several times faster ({INSTALL_VLLM}, Linux + NVIDIA GPU)."
    )
    return profile.with_settings(**{"server": "transformers", "grpo.vllm_mode": ""})


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
