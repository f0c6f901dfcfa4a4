"""The GRPO sweeps: the course's recorded cpu sweep, and tables and plots of any sweep folder that
`python -m course_lib.train_grpo ... --evaluate N` filled (sweep.csv, one folder per run with its
log_history.json and eval_games.csv). Notebooks 09 and 10 read the recorded one.
"""

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from course_lib.evaluation import summarize, wilson_interval

# The course's own sweep on the cpu profile (2 CPU cores), committed so that notebooks 09 and 10 can
# show it without hours of training: sweep.csv, each run's log_history.json and games (README there).
RECORDED_SWEEP = Path(__file__).resolve().parent.parent / "data" / "grpo_sweep_cpu"
FULL_GAME_RECIPE_RUN = "lora8-lr2e-4-opp0.0-0.5-64games"  # the cpu recipe on whole games, until 2026-11-28
# The per-move environment's runs (python -m course_lib.train_grpo --evaluate 100), the same layout
MOVES_SWEEP = RECORDED_SWEEP.parent / "grpo_moves_cpu"
CPU_RECIPE_RUN = "p1"  # the run whose settings the cpu profile uses (tests check it)
# Every cell scored: the recorded course run's notebook 09, whose settings are the cpu profile's every_cell
EVERY_CELL_RUN = RECORDED_SWEEP.parent / "every_cell_cpu" / "course_run"  # the recorded course run, notebook 09


def sweep_table(path: Path):
    """The rows of a sweep.csv, one line per run: minutes of training, non-losses over both opponents
    (the pre-registered metric) before and after with 95% Wilson intervals, and its McNemar p-value;
    losses against the random opponent, non-losses against the optimal one and invalid answers beside it."""

    def rate(share, games):
        low, high = wilson_interval(round(share * games), games)
        return f"{share:.0%} [{low:.0%}, {high:.0%}]"

    def change(r, key):
        return f"{r[f'{key}: start']:.0%} -> {r[f'{key}: after']:.0%} (p {r[f'{key}: p']:.2f})"

    rows = []
    for _, r in pd.read_csv(path).iterrows():
        games = int(r["games per opponent"])
        rows.append(
            {
                "run": r["run"],
                "settings": r["settings"].replace("grpo.", ""),
                "training minutes": r["training minutes"],
                "non-losses, start": rate(r["non-loss vs both: start"], 2 * games),
                "non-losses, after": rate(r["non-loss vs both: after"], 2 * games),
                "p": round(r["non-loss vs both: p"], 3),
                "losses vs random": change(r, "loss vs random"),
                "non-losses vs optimal": change(r, "non-loss vs optimal"),
                "invalid answers vs random / optimal": " -> ".join(
                    f"{r[f'invalid per answer vs random: {player}']:.1%} / "
                    f"{r[f'invalid per answer vs optimal: {player}']:.1%}"
                    for player in ("start", "after GRPO")
                ),
            }
        )
    return pd.DataFrame(rows)


def sweep_summary(sweep_dir: Path):
    """Outcome rates per opponent of the start model and of every run's trained model (named after
    its run), all on the same games: the table `evaluation.plot_wdl` draws."""

    games = []
    for run in pd.read_csv(Path(sweep_dir) / "sweep.csv")["run"]:
        played = pd.read_csv(Path(sweep_dir) / run / "eval_games.csv")  # the start model's games, then the run's
        games += [] if games else [played[played["player"] == "start"]]
        games.append(played[played["player"] == "after GRPO"].assign(player=run))
    return summarize(pd.concat(games, ignore_index=True))


def sweep_histories(sweep_dir: Path) -> dict:
    """Run name -> its log_history, for every run of a sweep.csv."""

    runs = pd.read_csv(Path(sweep_dir) / "sweep.csv")["run"]
    return {run: json.loads((Path(sweep_dir) / run / "log_history.json").read_text()) for run in runs}


def sweep_curves(histories: dict):
    """Total reward, games lost and invalid answers per step, one line per run of a sweep
    (run name -> its log_history)."""

    panels = {
        "reward": "total reward",
        "rewards/lost/mean": "games lost",
        "rewards/invalid_moves/mean": "invalid answers per game",
    }
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.2))
    for name, history in histories.items():
        logs = pd.DataFrame([row for row in history if "reward" in row])
        for ax, column in zip(axes, panels):
            ax.plot(logs["step"], logs[column], marker="o", ms=3, label=name)
    for ax, title in zip(axes, panels.values()):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig
