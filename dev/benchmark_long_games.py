"""Seconds for one batch of long games: the base model (which rarely finishes a game) against one opponent.

    python dev/benchmark_long_games.py              # 64 games against the optimal opponent, ~3 min on 2 cores
    python dev/benchmark_long_games.py --games 100 --concurrency 100   # a wider batch than the profile's

The games of notebook 06's base-model evaluation, where each turn's prompt adds ~100 tokens to a context that grows
to ~900: the work that a short benchmark (`course_lib.benchmark_generation`) barely exercises. Same seed, same
opponents' games; the model samples, so its tokens may differ between two runs. Prints seconds, the model's
completion tokens and tokens per second (RESULTS.md, "bfloat16 attention for a prompt's tokens").

`python -m course_lib.benchmark_generation --max-turns 6` plays similar games; this script differs on purpose: it
goes through `evaluate_player` (the notebooks' path, the profile's sampling settings, an opponent of your choice),
and it runs `matmul_gflops()` first only when asked (`--matmul-first`, every notebook's condition: RESULTS.md, "Why,
and one thread for torch").
"""

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course_lib.evaluation import evaluate_player, turn_sampling_args  # noqa: E402
from course_lib.hardware import matmul_gflops  # noqa: E402
from course_lib.profiles import get_profile  # noqa: E402
from course_lib.serving import start_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--opponent", default="optimal")
    parser.add_argument("--concurrency", type=int, help="games in flight and batch size (default: the profile's)")
    parser.add_argument(
        "--matmul-first", action="store_true", help="a product on the main thread first, as every notebook's setup()"
    )
    args = parser.parse_args()
    if args.matmul_first:
        print(f"fp32 matmul {matmul_gflops():.0f} GFLOP/s on the main thread first")
    profile = get_profile()
    if args.concurrency:
        profile = profile.with_settings(max_concurrent=args.concurrency)
    with start_model(profile) as llm, tempfile.TemporaryDirectory() as out_dir:
        start = time.monotonic()
        result = asyncio.run(
            evaluate_player(
                llm.client,
                llm.model,
                "base model",
                args.games,
                sampling_args=turn_sampling_args(profile),
                max_concurrent=profile.max_concurrent,
                opponents=(args.opponent,),
                out_dir=Path(out_dir),
            )
        )
        seconds = time.monotonic() - start
    tokens = int(result.games["completion_tokens"].sum())
    turns = int(result.games["model_turns"].sum())
    print(f"{args.games} games, {turns} model turns, {tokens} completion tokens in {seconds:.1f} s:", end=" ")
    print(f"{tokens / seconds:.1f} tokens/s")


if __name__ == "__main__":
    main()
