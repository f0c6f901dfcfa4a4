"""Notebook 09's GRPO step with and without the step's unused padding: where a step's time goes, same games.

    python dev/measure_grpo_padding.py   # after notebook 08 ran on cpu (its SFT model starts GRPO); ~20 min

Notebook 09's cpu recipe from notebook 08's SFT model, one step each way with the same seed, so both play the
same 64 games: as TRL 1.16 trains them (every micro-batch of 2 episodes padded to the step's longest episode)
and as the course trains them (`grpo.LeanGRPOTrainer`, micro-batches of 1 episode, each at its
own length). Rewards must agree; the loss may differ by float rounding only. Prints one JSON line per run.
"""

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course_lib import grpo  # noqa: E402
from course_lib.hardware import matmul_gflops  # noqa: E402
from course_lib.profiles import PROFILES  # noqa: E402
from course_lib.sft import sft_checkpoint  # noqa: E402


def run(trim: bool) -> dict:
    profile = PROFILES["cpu"].with_settings(**{"grpo.micro_batch_size": 1 if trim else 2})
    trimmed = grpo.without_unused_padding
    if not trim:
        grpo.without_unused_padding = lambda inputs: inputs  # TRL's own padding
    stats = {}
    try:
        with tempfile.TemporaryDirectory() as out:
            env = grpo.full_game_environment(profile)
            trainer = grpo.build_grpo_trainer(
                profile,
                env,
                str(sft_checkpoint(profile)),
                Path(out),
                stats,
                max_steps=1,
                save_strategy="no",
                report_to="none",
            )
            trainer.train()
    finally:
        grpo.without_unused_padding = trimmed
    logged = [row for row in trainer.state.log_history if "reward" in row]
    return {
        "unused_padding_dropped": trim,
        "micro_batch_size": profile.grpo.micro_batch_size,
        "split_seconds": grpo.step_split(stats).to_dict("records"),
        "reward": [round(row["reward"], 4) for row in logged],
        "loss": [round(row["loss"], 6) for row in logged],
    }


if __name__ == "__main__":
    if not (sft_checkpoint(PROFILES["cpu"]) / "model.safetensors").is_file():
        sys.exit(f"No SFT model in {sft_checkpoint(PROFILES['cpu'])}: run notebook 08 in the cpu profile first.")
    print(json.dumps({"matmul_gflops_fp32": round(matmul_gflops())}))
    for trim in (False, True):
        print(json.dumps(run(trim)), flush=True)
