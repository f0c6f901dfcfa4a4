"""One attention layer of a 64-game batch in bfloat16: the fast path's grouped products against torch's kernel.

    python dev/benchmark_prompt_attention.py    # a minute on 2 cores

SmolLM2-135M's shapes (9 query heads on 3 key/value heads of 64), 64 games with 900 cached tokens (the first 100
padding), 1 to 300 new tokens per game: a decoding step (1) and a prompt's new tokens (more). Milliseconds per call,
the mean of 3 after one warm-up: the fast path's `_sdpa_grouped_query`, torch's kernel on float32 copies, and
torch's kernel in bfloat16 (RESULTS.md, "bfloat16 attention for a prompt's tokens").
"""

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course_lib import fast_generation  # noqa: E402

BATCH, HEADS, KV_HEADS, DIM, CACHED, PADDING = 64, 9, 3, 64, 900, 100


def milliseconds(function, *args, repeats: int = 3) -> float:
    function(*args)
    start = time.perf_counter()
    for _ in range(repeats):
        function(*args)
    return (time.perf_counter() - start) / repeats * 1000


if __name__ == "__main__":
    torch.manual_seed(0)
    module = type("Module", (), {"training": False})()
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for queries in (1, 2, 4, 8, 16, 64, 300):
        query = torch.randn(BATCH, HEADS, queries, DIM, dtype=torch.bfloat16)
        # the cache's keys and values are slices of larger buffers, as in generation
        key = torch.randn(BATCH, KV_HEADS, CACHED + 100, DIM, dtype=torch.bfloat16)[:, :, :CACHED]
        value = torch.randn(BATCH, KV_HEADS, CACHED + 100, DIM, dtype=torch.bfloat16)[:, :, :CACHED]
        mask = torch.ones(BATCH, 1, queries, CACHED, dtype=torch.bool).tril(CACHED - queries)
        mask[:, :, :, :PADDING] = False
        ways = {
            "grouped products": lambda q, k, v, m: fast_generation._sdpa_grouped_query(module, q, k, v, m),
            "torch float32": lambda q, k, v, m: sdpa(q.float(), k.float(), v.float(), attn_mask=m, enable_gqa=True),
            "torch bfloat16": lambda q, k, v, m: sdpa(q, k, v, attn_mask=m, enable_gqa=True),
        }
        args = (query, key, value, mask)
        times = ", ".join(f"{name} {milliseconds(way, *args):.1f} ms" for name, way in ways.items())
        print(f"{queries} new tokens per game: {times}", flush=True)
