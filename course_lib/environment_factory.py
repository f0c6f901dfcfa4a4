"""TRL's `environment_factory` next to the course's `rollout_func` bridge (notebook 11).

The environment class is the lesson and lives in the notebook; this module is the plumbing: the
trainer built like `grpo.build_grpo_trainer` (same model loading, LoRA and GRPO settings) but with
`environment_factory=` instead of `rollout_func=`, the rubric's metrics as zero-weight TRL reward
functions, and a recorder of the token ids and loss mask each trainer generated last.
"""

from itertools import groupby
from pathlib import Path

from course_lib.grpo import LeanGRPOTrainer, grpo_config
from course_lib.hardware import cuda_capability, score_answer_tokens_only_on_cpu, training_dtype
from course_lib.local_model import generation_attention
from course_lib.profiles import Profile
from course_lib.training import lora_config


def comparison_profile(profile: Profile) -> Profile:
    """The profile's factory budget on its GRPO settings: both trainers of notebook 11 play these rows. One
    micro-batch holds a whole step (a few rollouts), whatever micro-batch the profile's own GRPO run uses."""
    rollouts = profile.factory.prompts_per_step * profile.factory.num_generations
    return profile.with_settings(
        **{
            "grpo.max_steps": profile.factory.steps,
            "grpo.prompts_per_step": profile.factory.prompts_per_step,
            "grpo.num_generations": profile.factory.num_generations,
            "grpo.micro_batch_size": rollouts,
        }
    )


def trl_metrics(metrics: list) -> list:
    """One TRL reward function per rubric metric (`won(state)` ...), read from each rollout's
    environment object (`environment.state`). Weighted 0, they are logged as rewards/<name>/mean."""
    functions = []
    for metric in metrics:

        def reward(environments, _metric=metric, **kwargs):
            return [float(_metric(environment.state)) for environment in environments]

        reward.__name__ = metric.__name__
        functions.append(reward)
    return functions


def build_factory_trainer(
    profile: Profile, environment_factory, dataset, model_path: str, output_dir: Path, metrics: list, **overrides
):
    """A GRPOTrainer that plays `environment_factory`'s tools: TRL owns the loop and the reward is the
    environment's `get_reward` (weight 1); `metrics` are logged only (weight 0)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    capability = cuda_capability()
    attention = generation_attention() if capability is None else None
    if capability is None:
        score_answer_tokens_only_on_cpu()
    functions = trl_metrics(metrics)
    return LeanGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(
            model_path, dtype=training_dtype(capability, profile.grpo.use_lora), attn_implementation=attention
        ),
        processing_class=AutoTokenizer.from_pretrained(model_path),
        reward_funcs=functions,
        args=grpo_config(profile, output_dir, [0.0] * len(functions), **overrides),
        train_dataset=dataset,
        peft_config=lora_config(profile.grpo.use_lora, rank=8),
        environment_factory=environment_factory,
    )


def record_last_batch(trainer) -> dict:
    """Keep the completion ids and loss mask (1 = model token) of the last batch `trainer` generated.
    The bridge's come from its rollout_func (`env_mask`); environment_factory's from TRL's internal
    `_generate` (its `tool_mask`), which TRL 1.16 returns third."""
    seen = {}
    if trainer.rollout_func is not None:
        rollout_func = trainer.rollout_func

        def recorded_rollout_func(prompts, trainer_):
            output = rollout_func(prompts, trainer_)
            seen.update(completion_ids=output["completion_ids"], mask=output["env_mask"])
            return output

        trainer.rollout_func = recorded_rollout_func
    else:
        generate = trainer._generate

        def recorded_generate(prompts):
            output = generate(prompts)
            seen.update(completion_ids=output[1], mask=output[2])
            return output

        trainer._generate = recorded_generate
    return seen


def masked_text(tokenizer, completion_ids: list[int], mask: list[int]) -> str:
    """An episode's completion as text, the tokens kept out of the loss (mask 0) inside [[ ]]."""
    pieces = []
    for kept, run in groupby(zip(completion_ids, mask), key=lambda pair: pair[1]):
        text = tokenizer.decode([token for token, _ in run])
        pieces.append(text if kept else f"[[{text}]]")
    return "".join(pieces)
