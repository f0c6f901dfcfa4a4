"""Notebook 09's GRPO steps, timed part by part: run it from two checkouts to compare how the policy generates.

    python dev/measure_grpo_generation.py --model outputs/cpu/sft/final --steps 1   # ~8 min a step on 2 cores

Notebook 09's cpu recipe (5 steps of 8 prompts x 8 games, LoRA) from the given model, `--steps` steps with the
trainer's seed 0, nothing saved. Prints one JSON line: the step split (`grpo.step_split`), TRL's logged reward and
mean completion length per step, and the host's float32 matmul speed. The course code is the checkout the
script sits in.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from course_lib import grpo  # noqa: E402
from course_lib.hardware import matmul_gflops  # noqa: E402
from course_lib.profiles import PROFILES  # noqa: E402

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="the checkpoint GRPO starts from (notebook 08's SFT model)")
    parser.add_argument("--steps", type=int, default=1)
    args = parser.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    gflops = round(matmul_gflops())
    profile = PROFILES["cpu"]
    stats = {}
    with tempfile.TemporaryDirectory() as out:
        trainer = grpo.build_grpo_trainer(
            profile,
            grpo.full_game_environment(profile),
            args.model,
            Path(out),
            stats,
            max_steps=args.steps,
            save_strategy="no",
            report_to="none",
        )
        trainer.train()
    logged = [row for row in trainer.state.log_history if "reward" in row]
    print(
        json.dumps(
            {
                "checkout": str(ROOT),
                "commit": commit.stdout.strip(),
                "matmul_gflops_fp32_before": gflops,
                "matmul_gflops_fp32_after": round(matmul_gflops()),
                "split_seconds": grpo.step_split(stats).round(1).to_dict("records"),
                "reward": [round(row["reward"], 4) for row in logged],
                "mean_completion_length": [round(row["completions/mean_length"], 1) for row in logged],
            }
        ),
        flush=True,
    )
