"""The same games generated in float32 and in bfloat16, paired (RESULTS.md, "bf16 weights for generation, second try").

Usage: python dev/pair_bf16_games.py   (reads data/bf16_generation/)

Both evaluations played notebook 08's SFT model in the same 100 games per opponent (seed 0), compared
game by game with the course's own paired test (`evaluation.paired_comparison`, exact McNemar).
"""

import json
from pathlib import Path

import pandas as pd

from course_lib.evaluation import paired_comparison

DATA = Path(__file__).resolve().parent.parent / "data" / "bf16_generation"


def games(opponent: str) -> pd.DataFrame:
    """Both precisions' games against one opponent, one row per game and player."""
    float32 = pd.read_csv(DATA / f"sft_float32_{opponent}_games.csv").assign(player="float32")
    transcripts = [json.loads(line) for line in (DATA / f"sft_bfloat16_{opponent}.jsonl").read_text().splitlines()]
    bfloat16 = pd.DataFrame(
        {
            "player": "bfloat16",
            "opponent": opponent,
            "example_id": t["example_id"],
            "game_seed": t["info"]["seed"],
            "result": t["result"],
            "invalid_moves": t["metrics"]["invalid_moves"],
            "model_turns": t["metrics"]["model_turns"],
        }
        for t in transcripts
    )
    both = pd.concat([float32, bfloat16], ignore_index=True)
    seeds = both.groupby("example_id")["game_seed"].nunique()
    assert (seeds == 1).all(), "the two evaluations did not play the same games"
    return both


def main() -> None:
    played = pd.concat([games(opponent) for opponent in ("random", "optimal")], ignore_index=True)
    table = paired_comparison(played, "float32", "bfloat16", outcomes=("non-loss", "win", "invalid answer"))
    print(table.to_string(index=False))
    per_answer = played.groupby(["opponent", "player"]).apply(lambda g: g.invalid_moves.sum() / g.model_turns.sum())
    print("\ninvalid answers per answer:\n" + per_answer.map("{:.1%}".format).to_string())


if __name__ == "__main__":
    main()
