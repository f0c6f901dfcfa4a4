"""The bridge from a verifiers environment to TRL's GRPOTrainer (`rollout_func`).

No second game loop: each episode is the environment's own `rollout()` (its `setup_state`,
`env_response`, stop conditions) followed by its own rubric. The only new piece is the model
client the environment talks to: `course_lib.local_model.LocalModelClient`, whose "server" is the
model being trained (`generate_batch(trainer, prompt_ids, sampling, prefix_cache)`, transformers or TRL's vLLM).
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
from typing import Callable

from course_lib.check_environment import reward_functions
from course_lib.local_model import LocalModelClient, PrefixCache
from course_lib.offline import run_coroutine


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
    env, env_dataset, tokenizer, generate_batch: Callable, max_tokens_per_turn: int, stats: dict | None = None
):
    """`rollout_func(prompts, trainer)` for GRPOTrainer. Prompts arrive already repeated
    num_generations times; we return one episode per prompt, with the rubric's values as extra
    keys for `trl_reward_functions`."""
    names = [name for name, _ in reward_names_and_weights(env)]

    def rollout_func(prompts: list[str], trainer) -> dict:
        rows = [env_dataset[json.loads(prompt)["row"]] for prompt in prompts]
        sampling = {
            "max_tokens": max_tokens_per_turn,
            "temperature": trainer.args.temperature,
            "top_p": trainer.args.top_p,
        }
        prefix_cache = PrefixCache(max_entries=len(prompts))  # this step's weights only
        generation_seconds = 0.0

        def generate(ids, options):  # the model's share of the rollouts, for grpo.step_split
            nonlocal generation_seconds
            start = time.perf_counter()
            try:
                return generate_batch(trainer, ids, options, prefix_cache)
            finally:
                generation_seconds += time.perf_counter() - start

        client = LocalModelClient(tokenizer, generate, sampling, max_batch_size=len(prompts))
        start = time.perf_counter()
        states = run_coroutine(play_episodes(env, rows, client))
        rollout_seconds = time.perf_counter() - start
        output = {"prompt_ids": [], "completion_ids": [], "env_mask": [], "logprobs": []}
        for state in states:
            for key, value in episode_tokens(state).items():
                output[key].append(value)
        for name in names:
            output[name] = [state["metrics"][name] for state in states]
        if stats is not None:  # TRL logs the rest (rewards, lengths, frac_reward_zero_std)
            stats.setdefault("closed_turns", []).append(client.closed_turns)
            stats.setdefault("rollout_seconds", []).append(rollout_seconds)
            stats.setdefault("generation_seconds", []).append(generation_seconds)
        return output

    return rollout_func


def hf_generate_batch(trainer, prompts: list[list[int]], sampling: dict, prefix_cache: PrefixCache):
    """Sample with transformers `generate` (CPU, or GPU without vLLM), with per-token logprobs.
    Each turn feeds the model only its new tokens: the episode's earlier turns are in `prefix_cache`."""
    from trl.models import unwrap_model_for_generation

    with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
        return prefix_cache.sample(model, trainer.processing_class, prompts, sampling, with_logprobs=True)


def vllm_generate_batch(trainer, prompts: list[list[int]], sampling: dict, prefix_cache: PrefixCache):
    """Sample with TRL's vLLM and return the real per-token sampling logprobs.

    Server mode (`full` profile): every training process asks the vLLM server on its own, so
    processes whose games last a different number of turns never wait on each other. Colocate
    mode (`gpu` profile, one process): TRL's colocated engine, which caps every turn at the
    trainer's max_completion_length. vLLM caches shared prefixes itself: `prefix_cache` goes unused."""
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
