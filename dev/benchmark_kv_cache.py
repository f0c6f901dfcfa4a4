"""One realistic batch of tic-tac-toe turns, stock transformers against course_lib's sample_batch.

    python dev/benchmark_kv_cache.py [games] [cached tokens] [new prompt tokens] [new tokens]
    python dev/benchmark_kv_cache.py 32 450 91 56     # RESULTS.md, "Third try"

Each game has `cached` tokens of conversation in its KV cache (random keys and values: only the
time matters), then reads `new prompt` tokens (the environment's reply) and samples `new` tokens.
Stock: transformers' "sdpa" attention and DynamicCache on a padded batch. course_lib: the
grouped-query attention and preallocated cache of course_lib.local_model. Alternated twice.
"""

import sys
import time

import torch
from transformers import AutoModelForCausalLM, DynamicCache

from course_lib import fast_generation
from course_lib.local_model import LocalModel, sample_batch
from course_lib.models import embedded_checkpoint

games, cached_tokens, prompt_tokens, new_tokens = [int(a) for a in sys.argv[1:5]] or [32, 450, 91, 56]
fast = LocalModel(str(embedded_checkpoint()))
stock = AutoModelForCausalLM.from_pretrained(
    embedded_checkpoint(), dtype=torch.float32, attn_implementation="sdpa"
).eval()
layers, kv_heads, head_dim = stock.config.num_hidden_layers, stock.config.num_key_value_heads, stock.config.head_dim
seeded = torch.Generator().manual_seed(0)
prompts = [
    torch.randint(100, 40_000, (cached_tokens + prompt_tokens,), generator=seeded).tolist() for _ in range(games)
]
cached = [
    [
        (
            torch.randn(kv_heads, cached_tokens, head_dim, generator=seeded),
            torch.randn(kv_heads, cached_tokens, head_dim, generator=seeded),
        )
        for _ in range(layers)
    ]
    for _ in range(games)
]
mask = torch.ones(games, cached_tokens + prompt_tokens, dtype=torch.long)
mask[0, :10] = 0  # real batches are padded: games are at different lengths


def run_stock():
    past = DynamicCache(
        ddp_cache_data=[
            (torch.stack([kv[layer][0] for kv in cached]), torch.stack([kv[layer][1] for kv in cached]))
            for layer in range(layers)
        ],
        config=stock.config,
    )
    with torch.inference_mode():
        stock.generate(
            input_ids=torch.tensor(prompts),
            attention_mask=mask,
            past_key_values=past,
            do_sample=True,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=fast.tokenizer.pad_token_id,
        )


def run_course_lib():
    sample_batch(
        fast.network,
        fast.tokenizer,
        prompts,
        {"max_tokens": new_tokens, "temperature": 1.0, "top_p": 1.0},
        cached=cached,
        make_cache=fast_generation.preallocated_cache,  # the fast path, as LocalModel uses it
    )


for _ in range(2):
    for name, run in (("stock transformers", run_stock), ("course_lib", run_course_lib)):
        start = time.monotonic()
        run()
        print(
            f"{name}: {games} games, {cached_tokens} cached + {prompt_tokens} new prompt tokens, "
            f"{new_tokens} new tokens: {time.monotonic() - start:.1f} s",
            flush=True,
        )
