"""Notebook 01's GRPO from scratch over several training seeds: is the recipe robust, or is seed 0 lucky?

Runs the definitions of the notebook's cells tagged "scratch" (as tests/test_grpo_from_scratch.py does),
trains one fresh policy per seed as the notebook's main run does (with its `ENTROPY_BONUS`, where it has one)
with the cpu budget (`PROFILES["cpu"].scratch`: steps, eval games) and prints, per seed: wins against the
random opponent, non-losses against the optimal one (greedy games, as the notebook evaluates; in brackets the
games where the opponent moves first), the share of flat groups in the last 100 steps, and the seconds of
training and evaluation: CPU seconds of this process (one thread) and wall seconds (which also count the time
other programs held the core, or that this process was paused). One process, one thread (the notebook's
setting); run it niced on a shared machine, and read its seconds as upper bounds.

    OMP_NUM_THREADS=1 nice -n 19 python dev/scratch_seeds.py --seeds 0-9
    OMP_NUM_THREADS=1 nice -n 19 python dev/scratch_seeds.py --seeds 1,4 --set learning_rate=1e-3

`--set NAME=VALUE` overrides a keyword of the notebook's `train` (a Python literal: `opponents=(0.0,0.5)`).
"""

import argparse
import ast
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_grpo_from_scratch import NOTEBOOK, _definitions  # noqa: E402

from course_lib.profiles import PROFILES  # noqa: E402


def lesson(notebook=NOTEBOOK):
    """The notebook's own definitions (cells tagged "scratch"), in one namespace."""
    cells = json.loads(notebook.read_text())["cells"]
    namespace = {"np": np, "profile": PROFILES["cpu"]}
    for cell in cells:
        if "scratch" in cell["metadata"].get("tags", []):
            exec(compile(_definitions("".join(cell["source"])), str(notebook), "exec"), namespace)
    return namespace


def seed_list(text):
    seeds = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += range(int(low), int(high or low) + 1)
    return seeds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0-9", help="e.g. 0-9 or 1,4,7")
    parser.add_argument("--steps", type=int, default=PROFILES["cpu"].scratch.steps)
    parser.add_argument("--games", type=int, default=PROFILES["cpu"].scratch.eval_games)
    parser.add_argument("--notebook", type=Path, default=NOTEBOOK, help="another copy of notebook 01 (a candidate)")
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE, a keyword of train()")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ns = lesson(args.notebook)
    settings = {"entropy_bonus": ns["ENTROPY_BONUS"]} if "ENTROPY_BONUS" in ns else {}  # the main run's recipe
    settings.update({name: ast.literal_eval(value) for name, value in (item.split("=", 1) for item in args.set)})
    print(f"{args.notebook.name}: {args.steps} steps, {args.games} eval games, {settings or 'train() defaults'}")
    header = f"{'seed':>4}  {'wins vs random':>14}  {'non-losses vs optimal (opp. first)':>34}  {'flat':>5}"
    print(f"{header}  {'CPU s':>6}  {'wall s':>6}", flush=True)
    rows = []
    for seed in seed_list(args.seeds):
        started, cpu_started = time.monotonic(), time.process_time()
        policy, history = ns["train"](args.steps, seed=seed, **settings)
        optimal = ns["evaluate"](policy, 0.0, args.games)
        wins = ns["evaluate"](policy, 1.0, args.games).loc["all", "win"]
        non_losses = optimal.loc["all", "win"] + optimal.loc["all", "draw"]
        second = optimal.loc["opponent first", "win"] + optimal.loc["opponent first", "draw"]
        seconds, cpu = time.monotonic() - started, time.process_time() - cpu_started
        flat = history["flat groups"].tail(100).mean()
        rows.append((wins, non_losses, cpu, seconds))
        ok = "ok" if wins >= 0.9 and non_losses >= 0.9 else "MISS"
        scores = f"{seed:>4}  {wins:>14.1%}  {non_losses:>25.1%} ({second:>5.1%})  {flat:>5.0%}"
        print(f"{scores}  {cpu:>6.1f}  {seconds:>6.1f}  {ok}", flush=True)
    wins, non_losses, cpu, seconds = map(np.array, zip(*rows))
    met = int(np.sum((wins >= 0.9) & (non_losses >= 0.9)))
    print(
        f"both >= 90%: {met} of {len(rows)} seeds; wins {wins.min():.1%}-{wins.max():.1%}, non-losses "
        f"{non_losses.min():.1%}-{non_losses.max():.1%}; CPU seconds {cpu.min():.0f}-{cpu.max():.0f}, wall "
        f"{seconds.min():.0f}-{seconds.max():.0f}"
    )


if __name__ == "__main__":
    main()
