"""How fast can this machine play tic-tac-toe with a local model? Tokens/s per way of generating.

    python -m course_lib.benchmark_generation                 # the embedded model, every way, 1/8/32/64
    python -m course_lib.benchmark_generation --ways in-process --concurrency 32 64 --games 64

Each point plays real games through the tic-tac-toe environment (the course's real traffic: a
~240-token prompt that grows every turn, answers of up to `--max-tokens` tokens) with `concurrency`
games in flight, and prints completion tokens per second in all, answers and games per minute.
Ways:
  in-process          course_lib.local_model: the model in this process, one batched generate per wave
  serve               `transformers serve`: one request at a time (what notebook 12 starts)
  serve-continuous    `transformers serve --continuous-batching`
Beside them, the machine's fp32 matrix-multiply speed, and the model's compute limit that follows:
every generated token costs about 2 x parameters FLOPs.
"""

import argparse
import asyncio
import os
import time

from course_lib.hardware import matmul_gflops
from course_lib.profiles import PROFILES

WAYS = ("in-process", "serve", "serve-continuous")


def open_way(way: str, model_path: str, max_batch_size: int, dtype: str = "float32"):
    """A started model (with .client, .model, .stop()) for one way of generating."""
    from course_lib.local_model import LocalModel
    from course_lib.serving import start_server

    if way == "in-process":
        return LocalModel(model_path, max_batch_size=max_batch_size, dtype=dtype)
    extra = ("--continuous-batching",) if way == "serve-continuous" else ()
    return start_server(PROFILES["cpu"], model_path, extra_args=extra)  # the server's own dtype (float32)


async def play(llm, games: int, concurrency: int, max_tokens: int, max_turns: int) -> dict:
    from course_lib.evaluation import eval_environment

    env = eval_environment("random", games, seed=1, max_turns=max_turns)
    start = time.perf_counter()
    results = await env.evaluate(
        llm.client,
        llm.model,
        sampling_args={"max_tokens": max_tokens},
        num_examples=-1,
        rollouts_per_example=1,
        max_concurrent=concurrency,
        state_columns=["model_turns"],
    )
    seconds = time.perf_counter() - start
    outputs = results["outputs"]
    tokens = sum((o.get("token_usage") or {}).get("output_tokens", 0) for o in outputs)
    answers = sum(o["model_turns"] for o in outputs)
    errors = sum(o.get("error") is not None for o in outputs)
    return {
        "games": games,
        "seconds": round(seconds, 1),
        "tokens/s": round(tokens / seconds, 1),
        "answers/min": round(60 * answers / seconds, 1),
        "games/min": round(60 * games / seconds, 2),
        "tokens/answer": round(tokens / max(answers, 1), 1),
        "errors": errors,
    }


def benchmark_from_command_line(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS))
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 8, 32, 64])
    parser.add_argument("--games", type=int, default=0, help="games per point (default: the concurrency, at least 4)")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=PROFILES["cpu"].eval.max_tokens_per_turn,
        help="tokens per answer (default: the cpu profile's eval.max_tokens_per_turn, %(default)s)",
    )
    parser.add_argument("--max-turns", type=int, default=2, help="answers per game (the course caps games at 6)")
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the embedded model)")
    parser.add_argument(
        "--dtype", nargs="+", default=["float32"], choices=["float32", "bfloat16"], help="in-process weights' type"
    )
    args = parser.parse_args(argv)

    import pandas as pd
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from course_lib.models import embedded_checkpoint

    model_path = args.model or str(embedded_checkpoint())
    gflops = matmul_gflops()
    config = AutoConfig.from_pretrained(model_path)
    with torch.device("meta"):
        params = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    print(
        f"{os.cpu_count()} CPU cores, {torch.get_num_threads()} torch threads; fp32 matmul {gflops:.0f} GFLOP/s; "
        f"{params / 1e6:.0f}M parameters -> compute limit ~{gflops * 1e9 / (2 * params):.0f} tokens/s "
        "(decoding only; every prompt token costs as much again)"
    )
    rows = []
    for way, dtype in ((w, d) for w in args.ways for d in (args.dtype if w == "in-process" else ["float32"])):
        llm = open_way(way, model_path, max(args.concurrency), dtype)
        try:
            for concurrency in args.concurrency:
                games = args.games or max(concurrency, 4)
                row = {
                    "way": way,
                    "dtype": dtype,
                    "concurrency": concurrency,
                    **asyncio.run(play(llm, games, concurrency, args.max_tokens, args.max_turns)),
                }
                print(row, flush=True)
                rows.append(row)
        finally:
            llm.stop()
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    benchmark_from_command_line()
