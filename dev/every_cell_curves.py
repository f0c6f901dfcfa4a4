"""The every-cell runs' learning curves side by side (`every_cell.plot_learning`): no model runs; it reads each
run's steps.csv and held_out.csv (`python -m course_lib.every_cell` and notebook 09 write them):

    python dev/every_cell_curves.py data/every_cell_cpu/move data/every_cell_cpu/think --out assets/every_cell_cpu.png
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from course_lib.every_cell import plot_learning  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    fig, axes = plt.subplots(1, len(args.runs), figsize=(5.2 * len(args.runs), 3.4), squeeze=False)
    for ax, run in zip(axes[0], args.runs):
        steps = pd.read_csv(run / "steps.csv")
        held = run / "held_out.csv"
        scores = pd.read_csv(held) if held.is_file() and held.read_text().strip() else None
        plot_learning(ax, steps, scores)
        ax.set_title(f"{run.name}: {ax.get_title()}", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120, bbox_inches="tight")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
