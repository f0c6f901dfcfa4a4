"""The same games generated in float32 and in bfloat16, paired (RESULTS.md, "bf16 weights for generation, second try").

Usage: python dev/pair_bf16_games.py   (reads data/bf16_generation/)

Both evaluations played notebook 08's SFT model in the same 100 games per opponent (seed 0): each game
seed is one pair. Exact McNemar test per outcome: the games only one of the two precisions won.
"""

import json
from pathlib import Path

import pandas as pd
from scipy.stats import binomtest

DATA = Path(__file__).resolve().parent.parent / "data" / "bf16_generation"


def bfloat16_games(opponent: str) -> pd.DataFrame:
    rows = []
    for line in (DATA / f"sft_bfloat16_{opponent}.jsonl").read_text().splitlines():
        game = json.loads(line)
        rows.append(
            {
                "game_seed": game["info"]["seed"],
                "result": game["result"],
                "invalid_moves": game["metrics"]["invalid_moves"],
                "model_turns": game["metrics"]["model_turns"],
            }
        )
    return pd.DataFrame(rows).set_index("game_seed")


def main() -> None:
    for opponent in ("random", "optimal"):
        float32 = pd.read_csv(DATA / f"sft_float32_{opponent}_games.csv").set_index("game_seed")
        bfloat16 = bfloat16_games(opponent).loc[float32.index]  # the same games, in the same order
        outcomes = {
            "non-loss": lambda games: games.result != "loss",
            "win": lambda games: games.result == "win",
            "game with invalid answer": lambda games: games.invalid_moves > 0,
        }
        for name, outcome in outcomes.items():
            a, b = outcome(float32).values, outcome(bfloat16).values
            only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
            p = binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
            print(
                f"{opponent:8s} {name:25s} float32 {a.mean():.0%} bfloat16 {b.mean():.0%}  "
                f"only float32 {only_a} only bfloat16 {only_b} p {p:.2f}"
            )
        for label, games in (("float32", float32), ("bfloat16", bfloat16)):
            rate = games.invalid_moves.sum() / games.model_turns.sum()
            print(f"{opponent:8s} invalid answers per answer, {label}: {rate:.1%}")


if __name__ == "__main__":
    main()
