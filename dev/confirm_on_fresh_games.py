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

`--start-games` pairs with a start model's stored games instead of playing it (the `games.csv` of an earlier
confirmation on the same seed and number of games: its "start" rows), and `--answer-format move` plays the
trained model in the environment that asks for the move alone (the start model keeps its own format):

    python dev/confirm_on_fresh_games.py --start-games data/grpo_moves_cpu/confirm_kl/games.csv \
        --trained outputs/cpu/every_cell/RUN/final --answer-format move --seed 5 --games 300 --out OUT
"""

import argparse
import asyncio
from pathlib import Path

import pandas as pd

from course_lib.evaluation import EvalResult, evaluate_model, paired_comparison, plays_better, summarize
from course_lib.profiles import get_profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    start = parser.add_mutually_exclusive_group(required=True)
    start.add_argument("--start", help="the start model's checkpoint")
    start.add_argument("--start-games", type=Path, help="a games.csv with the start model's games (player 'start')")
    parser.add_argument("--trained", required=True, help="the trained model's checkpoint")
    parser.add_argument("--seed", type=int, required=True, help="an evaluation seed the sweep did not use (it used 0)")
    parser.add_argument("--games", type=int, default=100, help="games per opponent")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--answer-format", default="think", help="what the environment asks the trained model for")
    args = parser.parse_args()

    profile = get_profile(args.profile)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.start_games is not None:
        stored = pd.read_csv(args.start_games)
        stored = stored[stored["player"] == "start"]
        if len(stored) != 2 * args.games:
            raise SystemExit(f"{args.start_games} has {len(stored)} start games, not {args.games} per opponent")
        started = EvalResult(summary=summarize(stored), games=stored, transcripts=[])
    else:
        started = asyncio.run(evaluate_model(profile, args.start, "start", args.games, seed=args.seed))
    answers = {"answer_format": args.answer_format}
    trained = asyncio.run(evaluate_model(profile, args.trained, "after GRPO", args.games, seed=args.seed, **answers))
    played = EvalResult.concat([started, trained])
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
