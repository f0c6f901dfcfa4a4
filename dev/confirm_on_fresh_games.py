"""A sweep's best run, tested again on games it was not chosen on.

Picking the best of several runs on the same evaluation games favours a run that was lucky on
those games. This script plays the start model and one trained model on *other* games (another
evaluation seed) and prints the paired test per opponent and outcome, with one decided beforehand:

    python dev/confirm_on_fresh_games.py --start outputs/cpu/sft/final \
        --trained outputs/cpu/grpo_sweep/RUN/final --seed 1 --games 100 --out outputs/cpu/grpo_sweep/confirm

The decided test (RESULTS.md, written before the run): the play measures, non-losses against the
optimal opponent and wins against the random one, exact McNemar on the paired games; the trained
model plays better if one rises by 8 points or more with p < 0.01 and neither falls with p < 0.05
(`evaluation.plays_better`). Earlier confirmations decided on games with an invalid answer (both
opponents pooled, fewer and p < 0.01): the table prints that row too.
"""

import argparse
import asyncio
from pathlib import Path

import pandas as pd

from course_lib.evaluation import EvalResult, evaluate_model, paired_comparison, plays_better
from course_lib.profiles import get_profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", required=True, help="the start model's checkpoint")
    parser.add_argument("--trained", required=True, help="the trained model's checkpoint")
    parser.add_argument("--seed", type=int, required=True, help="an evaluation seed the sweep did not use (it used 0)")
    parser.add_argument("--games", type=int, default=100, help="games per opponent")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args()

    profile = get_profile(args.profile)
    args.out.mkdir(parents=True, exist_ok=True)
    played = EvalResult.concat(
        [
            asyncio.run(evaluate_model(profile, args.start, "start", args.games, seed=args.seed)),
            asyncio.run(evaluate_model(profile, args.trained, "after GRPO", args.games, seed=args.seed)),
        ]
    )
    played.games.to_csv(args.out / "games.csv", index=False)
    played.summary.to_csv(args.out / "summary.csv", index=False)
    outcomes = ("win", "loss", "non-loss", "invalid answer")
    table = paired_comparison(played.games, "start", "after GRPO", outcomes)
    table.to_csv(args.out / "paired.csv", index=False)
    with pd.option_context("display.width", 200):
        print(table.round(4).to_string(index=False))
    print(f"\nDecided test: {plays_better(table, 'start', 'after GRPO')}")


if __name__ == "__main__":
    main()
