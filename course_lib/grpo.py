"""GRPO on a verifiers environment with TRL: the trainer, configured from a profile.

The environment supplies everything task-specific (prompts, opponent, rewards) through
`rollout_bridge`; this file only chooses the training knobs. The same function serves the
notebook (`cpu`, `gpu`) and the multi-GPU script (`full`, see `course_lib/train_grpo.py`).
"""

import functools
import hashlib
import json
import os
import time
from pathlib import Path

import torch
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from course_lib import rollout_bridge
from course_lib.hardware import cuda_capability, mixed_precision, score_answer_tokens_only_on_cpu, training_dtype
from course_lib.profiles import Profile
from course_lib.training import can_share_prefix, experiment_logging, lora_config, shared_prefix_cache

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental

# Why these: "dapo" normalizes the loss by the number of trained tokens in the batch, so long
# and short games weigh per token, not per game (plain "grpo" averages per game, so it penalises
# each token of a long wrong game less and drifts toward long wrong answers: Dr. GRPO's length bias);
# scale_rewards="none" keeps advantages in reward units (Dr. GRPO): dividing by a group's std
# would blow up groups that differ by a format bonus alone.
LOSS_TYPE = "dapo"
SCALE_REWARDS = "none"


def grpo_config(profile: Profile, output_dir: Path, reward_weights: list[float], **overrides):
    capability = cuda_capability()
    rollouts_per_step = profile.grpo.prompts_per_step * profile.grpo.num_generations
    processes = int(os.environ.get("WORLD_SIZE", 1))  # set by accelerate launch
    if rollouts_per_step % (profile.grpo.micro_batch_size * processes):
        raise ValueError(
            f"{rollouts_per_step} rollouts per step do not split into micro-batches of "
            f"{profile.grpo.micro_batch_size} on {processes} processes: change "
            "grpo.prompts_per_step, grpo.micro_batch_size or the number of GPUs"
        )
    settings = dict(
        output_dir=str(output_dir),
        max_steps=profile.grpo.max_steps,
        num_generations=profile.grpo.num_generations,
        per_device_train_batch_size=profile.grpo.micro_batch_size,
        gradient_accumulation_steps=rollouts_per_step // (profile.grpo.micro_batch_size * processes),
        learning_rate=profile.grpo.learning_rate,
        beta=profile.grpo.beta,
        loss_type=LOSS_TYPE,
        scale_rewards=SCALE_REWARDS,
        reward_weights=reward_weights,
        temperature=profile.grpo.temperature,  # explore: every rollout of a group must be able to differ
        top_p=1.0,
        max_completion_length=profile.grpo.max_tokens_per_turn,
        shuffle_dataset=False,  # keep the environment's stratified blocks (one bucket per prompt)
        logging_steps=1,
        save_steps=max(1, profile.grpo.max_steps // 4),
        save_total_limit=2,
        **experiment_logging(f"grpo-{profile.name}-{Path(output_dir).name}", overrides.pop("report_to", None)),
        seed=0,
        use_cpu=capability is None,
        # float32 on every CPU (see mixed_precision); a colocated vLLM picks float16 where bfloat16 is unsupported
        **mixed_precision(capability, cpu_autocast=False),
        gradient_checkpointing=capability is not None,
        use_vllm=bool(profile.grpo.vllm_mode),
        vllm_mode=profile.grpo.vllm_mode or "colocate",
        vllm_gpu_memory_utilization=0.35,
        vllm_enable_sleep_mode=False,  # it would re-push the weights every turn
    )
    settings.update(overrides)
    return GRPOConfig(**settings)


def build_grpo_trainer(
    profile: Profile,
    env,
    model_path: str,
    output_dir: Path,
    stats: dict | None = None,
    callbacks=None,
    **config_overrides,
):
    """A GRPOTrainer whose rollouts are full episodes of `env` and whose rewards are its rubric's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    env.set_max_total_completion_tokens(profile.grpo.max_episode_tokens)
    dataset = env.get_dataset()
    reward_functions, reward_weights = rollout_bridge.trl_reward_functions(env)
    capability = cuda_capability()
    dtype = training_dtype(capability, profile.grpo.use_lora)
    if profile.grpo.vllm_mode:
        generation = rollout_bridge.vllm_generation
    else:  # on a GPU the copy generates in the policy's dtype; on a CPU in LocalModel's (bfloat16 where native)
        generation = rollout_bridge.PolicyCopy(
            model_path,
            profile.grpo.prompts_per_step * profile.grpo.num_generations,
            device="cpu" if capability is None else "cuda",
            dtype=None if capability is None else dtype,
        )
    if capability is None:
        score_answer_tokens_only_on_cpu()
    trainer = LeanGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype),
        processing_class=tokenizer,
        reward_funcs=reward_functions,
        args=grpo_config(profile, output_dir, reward_weights, **config_overrides),
        train_dataset=rollout_bridge.trl_prompt_dataset(dataset),
        peft_config=lora_config(profile.grpo.use_lora, rank=8),
        rollout_func=rollout_bridge.make_rollout_func(
            env, dataset, tokenizer, generation, profile.grpo.max_tokens_per_turn, stats
        ),
        callbacks=[*(callbacks or []), *([StepTimer(stats)] if stats is not None else [])],
    )
    from transformers.utils.notebook import NotebookProgressCallback

    if trainer.pop_callback(NotebookProgressCallback) is not None:  # the trainer runs in a notebook
        trainer.add_callback(notebook_progress_that_stops_early())
    return trainer


# Tensors of a micro-batch with one column per completion token (TRL 1.16's names)
PER_COMPLETION_TOKEN = (
    "completion_ids",
    "completion_mask",
    "tool_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "importance_sampling_ratio",
)


def without_unused_padding(inputs: dict) -> dict:
    """A micro-batch without the completion columns that none of its episodes uses. TRL pads every
    episode of a step to the step's longest, so a micro-batch of short games still computes the
    longest game's length: in a cpu step of notebook 09, 649 columns where the median game used 270.
    Padding sits after each episode's last token, so under causal attention dropping it changes no
    log-probability of a kept token, and the dropped columns carry no loss (their mask is 0)."""
    width = inputs["completion_ids"].shape[1]
    used = inputs["completion_mask"].any(dim=0).nonzero()
    keep = int(used.max()) + 1 if len(used) else 1
    return {
        key: value[:, :keep] if key in PER_COMPLETION_TOKEN and value.dim() == 2 and value.shape[1] == width else value
        for key, value in inputs.items()
    }


class LeanGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer with two savings in its forward and backward, the same loss and gradients (to
    float rounding): a micro-batch skips the padding none of its episodes uses (a cpu step of full games
    1.4x faster, RESULTS.md "GRPO's forward and backward without the step's padding"), and the episodes
    of a micro-batch that share a prompt (a group) run that prompt once (`shared_prompt_log_probs`)."""

    def compute_loss(self, model, inputs, *args, **kwargs):
        return super().compute_loss(model, without_unused_padding(inputs), *args, **kwargs)

    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False, **extra
    ):
        prompt_width = input_ids.size(1) - logits_to_keep
        groups = rows_by_prompt(input_ids[:, :prompt_width], attention_mask[:, :prompt_width])
        unshareable = not can_share_prefix(model)  # gradient checkpointing (the GPU path), or a cache without keys
        if unshareable or any(value for value in extra.values()) or len(groups) == len(input_ids):  # images, MoE
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, **extra
            )
        parts, order = [], []
        with self.accelerator.autocast():
            for rows in groups:
                prompt = input_ids[rows[0], :prompt_width][attention_mask[rows[0], :prompt_width].bool()]
                tail = slice(prompt_width, None)
                parts.append(shared_prompt_log_probs(model, prompt, input_ids[rows, tail], attention_mask[rows, tail]))
                order += rows
        where = torch.empty(len(order), dtype=torch.long)
        where[torch.tensor(order)] = torch.arange(len(order))  # back to the micro-batch's row order
        log_probs = torch.cat([part.log_probs for part in parts])[where]
        entropies = torch.cat([part.entropy for part in parts])[where] if compute_entropy else None
        return log_probs, entropies, None


def rows_by_prompt(prompt_ids, prompt_mask) -> list[list[int]]:
    """The micro-batch's rows grouped by identical prompt (tokens and padding), in order of first appearance."""
    groups = {}
    for row, (ids, mask) in enumerate(zip(prompt_ids.tolist(), prompt_mask.tolist())):
        groups.setdefault((tuple(ids), tuple(mask)), []).append(row)
    return list(groups.values())


def shared_prompt_log_probs(model, prompt, completions, completion_mask):
    """Log-probabilities (and entropies) of `completions`, each after the same `prompt` (its unpadded ids),
    the prompt run once (`training.shared_prefix_cache`): every completion reads its keys and values, so
    the gradient through them is the sum over the group, as if each episode had run it. A per-move
    episode is ~90% prompt: a group of 8 then costs about a fifth of 8 separate episodes."""
    rows = len(completions)
    shared = shared_prefix_cache(model, prompt[:-1], rows, logits_to_keep=1)
    tail = torch.cat([prompt[-1:].expand(rows, 1), completions], dim=1)  # the prompt's last token scores the first
    tail_mask = torch.cat([completion_mask.new_ones(rows, 1), completion_mask], dim=1)
    labels = tail.masked_fill(tail_mask == 0, -100)
    labels[:, 0] = -100
    attention = torch.cat([completion_mask.new_ones(rows, len(prompt) - 1), tail_mask], dim=1)
    return model(input_ids=tail, attention_mask=attention, past_key_values=shared, labels=labels, fused_lm_head=True)


def notebook_progress_that_stops_early():
    """transformers' notebook progress bar, made to survive a run stopped early. In transformers 5.17
    its `on_train_end` raises TypeError when training stops at the step its bar started counting
    from (notebook 09's interrupted run stops at step 2 of 5): it divides by a time per step it has
    just set to None, to print a stale time estimate. The bar drops that estimate first."""
    from transformers.utils.notebook import NotebookProgressCallback

    class NotebookProgress(NotebookProgressCallback):
        def on_train_end(self, args, state, control, **kwargs):
            if self.training_tracker is not None:
                self.training_tracker.predicted_remaining = None
            return super().on_train_end(args, state, control, **kwargs)

    return NotebookProgress()


def grpo_checkpoint(profile: Profile) -> Path:
    """Where notebook 09 saves the GRPO model (and notebook 10 looks for it)."""
    from course_lib.profiles import output_dir

    return output_dir(profile) / "grpo" / "final"


def training_stages(profile: Profile) -> dict[str, str]:
    """Every model of the training story that exists, for notebook 10: stage -> checkpoint. A stage
    whose notebook has not run is left out and named, with the notebook that makes it, or, if the
    learner chose so, is the course's own model (`shipped_models`)."""
    from course_lib import shipped_models
    from course_lib.models import resolve_model
    from course_lib.sft import sft_checkpoint

    stages = {"base model": resolve_model(profile)}
    for stage, path, notebook in (
        ("after SFT", sft_checkpoint(profile), "08_sft_warmup.ipynb"),
        ("after GRPO", grpo_checkpoint(profile), "09_grpo_training.ipynb"),
    ):
        if (path / "config.json").is_file():
            stages[stage] = str(path)
        elif shipped_models.wanted(profile):
            stages[stage] = str(shipped_models.shipped_checkpoint(stage))
        else:
            print(
                f"{stage}: missing (no checkpoint at {path}). Run {notebook} first to add it, or set "
                f"{shipped_models.SHIPPED_VARIABLE}=1 to use the course's own model; this notebook compares "
                "the models that exist."
            )
    return stages


def latest_checkpoint(output_dir: Path) -> str | None:
    """The newest checkpoint-N folder, to resume an interrupted run (None if there is none)."""
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(output_dir)) if Path(output_dir).is_dir() else None


def game_loader(profile: Profile):
    """The full game's load_environment, asking for the profile's answer format."""
    from tictactoe import load_environment

    return functools.partial(load_environment, answer_format=profile.answer_format)


def full_game_environment(profile: Profile, seed: int = 0):
    """The full-game environment (notebook 05's, the original course's) as GRPO would see it: one
    reward per game, opponent skill stratified over the profile's range (cpu: 0-0.5; gpu and full:
    0.2-0.7, the original course's first run), one skill bucket per prompt of a step, and at most 6
    answers per game (5 moves finish any game; more only burns tokens on invalid answers). Notebook 09
    shows a group of it beside the per-move environment (`move_environment`), in the profile's answer format."""
    from tictactoe import MAX_TURNS

    return game_loader(profile)(
        num_train_examples=profile.grpo.max_steps * profile.grpo.prompts_per_step,
        num_eval_examples=0,
        min_random_move_prob=profile.grpo.min_random_move_prob,
        max_random_move_prob=profile.grpo.max_random_move_prob,
        num_groups=profile.grpo.prompts_per_step,
        max_turns=MAX_TURNS,
        seed=seed,
    )


POSITION_GAMES_SEED = 100  # training rows of the full game; the evaluations play the eval split's seeds 0-5


async def play_position_games(profile: Profile, model_path: str) -> list[list[dict]]:
    """The start model's own full games on training rows (never the evaluation's games), against
    opponents over the profile's skill range, each a list of messages. Played once per model and
    budget, stored under outputs/<profile>/grpo_position_games/; a later call reads them back."""
    from course_lib.evaluation import load_transcripts, weights_fingerprint
    from course_lib.profiles import output_dir

    key = [weights_fingerprint(str(Path(model_path).resolve())), profile.grpo.position_games, POSITION_GAMES_SEED]
    key += [profile.grpo.min_random_move_prob, profile.grpo.max_random_move_prob, profile.eval.max_tokens_per_turn]
    key += [] if profile.answer_format == "think" else [profile.answer_format]  # the default keeps older keys
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:12]
    path = output_dir(profile) / "grpo_position_games" / f"{digest}.jsonl"
    if not path.is_file():
        await _play_training_games(profile, model_path, path)
    return [game["messages"] for game in load_transcripts(path)]


async def _play_training_games(profile: Profile, model_path: str, path: Path) -> None:
    from course_lib.evaluation import save_transcripts, turn_sampling_args
    from course_lib.serving import start_model
    from tictactoe import GAME_STATE_COLUMNS

    env = game_loader(profile)(
        num_train_examples=profile.grpo.position_games,
        num_eval_examples=0,
        min_random_move_prob=profile.grpo.min_random_move_prob,
        max_random_move_prob=profile.grpo.max_random_move_prob,
        num_groups=profile.grpo.prompts_per_step,
        seed=POSITION_GAMES_SEED,
    )
    env.eval_dataset = env.dataset  # evaluate() plays the eval set: here, the training rows
    with start_model(profile, model_path=model_path) as llm:
        results = await env.evaluate(
            llm.client,
            llm.model,
            sampling_args=turn_sampling_args(profile),
            num_examples=-1,
            rollouts_per_example=1,
            max_concurrent=profile.max_concurrent,
            state_columns=GAME_STATE_COLUMNS,
        )
    save_transcripts(results["outputs"], path, player=Path(model_path).name, seed=POSITION_GAMES_SEED)


def move_environment(
    games: list[list[dict]],
    kinds=None,
    false_claim_penalty: float = 0.0,
    needed_claim_bonus: float = 0.0,
    answer_format: str = "think",
):
    """The per-move environment GRPO trains in: every position with a choice in `games` (the start
    model's own) and in the expert's games that SFT learned from, one answer per episode. `kinds`:
    only these kinds of position (tictactoe.moves.KINDS; default all); what a false claim in the
    reasoning costs and what a win or block played for its true reason earns (`grpo.false_claim_penalty`,
    `grpo.needed_claim_bonus`); `answer_format`: the one `games` were played in, the expert's games shown in it."""
    from course_lib.sft import in_answer_format, load_dataset
    from tictactoe.moves import KINDS, load_environment

    games = games + list(in_answer_format(load_dataset(), answer_format)["messages"])
    return load_environment(
        games,
        kinds=kinds or KINDS,
        false_claim_penalty=false_claim_penalty,
        needed_claim_bonus=needed_claim_bonus,
    )


# --- Training curves -----------------------------------------------------------------------
# What TRL logs each step under these names: the rubric's functions are logged as rewards/<name>/mean.
# A full game logs its outcomes, a single move whether it was optimal and legal: each run draws its own.
CURVES = {
    "reward": "total reward (mean, and spread within groups)",
    "outcomes": "games won / drawn / lost",
    "rewards/invalid_moves/mean": "invalid answers per game",
    "rewards/optimal/mean": "optimal answers",
    "rewards/legal/mean": "legal answers",
    "frac_reward_zero_std": "groups with no reward spread",
    "completions/mean_length": "model tokens per episode",
}


def training_curves(history: list[dict], title: str):
    """One panel per curve of CURVES that the run logged, from a trainer's log_history (the steps that
    logged a reward)."""
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.ticker import MaxNLocator

    logs = pd.DataFrame([row for row in history if "reward" in row])
    logged = set(logs.columns) | ({"outcomes"} if "rewards/won/mean" in logs else set())
    curves = {column: name for column, name in CURVES.items() if column in logged} or {"reward": CURVES["reward"]}
    fig, axes = plt.subplots(1, len(curves), figsize=(3.2 * len(curves), 2.9), squeeze=False)
    for ax, (column, name) in zip(axes[0], curves.items()):
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no half steps on a short run
        if logs.empty:
            continue
        if column == "reward":
            ax.plot(logs["step"], logs["reward"], marker="o", ms=3)
            ax.fill_between(
                logs["step"], logs["reward"] - logs["reward_std"], logs["reward"] + logs["reward_std"], alpha=0.2
            )
        elif column == "outcomes":
            for result, color in (("won", "#2e7d32"), ("drew", "#9e9e9e"), ("lost", "#c62828")):
                ax.plot(logs["step"], logs[f"rewards/{result}/mean"], marker="o", ms=3, color=color, label=result)
            ax.set_ylim(-0.05, 1.05)
            ax.legend(fontsize=7)
        else:
            ax.plot(logs["step"], logs[column], marker="o", ms=3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


class LiveCurves(TrainerCallback):
    """Redraws `training_curves` in the notebook after every training step, so a learner watches the
    run as it goes (the progress bar alone says only how long it has left)."""

    def __init__(self, title: str):
        self.title, self.history, self.handle = title, [], None

    def on_train_begin(self, args, state, control, **kwargs):
        # A resumed run starts with the log of its first part: draw the whole run, in the new cell.
        self.history, self.handle = [row for row in state.log_history if "reward" in row], None

    def on_log(self, args, state, control, logs=None, **kwargs):
        import matplotlib.pyplot as plt
        from IPython.display import display

        if not logs or "reward" not in logs:
            return
        self.history.append({"step": state.global_step, **logs})
        fig = training_curves(self.history, self.title)
        if self.handle is None:
            self.handle = display(fig, display_id=True)
        else:
            self.handle.update(fig)
        plt.close(fig)


class StepTimer(TrainerCallback):
    """Seconds per training step and in its optimizer update, into `stats` (see `step_split`)."""

    def __init__(self, stats: dict):
        self.stats = stats

    def on_step_begin(self, args, state, control, **kwargs):
        self.step_start = time.perf_counter()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.optimizer_start = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.stats.setdefault("optimizer_seconds", []).append(time.perf_counter() - self.optimizer_start)

    def on_step_end(self, args, state, control, **kwargs):
        self.stats.setdefault("step_seconds", []).append(time.perf_counter() - self.step_start)


def step_split(stats: dict):
    """Where each GRPO step's time went: the model generating the games, the environment (turns,
    opponent, rubric, batching waits), TRL's scoring + forward + backward over the micro-batches,
    and the optimizer update. One row per step of this process (a resumed run adds its steps)."""
    import pandas as pd

    steps = pd.DataFrame(
        {key: stats[key] for key in ("step_seconds", "rollout_seconds", "generation_seconds", "optimizer_seconds")}
    )
    split = pd.DataFrame(
        {
            "step (s)": steps.step_seconds,
            "generation": steps.generation_seconds,
            "environment": steps.rollout_seconds - steps.generation_seconds,
            "forward + backward": steps.step_seconds - steps.rollout_seconds - steps.optimizer_seconds,
            "optimizer": steps.optimizer_seconds,
        }
    )
    split.index = pd.RangeIndex(1, len(split) + 1, name="step")
    return split.round(1)
