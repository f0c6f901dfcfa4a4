"""Opt-in speed-ups for `LocalModel` on a CPU: the one module of the course that reaches into transformers.

Tested with transformers 5.17.0 (torch 2.13.0, CPU). Two changes to how transformers generates a
padded batch, both producing the same tokens as stock `generate` (tests/test_fast_generation.py):

- attention that reads the grouped key/value heads in place. SmolLM2 has 9 query heads sharing
  3 key/value heads; with a padding mask (every batch of games has one) transformers' "sdpa"
  repeats the cached keys and values 3 times at every layer and token, where torch's own
  `enable_gqa` reads them as they are. On two cores that copy made a decoding step 3.6x slower at
  32 games with 600 cached tokens each;
- a cache allocated once per batch (longest prompt + max_tokens), where transformers'
  DynamicLayer copies its whole cache to append each token (torch.cat).

Both use transformers internals (`AttentionInterface`, `masking_utils.sdpa_mask`, `cache_utils.DynamicLayer`,
a cache's `layers` list), which change between releases. So the fast path runs only on a tested
version, and `COURSE_FAST_GENERATION=0` switches it off; otherwise `LocalModel` generates with stock
`generate` ("sdpa", DynamicCache), correct and slower, and says so in one printed sentence.
Training code never imports this module: GRPO's policy, which generates while it trains, asks
`local_model.generation_attention()` for the attention to load with; SFT uses stock "sdpa".
"""

import os

import transformers

TESTED_TRANSFORMERS = ("5.17",)  # major.minor versions the fast path was checked against
OFF_SWITCH = "COURSE_FAST_GENERATION"  # set to 0 (or false / off / no) for stock generate
GROUPED_QUERY_SDPA = "sdpa_grouped_query"  # the attention implementation this module registers

try:  # internals: an untested transformers may have moved them (then stock generate, see `enabled`)
    import torch
    from transformers import AttentionInterface, AttentionMaskInterface, DynamicCache
    from transformers.cache_utils import DynamicLayer
    from transformers.masking_utils import sdpa_mask

    IMPORT_ERROR = None
except ImportError as error:
    DynamicLayer, IMPORT_ERROR = object, error

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
    """transformers' "sdpa" attention without its copy of the keys and values once per query head."""
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
