"""The every-cell runs' learning curves: the exact expected cell score of the positions each step trained on (the
policy before the step, a rolling mean over 20 steps) against positions seen, per kind of position, and the held-out
score (the expert's positions) where the run measured it. No model runs; it reads each run's steps.csv and
held_out.csv (`python -m course_lib.every_cell` writes them):

    python dev/every_cell_curves.py data/every_cell_cpu/move data/every_cell_cpu/think --out assets/every_cell_cpu.png
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    fig, axes = plt.subplots(1, len(args.runs), figsize=(5.2 * len(args.runs), 3.4), squeeze=False)
    for ax, run in zip(axes[0], args.runs):
        steps = pd.read_csv(run / "steps.csv")
        seen = steps["positions"].cumsum()
        for column, label in (
            ("score_block", "block positions"),
            ("score_win", "win positions"),
            ("score_other", "other positions"),
            ("score", "all"),
        ):
            ax.plot(
                seen,
                steps[column].rolling(20, min_periods=5).mean(),
                label=f"{label} (trained on)",
                lw=2 if column == "score" else 1,
            )
        held = run / "held_out.csv"
        if held.is_file() and held.read_text().strip():
            scores = pd.read_csv(held)
            ax.plot(scores["positions"], scores["score"], "ko--", ms=4, label="held out (expert's positions)")
        minutes = steps["seconds"].sum() / 60
        ax.set_title(f"{run.name}: {int(seen.iloc[-1])} positions in {minutes:.0f} min", fontsize=9)
        ax.set_xlabel("positions trained on")
        ax.set_ylabel("expected cell score (1 optimal, 0.5 keeps the outcome)")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120, bbox_inches="tight")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
