"""Opt-in speed-ups for `LocalModel` on a CPU: the one module of the course that reaches into transformers.

Tested with transformers 5.17.0 (torch 2.13.0, CPU). Three changes to how transformers generates a
padded batch, each producing the same tokens, or drawing from the same distribution, as stock
`generate` (tests/test_fast_generation.py):

- attention that reads the grouped key/value heads in place. SmolLM2 has 9 query heads sharing
  3 key/value heads; with a padding mask (every batch of games has one) transformers' "sdpa"
  repeats the cached keys and values 3 times at every layer and token. On two cores that copy made
  a decoding step 3.6x slower at 32 games with 600 cached tokens each. In bfloat16, where torch's
  kernel is slow on a CPU, the attention is two grouped matrix products;
- a cache allocated once per batch (longest prompt + max_tokens), where transformers'
  DynamicLayer copies its whole cache to append each token (torch.cat);
- sampling on each row's 50 most likely tokens (`TopKSampler`), where transformers sorts and draws
  among all 49,152 at every token.

With these, bfloat16 weights generate 1.5x faster than float32 on the course's AMD host (RESULTS.md,
"bf16 weights for generation, second try"), so `LocalModel` uses them where the CPU has native bf16.
The first two use transformers internals (`AttentionInterface`, `masking_utils.sdpa_mask`, `cache_utils.DynamicLayer`,
a cache's `layers` list), which change between releases. So the fast path runs only on a tested
version, and `COURSE_FAST_GENERATION=0` switches it off; otherwise `LocalModel` generates with stock
`generate` ("sdpa", DynamicCache), correct and slower, and says so in one printed sentence.
Training code never imports this module: GRPO generates from a copy of its policy, a `LocalModel`
(`rollout_bridge.PolicyCopy`); a policy that generates itself (notebook 11's TRL `environment_factory`)
asks `local_model.generation_attention()` for the attention to load with; SFT uses stock "sdpa".
"""

import os

import transformers

TESTED_TRANSFORMERS = ("5.17",)  # major.minor versions the fast path was checked against
TOP_K = 50  # transformers' default top-k, which `generate` applies when sampling unless told otherwise
OFF_SWITCH = "COURSE_FAST_GENERATION"  # set to 0 (or false / off / no) for stock generate
GROUPED_QUERY_SDPA = "sdpa_grouped_query"  # the attention implementation this module registers

try:  # internals: an untested transformers may have moved them (then stock generate, see `enabled`)
    import torch
    from transformers import AttentionInterface, AttentionMaskInterface, DynamicCache, LogitsProcessor
    from transformers.cache_utils import DynamicLayer
    from transformers.masking_utils import sdpa_mask

    IMPORT_ERROR = None
except ImportError as error:
    DynamicLayer, LogitsProcessor, IMPORT_ERROR = object, object, error

_said: set[str] = set()  # fallback sentences already printed in this process


def why_not() -> str | None:
    """Why the fast path is off here (a sentence), or None when it is on."""
    if os.environ.get(OFF_SWITCH, "1").strip().lower() in ("0", "false", "off", "no"):
        return f"{OFF_SWITCH}={os.environ[OFF_SWITCH]}: generating with stock transformers `generate`."
    version = transformers.__version__
    if ".".join(version.split(".")[:2]) not in TESTED_TRANSFORMERS:
        return (
            f"course_lib.fast_generation was tested with transformers {', '.join(TESTED_TRANSFORMERS)}, "
            f"not {version}: generating with stock `generate` (same tokens, slower)."
        )
    if IMPORT_ERROR is not None:
        return (
            f"transformers {version} lacks what the fast path uses ({IMPORT_ERROR}): generating with stock `generate`."
        )
    return None


def enabled() -> bool:
    """Whether to use the fast path; when not, print why (once per reason and process)."""
    reason = why_not()
    if reason is not None and reason not in _said:
        _said.add(reason)
        print(reason)
    return reason is None


def _sdpa_grouped_query(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' "sdpa" attention without its copy of the keys and values once per query head.

    In bfloat16 a decoding step of a padded batch (one query per sequence, a mask) is two matrix products,
    each group of query heads against its key/value head, softmax in float32: on two cores torch's own
    kernel took 17 ms per layer at 64 games with 480 cached tokens in bfloat16 (4-5 ms in float32), these
    products about 4 ms. Several queries (a prompt's new tokens) keep torch's kernel: from two queries on
    it is the faster, 3-4x at 64 or 300 (the products materialise every score in float32).
    float32 keeps torch's kernel: no faster there."""
    if attention_mask is None or module.training or query.dtype != torch.bfloat16 or query.shape[2] > 1:
        out = torch.nn.functional.scaled_dot_product_attention(
            query,
            key,
            value,
            attn_mask=attention_mask,
            dropout_p=dropout if module.training else 0.0,
            scale=scaling,
            enable_gqa=True,
            is_causal=query.shape[2] > 1 and attention_mask is None,
        )
        return out.transpose(1, 2).contiguous(), None
    batch, heads, length, dim = query.shape
    kv_heads = key.shape[1]
    grouped = query.reshape(batch, kv_heads, heads // kv_heads * length, dim)  # head h reads kv head h // groups
    # keys @ queries (not queries @ keys transposed): the cache's keys are a slice of a larger buffer,
    # which bfloat16 products read 2-3x slower when transposed
    scores = torch.matmul(key, grouped.transpose(-1, -2)).float() * (dim**-0.5 if scaling is None else scaling)
    scores = scores.view(batch, kv_heads, -1, heads // kv_heads, length)  # [batch, kv heads, keys, group, queries]
    mask = attention_mask.transpose(-1, -2)[:, :, :, None]  # [batch, 1, keys, 1, queries], True where it may look
    # A padding query may see nothing: the lowest float there, not -inf, keeps its (unused) row finite.
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min) if mask.dtype == torch.bool else scores + mask
    probs = scores.softmax(2).to(value.dtype).view(batch, kv_heads, -1, heads // kv_heads * length)
    out = torch.matmul(probs.transpose(-1, -2), value).view(batch, heads, length, dim)
    return out.transpose(1, 2).contiguous(), None


def register_grouped_query_sdpa() -> str:
    """Make `attn_implementation=GROUPED_QUERY_SDPA` loadable (masks as for "sdpa"); returns the name."""
    AttentionInterface.register(GROUPED_QUERY_SDPA, _sdpa_grouped_query)
    AttentionMaskInterface.register(GROUPED_QUERY_SDPA, sdpa_mask)
    return GROUPED_QUERY_SDPA


class PreallocatedLayer(DynamicLayer):
    """A DynamicLayer that writes each new token into buffers sized once for the whole generation,
    where DynamicLayer copies its whole cache to append one token (torch.cat)."""

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity = capacity

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            batch, heads, _, head_dim = key_states.shape
            self.key_buffer = key_states.new_empty(batch, heads, self.capacity, head_dim)
            self.value_buffer = value_states.new_empty(batch, heads, self.capacity, head_dim)
            self.length = 0
        start, self.length = self.length, self.length + key_states.shape[-2]
        self.key_buffer[:, :, start : self.length] = key_states
        self.value_buffer[:, :, start : self.length] = value_states
        self.keys, self.values = self.key_buffer[:, :, : self.length], self.value_buffer[:, :, : self.length]
        return self.keys, self.values


def preallocated_cache(model, capacity: int, cached: list, width: int):
    """A batch's cache with its attention layers allocated once for `capacity` tokens (other layers,
    e.g. LFM2's convolution states, stay as the model needs them), holding `cached` (per prompt, None
    or one (keys, values) pair per layer, [kv heads, tokens, head dim]) left-padded with zeros to
    `width`, written straight into the buffers (no batch-sized copy in between)."""
    past = DynamicCache(config=model.config)
    past.layers = [PreallocatedLayer(capacity) if type(layer) is DynamicLayer else layer for layer in past.layers]
    if not width:
        return past
    example = next(kv for kv in cached if kv is not None)
    heads, _, head_dim = example[0][0].shape
    for index, layer in enumerate(past.layers):
        zeros = example[index][0].new_zeros(len(cached), heads, width, head_dim)
        layer.update(zeros, zeros)  # allocates the layer's buffers
        for row, kv in enumerate(cached):
            if kv is not None:
                length = kv[index][0].shape[1]
                layer.key_buffer[row, :, width - length : width] = kv[index][0]
                layer.value_buffer[row, :, width - length : width] = kv[index][1]
    return past


class TopKSampler(LogitsProcessor):
    """transformers' sampling (temperature, then top-k, then top-p, then a draw), done on each row's
    top-k tokens instead of the whole vocabulary: the same distribution, much less work. Stock
    sampling sorts all 49,152 logits for top-p and draws among them at every token: on two cores
    about 80 ms of each 64-game decoding step, 16% of a turn (RESULTS.md).

    Used with greedy decoding: each row comes back -inf except at the sampled token, which holds
    its log-probability under the filtered distribution (what `output_scores` then records). One
    difference: where several tokens tie for the k-th highest logit, transformers keeps them all."""

    def __init__(self, temperature: float, top_p: float, top_k: int = TOP_K):
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k

    def candidates(self, scores):
        """Each row's top-k tokens (most likely first) and their log-probabilities after temperature,
        top-k and top-p; -inf for the tokens top-p drops."""
        values, tokens = torch.topk(scores / self.temperature, min(self.top_k, scores.shape[-1]))
        # top-p as transformers does it: drop the least likely tokens while their total stays within
        # 1 - top_p (the most likely token's tail is everything, so it always stays)
        tail_mass = values.softmax(-1).flip(-1).cumsum(-1).flip(-1)  # each token's and all less likely ones'
        drop = tail_mass <= 1 - self.top_p
        return values.masked_fill(drop, -float("inf")).log_softmax(-1), tokens

    def __call__(self, input_ids, scores):
        log_probs, tokens = self.candidates(scores)
        choice = torch.multinomial(log_probs.exp(), num_samples=1)
        sampled = torch.full_like(scores, -float("inf"))
        return sampled.scatter_(1, tokens.gather(1, choice), log_probs.gather(1, choice))
