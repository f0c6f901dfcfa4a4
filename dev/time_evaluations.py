"""Seconds for the course's tic-tac-toe evaluations at a given number of games per opponent.

    COURSE_OUTPUT_DIR=/tmp/evals python dev/time_evaluations.py --games 64   # after notebooks 08 and 09 ran on cpu

The notebooks' calls, each model's games played afresh (a new output folder holds no stored games): the base
model's two evaluations one opponent at a time (notebook 06), the SFT and GRPO models' both opponents together
(08 and 09); `matmul_gflops()` first, as every notebook's `setup()` runs it. Prints one JSON line per evaluation.
"""

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course_lib.evaluation import evaluate_model  # noqa: E402
from course_lib.hardware import matmul_gflops  # noqa: E402
from course_lib.models import resolve_model  # noqa: E402
from course_lib.profiles import PROFILES  # noqa: E402

CHECKPOINTS = Path(__file__).resolve().parent.parent / "outputs" / "cpu"


def timed(model: str, player: str, games: int, **kwargs) -> float:
    start = time.monotonic()
    asyncio.run(evaluate_model(PROFILES["cpu"], model, player, games, **kwargs))
    return round(time.monotonic() - start, 1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, required=True, help="games per opponent")
    games = parser.parse_args().games
    print(json.dumps({"matmul_gflops_fp32": round(matmul_gflops())}), flush=True)
    base = resolve_model(PROFILES["cpu"])
    for opponent in ("random", "optimal"):
        seconds = timed(base, "base model", games, opponents=(opponent,))
        print(json.dumps({"notebook": "06", "opponent": opponent, "games": games, "seconds": seconds}), flush=True)
    for notebook, stage in (("08", "sft"), ("09", "grpo")):
        seconds = timed(str(CHECKPOINTS / stage / "final"), f"after {stage}", games)
        print(json.dumps({"notebook": notebook, "opponents": "both", "games": games, "seconds": seconds}), flush=True)
