"""The bridge from a verifiers environment to TRL's GRPOTrainer (`rollout_func`).

No second game loop: each episode is the environment's own `rollout()` (its `setup_state`,
`env_response`, stop conditions) followed by its own rubric. The only new piece is the model
client the environment talks to. `LocalModelClient` is a verifiers client whose "server" is the
model being trained; it keeps each conversation as token ids, turn by turn:

    prompt ids | model turn 1 | env reply 1 | model turn 2 | env reply 2 | ... | model turn n
               |  mask 1      |  mask 0     |  mask 1      |  mask 0     |     |  mask 1

Model tokens are kept exactly as sampled (never decoded and re-tokenized); an environment reply
is the difference between two renders of the chat template. `env_mask` keeps environment tokens
out of the loss. Requests from all episodes in flight are batched into one `generate` call.
"""

import asyncio
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import verifiers as vf
from verifiers.types import Response, ResponseMessage, ResponseTokens, Usage

# generate_batch(list of prompt token ids, max_new_tokens) -> list of (completion ids, logprobs)
GenerateBatch = Callable[[list[list[int]], int], list[tuple[list[int], list[float]]]]


class LocalModelClient(vf.Client):
    """A verifiers client that generates with a local function and records token ids."""

    def __init__(self, tokenizer, generate_batch: GenerateBatch, max_tokens_per_turn: int):
        super().__init__(None)
        self.tokenizer = tokenizer
        self.generate_batch = generate_batch
        self.max_tokens_per_turn = max_tokens_per_turn
        self.conversations: dict[str, tuple[list[dict], list[int]]] = {}  # trajectory id -> (messages, ids)
        self._pending: list[tuple[list[int], asyncio.Future]] = []
        self.closed_turns = 0  # turns cut at max_tokens_per_turn, closed by us with an EOS

    # The prompt as plain {"role", "content"} dicts, what chat templates expect.
    async def to_native_prompt(self, messages):
        return [{"role": m.role, "content": m.content} for m in messages], {}

    async def get_native_response(self, prompt, model, sampling_args, tools=None, state=None, **kwargs):
        if tools:
            raise vf.ModelError("LocalModelClient does not support tool calls")
        trajectory_id = state["trajectory_id"] if state is not None else uuid.uuid4().hex
        prompt_ids = self._prompt_ids(trajectory_id, prompt)
        completion_ids, logprobs = await self._generate(prompt_ids)
        eos = self.tokenizer.eos_token_id
        finished = bool(completion_ids) and completion_ids[-1] == eos
        completion_mask = [1] * len(completion_ids)
        if not finished:  # close the turn so the conversation stays well formed; not a model token
            completion_ids, logprobs, completion_mask = completion_ids + [eos], logprobs + [0.0], completion_mask + [0]
            self.closed_turns += 1
        text = self.tokenizer.decode(completion_ids, skip_special_tokens=True)
        self.conversations[trajectory_id] = (
            prompt + [{"role": "assistant", "content": text}], prompt_ids + completion_ids)
        return Response(
            id=uuid.uuid4().hex, created=int(time.time()), model=model,
            usage=Usage(prompt_tokens=len(prompt_ids), reasoning_tokens=0, completion_tokens=len(completion_ids),
                        total_tokens=len(prompt_ids) + len(completion_ids)),
            message=ResponseMessage(
                content=text, finish_reason="stop" if finished else "length", is_truncated=not finished,
                tokens=ResponseTokens(prompt_ids=prompt_ids, prompt_mask=[0] * len(prompt_ids),
                                      completion_ids=completion_ids, completion_mask=completion_mask,
                                      completion_logprobs=logprobs)),
        )

    def _render(self, messages, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    def _prompt_ids(self, trajectory_id: str, messages: list[dict]) -> list[int]:
        """Token ids of the prompt: the previous turn's ids plus the new environment reply."""
        encode = lambda text: self.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
        if trajectory_id not in self.conversations:
            return encode(self._render(messages, add_generation_prompt=True))
        previous_messages, previous_ids = self.conversations[trajectory_id]
        if messages[: len(previous_messages)] != previous_messages:
            raise vf.ModelError("the conversation was rewritten between turns; cannot extend its tokens")
        before = self._render(previous_messages, add_generation_prompt=False)
        after = self._render(messages, add_generation_prompt=True)
        # The model's ids end with its EOS; the env reply is everything the template adds after it.
        cut = before.rfind(self.tokenizer.eos_token) + len(self.tokenizer.eos_token)
        if not after.startswith(before[:cut]):
            raise vf.ModelError("the chat template renders earlier turns differently; cannot extend tokens")
        return previous_ids + encode(after[cut:])

    async def _generate(self, prompt_ids: list[int]) -> tuple[list[int], list[float]]:
        """Queue one request; the first request of a batch flushes everyone queued meanwhile."""
        future = asyncio.get_running_loop().create_future()
        self._pending.append((prompt_ids, future))
        if len(self._pending) == 1:
            asyncio.get_running_loop().create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        await asyncio.sleep(0.01)  # let every episode that is ready submit its turn
        batch, self._pending = self._pending, []
        try:
            results = self.generate_batch([ids for ids, _ in batch], self.max_tokens_per_turn)
        except Exception as error:  # e.g. out of memory: fail the episodes, not the event loop
            for _, future in batch:
                future.set_exception(error)
            return
        for (_, future), result in zip(batch, results):
            future.set_result(result)

    async def from_native_response(self, response):
        return response

    async def raise_from_native_response(self, response):
        return None

    def setup_client(self, config):
        return None

    async def to_native_tool(self, tool):
        raise vf.ModelError("LocalModelClient does not support tools")

    async def close(self):
        return None


def episode_tokens(state) -> dict:
    """Concatenate an episode's turns: prompt ids, completion ids, env mask (1 = model token)."""
    steps = [step["tokens"] for step in state["trajectory"]]
    prompt_ids = steps[0]["prompt_ids"]
    completion_ids, env_mask, logprobs = [], [], []
    for step in steps:
        env_reply = step["prompt_ids"][len(prompt_ids) + len(completion_ids):]
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


def run_coroutine(coroutine):
    """Run async code from sync code, also inside Jupyter where an event loop is already running."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def reward_names_and_weights(env) -> list[tuple[str, float]]:
    """The rubric's functions and weights; weight 0 are metrics (logged, not rewarded)."""
    return list(zip(env.rubric._get_reward_func_names(), env.rubric._get_reward_weights()))


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


def make_rollout_func(env, env_dataset, tokenizer, generate_batch: GenerateBatch, max_tokens_per_turn: int,
                      stats: dict | None = None):
    """`rollout_func(prompts, trainer)` for GRPOTrainer. Prompts arrive already repeated
    num_generations times; we return one episode per prompt, with the rubric's values as extra
    keys for `trl_reward_functions`."""
    names = [name for name, _ in reward_names_and_weights(env)]

    def rollout_func(prompts: list[str], trainer) -> dict:
        rows = [env_dataset[json.loads(prompt)["row"]] for prompt in prompts]
        client = LocalModelClient(tokenizer, lambda ids, n: generate_batch(trainer, ids, n), max_tokens_per_turn)
        states = run_coroutine(play_episodes(env, rows, client))
        output = {"prompt_ids": [], "completion_ids": [], "env_mask": [], "logprobs": []}
        for state in states:
            for key, value in episode_tokens(state).items():
                output[key].append(value)
        for name in names:
            output[name] = [state["metrics"][name] for state in states]
        if stats is not None:  # TRL logs the rest (rewards, lengths, frac_reward_zero_std)
            stats.setdefault("closed_turns", []).append(client.closed_turns)
        return output

    return rollout_func


def hf_generate_batch(trainer, prompts: list[list[int]], max_new_tokens: int):
    """Sample with transformers `generate` (CPU, or GPU without vLLM), left-padded batch."""
    import torch
    from trl.models import unwrap_model_for_generation

    tokenizer = trainer.processing_class
    width = max(len(ids) for ids in prompts)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in prompts])
    attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts])
    args = trainer.args
    with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model, torch.no_grad():
        out = model.generate(
            input_ids=input_ids.to(model.device), attention_mask=attention_mask.to(model.device),
            do_sample=True, temperature=args.temperature, top_p=args.top_p, max_new_tokens=max_new_tokens,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=pad,
            output_scores=True, return_dict_in_generate=True,
        )
        scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    results = []
    for sequence, logprobs in zip(out.sequences[:, width:].tolist(), scores.tolist()):
        length = sequence.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in sequence else len(sequence)
        results.append((sequence[:length], logprobs[:length]))
    return results


def vllm_generate_batch(trainer, prompts: list[list[int]], max_new_tokens: int):
    """Sample with TRL's vLLM and return the real per-token sampling logprobs.

    Server mode (`full` profile): every training process asks the vLLM server on its own, so
    processes whose games last a different number of turns never wait on each other. Colocate
    mode (`gpu` profile, one process): TRL's colocated engine, which caps every turn at the
    trainer's max_completion_length."""
    generation = trainer.vllm_generation
    if generation.mode == "server":
        if getattr(generation, "vllm_client", None) is None:  # TRL connects the main process only
            from trl.generation.vllm_client import VLLMClient

            base_url = generation.server_base_url or f"http://{generation.server_host}:{generation.server_port}"
            generation.vllm_client = VLLMClient(base_url=base_url, connection_timeout=generation.server_timeout)
        output = generation.vllm_client.generate(
            prompts=prompts, n=1, temperature=generation.temperature, top_p=generation.top_p,
            max_tokens=max_new_tokens, logprobs=0)
        completion_ids, logprobs = output["completion_ids"], output["logprobs"]
    else:
        _, completion_ids, logprobs, _ = generation.generate(prompts=prompts, images=None, num_generations=1)
    return [(ids, [token[0] for token in lps]) for ids, lps in zip(completion_ids, logprobs)]
