"""The bridge from a verifiers environment to TRL's GRPOTrainer (`rollout_func`).

No second game loop: each episode is the environment's own `rollout()` (its `setup_state`,
`env_response`, stop conditions) followed by its own rubric. The only new piece is the model
client the environment talks to: `course_lib.local_model.LocalModelClient`, whose "server" is the
model being trained. As TRL does with vLLM, the policy's weights go, at each step, to a model that
only generates: `PolicyCopy` (a `LocalModel` in this process: bfloat16 and the fast path where
the CPU has them, while the policy trains in float32) or TRL's vLLM (`vllm_generation`).
It keeps each conversation as token ids, turn by turn:

    prompt ids | model turn 1 | env reply 1 | model turn 2 | env reply 2 | ... | model turn n
               |  mask 1      |  mask 0     |  mask 1      |  mask 0     |     |  mask 1

Model tokens are kept exactly as sampled (never decoded and re-tokenized); an environment reply
is the difference between two renders of the chat template. `env_mask` keeps environment tokens
out of the loss. Requests from all episodes in flight are batched into one `generate` call.
"""

import asyncio
import json
import time
from functools import partial
from typing import Callable

import torch

from course_lib.local_model import GenerateBatch, LocalModel, LocalModelClient
from course_lib.offline import run_coroutine
from course_lib.rewards import reward_functions


def episode_tokens(state) -> dict:
    """Concatenate an episode's turns: prompt ids, completion ids, env mask (1 = model token)."""
    steps = [step["tokens"] for step in state["trajectory"]]
    prompt_ids = steps[0]["prompt_ids"]
    completion_ids, env_mask, logprobs = [], [], []
    for step in steps:
        env_reply = step["prompt_ids"][len(prompt_ids) + len(completion_ids) :]
        completion_ids += env_reply + step["completion_ids"]
        env_mask += [0] * len(env_reply) + step["completion_mask"]
        logprobs += [0.0] * len(env_reply) + step["completion_logprobs"]
    return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "env_mask": env_mask, "logprobs": logprobs}


async def play_episodes(env, rows: list[dict], client: LocalModelClient, model_name: str = "policy") -> list:
    """Run and score one episode per row with the environment's own rollout and rubric."""

    async def one(row):
        state = await env.rollout(row, client, model_name, {})
        if state.get("error") is not None:  # verifiers stores rollout errors in the state
            raise RuntimeError(f"episode failed: {state['error']!r}") from state["error"]
        await env.rubric.score_rollout(state)
        await env.rubric.cleanup(state)
        return state

    try:
        return await asyncio.gather(*(one(row) for row in rows))
    finally:
        client.conversations.clear()


def reward_names_and_weights(env) -> list[tuple[str, float]]:
    """The rubric's functions and weights; weight 0 are metrics (logged, not rewarded)."""
    return [(reward.name, reward.weight) for reward in reward_functions(env)]


def trl_reward_functions(env) -> tuple[list[Callable], list[float]]:
    """One TRL reward function per rubric function: it returns the value the rubric computed."""
    functions = []
    for name, _ in reward_names_and_weights(env):

        def reward(completions, _name=name, **kwargs):
            return [float(value) for value in kwargs[_name]]

        reward.__name__ = name  # TRL logs rewards/<name>/mean
        functions.append(reward)
    return functions, [weight for _, weight in reward_names_and_weights(env)]


def trl_prompt_dataset(env_dataset):
    """TRL only hands prompts to rollout_func, so each TRL prompt is the key of an env row.
    Row order is kept: shuffle_dataset=False keeps the environment's stratified blocks."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [json.dumps({"row": i}) for i in range(len(env_dataset))]})


def make_rollout_func(
    env,
    env_dataset,
    tokenizer,
    generation_for_step: Callable[[object], GenerateBatch],
    max_tokens_per_turn: int,
    stats: dict | None = None,
):
    """`rollout_func(prompts, trainer)` for GRPOTrainer. Prompts arrive already repeated
    num_generations times; we return one episode per prompt, with the rubric's values as extra
    keys for `trl_reward_functions`. `generation_for_step(trainer)` gives the step's
    `generate_batch(prompt ids, sampling)` with the policy's current weights (`PolicyCopy`, `vllm_generation`)."""
    names = [name for name, _ in reward_names_and_weights(env)]

    def rollout_func(prompts: list[str], trainer) -> dict:
        rows = [env_dataset[json.loads(prompt)["row"]] for prompt in prompts]
        sampling = {
            "max_tokens": max_tokens_per_turn,
            "temperature": trainer.args.temperature,
            "top_p": trainer.args.top_p,
        }
        rollout_start = time.perf_counter()
        generate_batch = generation_for_step(trainer)
        generation_seconds = time.perf_counter() - rollout_start  # the weights' copy counts as generation

        def generate(ids, options):  # the model's share of the rollouts, for grpo.step_split
            nonlocal generation_seconds
            start = time.perf_counter()
            try:
                return generate_batch(ids, options)
            finally:
                generation_seconds += time.perf_counter() - start

        client = LocalModelClient(tokenizer, generate, sampling, max_batch_size=len(prompts))
        states = run_coroutine(play_episodes(env, rows, client))
        rollout_seconds = time.perf_counter() - rollout_start
        episodes = [episode_tokens(state) for state in states]
        output = {key: [e[key] for e in episodes] for key in ("prompt_ids", "completion_ids", "env_mask", "logprobs")}
        output |= {name: [state["metrics"][name] for state in states] for name in names}
        if stats is not None:  # TRL logs the rest (rewards, lengths, frac_reward_zero_std)
            stats.setdefault("closed_turns", []).append(client.closed_turns)
            stats.setdefault("rollout_seconds", []).append(rollout_seconds)
            stats.setdefault("generation_seconds", []).append(generation_seconds)
        return output

    return rollout_func


class PolicyCopy:
    """The policy's generation without vLLM: a `LocalModel` loaded once from the start checkpoint,
    given the policy's current weights at the start of each step, as TRL gives them to vLLM.

    It generates as the evaluations do (a cache allocated once per batch, each game's earlier turns
    kept between turns, top-k sampling; bfloat16 where the CPU multiplies it natively) while the
    policy trains in float32. TRL scores the episodes with the policy itself, so the loss is the
    policy's; the copy only decides which tokens are sampled, from nearly the same distribution."""

    def __init__(self, model_path: str, rollouts_per_step: int, device: str = "cpu", dtype: str | None = None):
        self.model = LocalModel(model_path, max_batch_size=rollouts_per_step, dtype=dtype, device=device)

    def __call__(self, trainer) -> GenerateBatch:
        self.model.load_weights(policy_weights(trainer.accelerator.unwrap_model(trainer.model)))
        return partial(self.model.generate_batch, with_logprobs=True)


def policy_weights(model) -> dict:
    """The policy's weights under the names of the checkpoint it was loaded from, its LoRA adapters
    (if any) merged in. Unlike TRL's sync to vLLM (merge in place, read, unmerge), the trained
    weights are never written, so a step's copy cannot round them."""
    from peft import PeftModel
    from peft.tuners.lora import LoraLayer

    if not isinstance(model, PeftModel):
        return dict(model.named_parameters())
    base = model.get_base_model()
    weights = {}
    with torch.no_grad():
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer):
                layer = module.get_base_layer()
                delta = sum(module.get_delta_weight(adapter) for adapter in module.active_adapters)
                weights[f"{name}.weight"] = layer.weight + delta
    for name, parameter in base.named_parameters():
        if model.prefix not in name:  # the adapters' own weights are merged above
            weights.setdefault(name.replace(".base_layer", ""), parameter)
    return weights


def vllm_generation(trainer) -> GenerateBatch:
    """The step's generation with TRL's vLLM, which gets the step's weights from TRL itself."""
    return partial(vllm_generate_batch, trainer)


def vllm_generate_batch(trainer, prompts: list[list[int]], sampling: dict):
    """Sample with TRL's vLLM and return the real per-token sampling logprobs.

    Server mode (`full` profile): every training process asks the vLLM server on its own, so
    processes whose games last a different number of turns never wait on each other. Colocate
    mode (`gpu` profile, one process): TRL's colocated engine, which caps every turn at the
    trainer's max_completion_length. vLLM caches shared prefixes itself."""
    generation = trainer.vllm_generation
    if generation.mode == "server":
        if getattr(generation, "vllm_client", None) is None:  # TRL connects the main process only
            from trl.generation.vllm_client import VLLMClient

            base_url = generation.server_base_url or f"http://{generation.server_host}:{generation.server_port}"
            generation.vllm_client = VLLMClient(base_url=base_url, connection_timeout=generation.server_timeout)
        output = generation.vllm_client.generate(
            prompts=prompts,
            n=1,
            temperature=generation.temperature,
            top_p=generation.top_p,
            max_tokens=sampling["max_tokens"],
            logprobs=0,
        )
        completion_ids, logprobs = output["completion_ids"], output["logprobs"]
    else:
        _, completion_ids, logprobs, _ = generation.generate(prompts=prompts, images=None, num_generations=1)
    return [(ids, [token[0] for token in lps]) for ids, lps in zip(completion_ids, logprobs)]
