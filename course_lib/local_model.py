"""A model in this Python process that answers many requests as one batch: the fast way on a CPU.

An evaluation sends dozens of requests at once (one per game in flight). `transformers serve`
answers them one at a time, at 6-8 tokens/s on two cores; one batched `generate` call over all of
them produces several times more tokens per second, because a CPU spends most of a decoding step
reading the weights, whatever the batch. `LocalModelClient` is a verifiers client that collects
every request that arrives while the model is busy and answers them together:

    game 1 ──┐                                       ┌──> game 1 reads its answer
    game 2 ──┼─> pending ─> one left-padded batch ───┼──> game 2 ...
    game 64 ─┘             (generate, main thread)   └──> game 64 ...

A prefix cache makes a batch of long games cheap: it keeps each game's attention keys and values
between turns, so a turn costs only its new tokens. This module uses transformers' public API only
(`generate`, `DynamicCache`); `LocalModel` also takes the speed-ups of `course_lib.fast_generation`
(a cache allocated once per batch, attention that reads grouped key/value heads in place) when that
module is on and tested with the installed transformers, and stock `generate` otherwise.

It also keeps each conversation as token ids, turn by turn, which GRPO needs (the rollout bridge
uses this same client with a copy of the model being trained). `LocalModel` loads a checkpoint and gives a
client with the same interface as `course_lib.serving.Server`, so notebooks use either alike.
"""

import asyncio
import json
import time
import uuid
from collections import Counter
from typing import Callable

import numpy as np
import torch
import verifiers as vf
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, LogitsProcessorList
from verifiers.types import Response, ResponseMessage, ResponseTokens, Usage

from course_lib.offline import OfflineClient, on_main_thread
from course_lib.tool_sft import openai_tool

# generate_batch(list of prompt token ids, sampling) -> list of (completion ids, logprobs), where
# sampling = {"max_tokens": int, "temperature": float, "top_p": float}
GenerateBatch = Callable[[list[list[int]], dict], list[tuple[list[int], list[float]]]]
# make_cache(model, capacity, cached, width) -> the batch's cache holding `cached` left-padded to `width`
MakeCache = Callable[[object, int, list, int], DynamicCache]
# make_sampler(temperature, top_p) -> a logits processor that draws each token (greedy decoding then takes it)
MakeSampler = Callable[[float, float], object]
SAMPLING_KEYS = ("max_tokens", "temperature", "top_p")
# Models whose cache is one plain (keys, values) pair per layer, the layout PrefixCache slices (tested on
# SmolLM2, a Llama); others (e.g. LFM2's convolution states) generate without it.
PREFIX_CACHE_MODEL_TYPES = {"llama"}
MIN_SHARED_PREFIX = 16  # tokens a prompt must share with an earlier sequence before its KV cache is reused


def fast_path():
    """The module `course_lib.fast_generation` when it is on and tested here, else None (it prints why not)."""
    from course_lib import fast_generation

    return fast_generation if fast_generation.enabled() else None


def generation_attention() -> str:
    """The attention to load a CPU model with that will generate padded batches (`LocalModel`; a policy that
    generates while it trains, as with TRL's `environment_factory`): the fast path's grouped-query attention
    when it is on (the same numbers as "sdpa", without copying the cached keys and values once per query
    head), stock "sdpa" otherwise."""
    fast = fast_path()
    return fast.register_grouped_query_sdpa() if fast is not None else "sdpa"


def generation_dtype() -> str:
    """What `LocalModel` computes in: bfloat16 where the CPU multiplies it natively (unless
    COURSE_CPU_BF16=0) and the fast path's attention is on, float32 otherwise. On the course's AMD
    host 64 short games ran 1.5x faster in bfloat16 (long ones, where attention dominates, 1.14x), with
    results within noise of float32 (RESULTS.md); torch's own attention kernel is 3x slower in
    bfloat16 there, hence the fast path."""
    from course_lib.hardware import cpu_bf16

    return "bfloat16" if cpu_bf16() and fast_path() is not None else "float32"


def chat_message(message) -> dict:
    """A verifiers message as chat templates read it: role and content, plus an assistant's tool
    calls or the id of the call a tool result answers."""
    native = {"role": message.role, "content": message.content}
    if getattr(message, "tool_calls", None):
        native["tool_calls"] = [
            {"type": "function", "id": call.id, "function": {"name": call.name, "arguments": call.arguments}}
            for call in message.tool_calls
        ]
    if message.role == "tool":
        native["tool_call_id"] = message.tool_call_id
    return native


class LocalModelClient(OfflineClient):
    """A verifiers client that generates with a local batch function and records token ids (no API
    behind it either: responses are already verifiers' own, as `OfflineClient`'s)."""

    def __init__(self, tokenizer, generate_batch: GenerateBatch, sampling: dict, max_batch_size: int = 64):
        super().__init__()
        self.tokenizer = tokenizer
        self.generate_batch = generate_batch
        self.sampling = sampling  # defaults; a request's own max_tokens / temperature / top_p win
        self.max_batch_size = max_batch_size
        self.conversations: dict[str, tuple[list[dict], list[int]]] = {}  # trajectory id -> (messages, ids)
        self._pending: list[tuple[list[int], dict, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None
        self.closed_turns = 0  # turns cut at max_tokens, closed by us with an EOS
        self.unreadable_tool_calls = 0  # replies offered tools whose call the response template could not read
        self.batch_sizes: list[int] = []  # one entry per generate call (the benchmark reads it)

    async def to_native_prompt(self, messages):
        return [chat_message(m) for m in messages], {}

    async def get_native_response(self, prompt, model, sampling_args, tools=None, state=None, **kwargs):
        trajectory_id = state["trajectory_id"] if state is not None else uuid.uuid4().hex
        sampling = {
            **self.sampling,
            **{k: v for k, v in (sampling_args or {}).items() if k in SAMPLING_KEYS and v is not None},
        }
        prompt_ids = self._prompt_ids(trajectory_id, prompt, tools)
        completion_ids, logprobs = await self._generate(prompt_ids, sampling)
        eos = self.tokenizer.eos_token_id
        finished = bool(completion_ids) and completion_ids[-1] == eos
        completion_mask = [1] * len(completion_ids)
        if not finished:  # close the turn so the conversation stays well formed; not a model token
            completion_ids, logprobs, completion_mask = completion_ids + [eos], logprobs + [0.0], completion_mask + [0]
            self.closed_turns += 1
        text = self.tokenizer.decode(completion_ids, skip_special_tokens=True)
        content, tool_calls = self._read_reply(prompt_ids, completion_ids, text, tools)
        self.conversations[trajectory_id] = (
            prompt + [chat_message(vf.AssistantMessage(content=content, tool_calls=tool_calls))],
            prompt_ids + completion_ids,
        )
        return Response(
            id=uuid.uuid4().hex,
            created=int(time.time()),
            model=model,
            usage=Usage(
                prompt_tokens=len(prompt_ids),
                reasoning_tokens=0,
                completion_tokens=len(completion_ids),
                total_tokens=len(prompt_ids) + len(completion_ids),
            ),
            message=ResponseMessage(
                content=content,
                tool_calls=tool_calls,
                finish_reason="tool_calls" if tool_calls else "stop" if finished else "length",
                is_truncated=not finished,
                tokens=ResponseTokens(
                    prompt_ids=prompt_ids,
                    prompt_mask=[0] * len(prompt_ids),
                    completion_ids=completion_ids,
                    completion_mask=completion_mask,
                    completion_logprobs=logprobs,
                ),
            ),
        )

    def _read_reply(self, prompt_ids, completion_ids, text: str, tools) -> tuple[str | None, list | None]:
        """The reply's content and, when the request offered tools, its tool calls, read with the
        checkpoint's response template, as `transformers serve` reads them. A call the template cannot
        read (cut off at max_tokens, not JSON) stays text: the episode takes it as the final answer."""
        if not tools:
            return text, None
        if getattr(self.tokenizer, "response_template", None) is None:
            raise vf.ModelError(
                f"{self.tokenizer.name_or_path} has no response template, so its tool calls cannot be read; "
                "the course's checkpoints get one from course_lib.models (RESPONSE_TEMPLATE)"
            )
        try:
            parsed = self.tokenizer.parse_response(completion_ids, prefix=prompt_ids)
            calls = [
                vf.ToolCall(
                    id=f"call_{uuid.uuid4().hex[:12]}",
                    name=call["function"]["name"],
                    arguments=json.dumps(call["function"]["arguments"]),
                )
                for call in parsed.get("tool_calls") or []
            ]
        except (ValueError, TypeError, KeyError):
            self.unreadable_tool_calls += 1
            return text, None
        return (parsed.get("content") if calls else text), calls or None

    def _render(self, messages, add_generation_prompt: bool, tools=None) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, tools=tools or None, add_generation_prompt=add_generation_prompt
        )

    def _prompt_ids(self, trajectory_id: str, messages: list[dict], tools=None) -> list[int]:
        """Token ids of the prompt: the previous turn's ids plus the new environment reply."""
        encode = lambda text: self.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
        if trajectory_id not in self.conversations:
            return encode(self._render(messages, add_generation_prompt=True, tools=tools))
        previous_messages, previous_ids = self.conversations[trajectory_id]
        if messages[: len(previous_messages)] != previous_messages:
            raise vf.ModelError("the conversation was rewritten between turns; cannot extend its tokens")
        before = self._render(previous_messages, add_generation_prompt=False, tools=tools)
        after = self._render(messages, add_generation_prompt=True, tools=tools)
        # The model's ids end with its EOS; the env reply is everything the template adds after it.
        cut = before.rfind(self.tokenizer.eos_token) + len(self.tokenizer.eos_token)
        if not after.startswith(before[:cut]):
            raise vf.ModelError("the chat template renders earlier turns differently; cannot extend tokens")
        return previous_ids + encode(after[cut:])

    async def _generate(self, prompt_ids: list[int], sampling: dict) -> tuple[list[int], list[float]]:
        """Queue one request; a single worker task answers the queue batch by batch."""
        future = asyncio.get_running_loop().create_future()
        self._pending.append((prompt_ids, sampling, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._answer_pending())
        return await future

    async def _answer_pending(self) -> None:
        while self._pending:
            # Let every episode that is about to ask (its answer just came back) join this batch:
            # wait until the queue stops growing.
            size = -1
            while size != len(self._pending):
                size = len(self._pending)
                await asyncio.sleep(0.005)
            first_sampling = self._pending[0][1]
            batch = [item for item in self._pending if item[1] == first_sampling][: self.max_batch_size]
            taken = {id(item) for item in batch}
            self._pending = [item for item in self._pending if id(item) not in taken]
            self.batch_sizes.append(len(batch))
            try:  # on the thread that trains; one thread also keeps one malloc arena (a pool of threads
                # had left freed buffers over several: an evaluation peaked at 13-16 GB instead of a few)
                results = await on_main_thread(self.generate_batch, [ids for ids, _, _ in batch], first_sampling)
            except Exception as error:  # e.g. out of memory: fail these requests, not the event loop
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, _, future), result in zip(batch, results):
                if not future.done():  # its episode may have been cancelled meanwhile
                    future.set_result(result)

    async def to_native_tool(self, tool):
        """Tools go to the chat template as the OpenAI `tools` entries a server receives (`strict` included),
        the text tool SFT trains on."""
        return openai_tool(tool)

    async def close(self):
        self.conversations.clear()


def sample_batch(
    model,
    tokenizer,
    prompts: list[list[int]],
    sampling: dict,
    with_logprobs: bool = False,
    cached=None,
    return_cache: bool = False,
    make_cache: MakeCache | None = None,
    make_sampler: MakeSampler | None = None,
):
    """Sample one completion per prompt with transformers `generate` on a left-padded batch.

    Returns (completion ids ending at the first EOS, per-token logprobs or [] without with_logprobs).
    Logprobs cost memory (one vocabulary-sized row per token and sequence), so evaluations skip them.
    `cached`: for each prompt, None or the KV cache of its first tokens (one (keys, values) pair
    per layer, each [kv heads, tokens, head dim]); the model then runs only the rest of each prompt,
    laid out as [pad, cached tokens, pad, rest] so every sequence ends where generation starts.
    With `return_cache`, also returns each sequence's own cache in that form, and the ids it covers.
    `make_cache`: builds the batch's cache (`course_lib.fast_generation.preallocated_cache`); by
    default transformers' DynamicCache. `make_sampler`: draws each token (`fast_generation.TopKSampler`);
    by default transformers' own sampling.
    """
    cached = cached or [None] * len(prompts)
    done = [0 if kv is None else kv[0][0].shape[1] for kv in cached]
    width_done = max(done)
    rests = [len(ids) - length for ids, length in zip(prompts, done)]
    width_rest = max(rests)
    pad = tokenizer.pad_token_id
    input_ids, attention_mask = [], []
    for ids, length, rest in zip(prompts, done, rests):
        input_ids.append([pad] * (width_done - length) + ids[:length] + [pad] * (width_rest - rest) + ids[length:])
        attention_mask.append([0] * (width_done - length) + [1] * length + [0] * (width_rest - rest) + [1] * rest)
    capacity = width_done + width_rest + sampling["max_tokens"]
    past = (make_cache or dynamic_cache)(model, capacity, cached, width_done)
    del cached  # the batch's buffers hold a copy now: free the caches before generating
    if make_sampler is None:  # transformers' own sampling
        drawing = {"do_sample": True, "temperature": sampling["temperature"], "top_p": sampling["top_p"]}
    else:  # a sampler that draws each token itself: greedy decoding takes it
        sampler = LogitsProcessorList([make_sampler(sampling["temperature"], sampling["top_p"])])
        drawing = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None, "logits_processor": sampler}
    with torch.inference_mode():
        out = model.generate(
            input_ids=torch.tensor(input_ids, device=model.device),
            attention_mask=torch.tensor(attention_mask, device=model.device),
            past_key_values=past,
            **drawing,
            max_new_tokens=sampling["max_tokens"],
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=pad,
            output_scores=with_logprobs,
            return_dict_in_generate=True,
        )
        scores = (
            # our sampler's scores are already the drawn tokens' log-probabilities
            model.compute_transition_scores(out.sequences, out.scores, normalize_logits=make_sampler is None).tolist()
            if with_logprobs
            else None
        )
    results, eos, start = [], tokenizer.eos_token_id, width_done + width_rest
    for i, sequence in enumerate(out.sequences[:, start:].tolist()):
        length = sequence.index(eos) + 1 if eos in sequence else len(sequence)
        results.append((sequence[:length], scores[i][:length] if with_logprobs else []))
    if not return_cache:
        return results
    # The last sampled token was never fed to the model: the cache ends one token before it.
    generated = out.past_key_values.get_seq_length() - start
    caches = []
    for i, (completion, _) in enumerate(results):
        kept = min(len(completion), generated)
        positions = torch.tensor(
            [*range(width_done - done[i], width_done), *range(start - rests[i], start + kept)], device=model.device
        )
        caches.append(
            (
                prompts[i] + completion[:kept],
                [(layer.keys[i][:, positions], layer.values[i][:, positions]) for layer in out.past_key_values.layers],
            )
        )
    return results, caches


def dynamic_cache(model, capacity: int, cached: list, width: int) -> DynamicCache:
    """transformers' DynamicCache holding `cached` (per prompt, None or one (keys, values) pair per
    layer, [kv heads, tokens, head dim]) left-padded with zeros to `width`; `capacity` is unused."""
    past = DynamicCache(config=model.config)
    if width:
        example = next(kv for kv in cached if kv is not None)
        heads, _, head_dim = example[0][0].shape
        for index in range(len(example)):
            keys = example[index][0].new_zeros(len(cached), heads, width, head_dim)
            values = torch.zeros_like(keys)
            for row, kv in enumerate(cached):
                if kv is not None:
                    length = kv[index][0].shape[1]
                    keys[row, :, width - length :] = kv[index][0]
                    values[row, :, width - length :] = kv[index][1]
            past.update(keys, values, index)
    return past


class PrefixCache:
    """The KV caches of the latest sequences (prompt + answer), so that a new prompt which starts
    like one of them (the next turn of the same game, or any game's system prompt) feeds the model
    only its new tokens: a game's turn costs its new tokens, not the whole conversation again."""

    def __init__(self, max_entries: int, make_cache: MakeCache | None = None, make_sampler: MakeSampler | None = None):
        self.max_entries = max_entries  # each entry holds its tokens' KV: ~46 kB a token for the 135M model
        self.make_cache = make_cache  # how sample_batch builds a batch's cache (default: DynamicCache)
        self.make_sampler = make_sampler  # how sample_batch draws tokens (default: transformers' sampling)
        self.entries: list[tuple[list[int], list]] = []  # (ids, per-layer (keys, values)), oldest first

    def lookup(self, ids: list[int]):
        """The cache of the longest start `ids` shares with an entry (at least MIN_SHARED_PREFIX
        tokens, and at least one token left to feed), or None."""
        best, best_length = None, MIN_SHARED_PREFIX - 1
        for index, (entry_ids, _) in enumerate(self.entries):
            common = min(len(entry_ids), len(ids) - 1)
            differ = np.flatnonzero(np.asarray(entry_ids[:common]) != np.asarray(ids[:common]))
            length = int(differ[0]) if differ.size else common
            if length > best_length:
                best, best_length = index, length
        if best is None:
            return None
        entry_ids, kv = self.entries[best]
        if best_length == len(entry_ids):  # this conversation goes on: its next turn will replace it
            del self.entries[best]
        return [(keys[:, :best_length], values[:, :best_length]) for keys, values in kv]

    def sample(self, model, tokenizer, prompts: list[list[int]], sampling: dict, with_logprobs: bool = False):
        """`sample_batch`, reusing what this cache holds and keeping the new sequences' caches.
        Only while the weights stay the same: a training step makes every entry stale."""
        reuse = model.config.model_type in PREFIX_CACHE_MODEL_TYPES
        if reuse:
            self.share_repeated_prompts(model, tokenizer, prompts, sampling)
        returned = sample_batch(  # no reference to the looked-up caches here: the batch frees them
            model,
            tokenizer,
            prompts,
            sampling,
            with_logprobs,
            [self.lookup(ids) for ids in prompts] if reuse else None,
            return_cache=reuse,
            make_cache=self.make_cache,
            make_sampler=self.make_sampler,
        )
        if not reuse:
            return returned
        results, caches = returned
        self.entries += caches  # (ids, kv) per sequence
        del self.entries[: -self.max_entries]
        return results

    def share_repeated_prompts(self, model, tokenizer, prompts: list[list[int]], sampling: dict) -> None:
        """A prompt that comes several times in one batch (a GRPO group: one position, eight answers)
        and that no entry starts: run it once first (one token, thrown away), so that every copy
        finds its cache and feeds the model one token instead of the whole prompt."""
        counts = Counter(map(tuple, prompts))
        repeated = [list(ids) for ids, count in counts.items() if count > 1 and not self.covers(list(ids))]
        if repeated:
            _, caches = sample_batch(
                model, tokenizer, repeated, {**sampling, "max_tokens": 1}, return_cache=True, make_cache=self.make_cache
            )
            self.entries += caches

    def covers(self, ids: list[int]) -> bool:
        """Whether an entry holds all of `ids` but its last token (what a prompt's lookup can reuse)."""
        return any(len(entry) >= len(ids) - 1 and entry[: len(ids) - 1] == ids[:-1] for entry, _ in self.entries)


class LocalModel:
    """A checkpoint loaded in this process, with a batching verifiers client.

    Same interface as `course_lib.serving.Server`: `.client` (for `env.evaluate`), `.model` (the
    name to put in requests), `.chat(...)`, `.stop()`, and `with LocalModel(path) as model:`.
    Generates with `course_lib.fast_generation` when it is on (`.fast` says which), stock `generate` otherwise.
    """

    def __init__(self, model_path: str, max_batch_size: int = 64, dtype: str | None = None, device: str = "cpu"):
        self.model = str(model_path)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        fast = fast_path()
        self.fast = fast is not None
        self.dtype = dtype or generation_dtype()
        self.network = AutoModelForCausalLM.from_pretrained(
            model_path, dtype=getattr(torch, self.dtype), attn_implementation=generation_attention()
        )
        self.network.to(device).eval()  # both in place
        defaults = self.network.generation_config
        self.sampling = {"max_tokens": 256, "temperature": defaults.temperature or 1.0, "top_p": defaults.top_p or 1.0}
        self.max_batch_size = max_batch_size
        self._client: LocalModelClient | None = None
        self.prefix_cache = PrefixCache(
            max_batch_size, fast.preallocated_cache if self.fast else None, fast.TopKSampler if self.fast else None
        )

    def generate_batch(self, prompts: list[list[int]], sampling: dict, with_logprobs: bool = False):
        """One batch, reusing the KV cache of what each prompt shares with earlier sequences: a
        cache computed once stays right until `load_weights`."""
        return self.prefix_cache.sample(self.network, self.tokenizer, prompts, sampling, with_logprobs)

    def load_weights(self, weights: dict) -> None:
        """Copy new weights in (`weights` maps each of the network's parameter names to a tensor of
        its shape, in any dtype) and forget every cached sequence: they were computed with the old ones."""
        with torch.no_grad():
            for name, parameter in self.network.named_parameters():
                if name not in weights:
                    given = ", ".join(list(weights)[:3])
                    raise KeyError(f"load_weights: no weight named {name!r} (given: {given}, ...)")
                parameter.copy_(weights[name])
        self.prefix_cache.entries.clear()

    @property
    def client(self) -> LocalModelClient:
        """One client per model: all requests, from every evaluation, share its batches."""
        if self._client is None:
            self._client = LocalModelClient(self.tokenizer, self.generate_batch, self.sampling, self.max_batch_size)
        return self._client

    def chat(self, message: str | list[dict], **sampling) -> str:
        """One chat completion (e.g. for the play widget); `message` is a user message or a message list."""
        messages = [{"role": "user", "content": message}] if isinstance(message, str) else message
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        options = {**self.sampling, **{k: v for k, v in sampling.items() if k in SAMPLING_KEYS}}
        completion, _ = self.generate_batch([ids], options)[0]
        return self.tokenizer.decode(completion, skip_special_tokens=True)

    def stop(self) -> None:
        """Free the model's memory (the same call that stops a server)."""
        self.network = self._client = None
        self.prefix_cache.entries.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()
