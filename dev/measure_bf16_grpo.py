"""bf16 autocast against float32 for notebook 09's GRPO step on this CPU: where a step's time goes, same games.

    python dev/measure_bf16_grpo.py --steps 1   # after notebook 08 ran on cpu (its SFT model starts GRPO); ~20 min
    python dev/measure_bf16_grpo.py --steps 5 --precision bf16 --save outputs/cpu/grpo_bf16   # one run, kept

Notebook 09's cpu recipe (LoRA rank 8 on float32 weights, 8 prompts x 8 games a step), from notebook 08's SFT
model, once in float32 and once with `bf16=True` (autocast: the training forward and backward in bfloat16).
The games are generated outside autocast, in float32, so both runs play the same games (same seed): the
rewards of step 1 must agree, and only the forward + backward time may differ. Prints one JSON line per run.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course_lib.grpo import build_grpo_trainer, full_game_environment, step_split  # noqa: E402
from course_lib.hardware import matmul_gflops  # noqa: E402
from course_lib.profiles import PROFILES  # noqa: E402
from course_lib.sft import save_final, sft_checkpoint  # noqa: E402


def run(bf16: bool, steps: int, save: Path | None = None) -> dict:
    profile = PROFILES["cpu"]
    stats = {}
    with tempfile.TemporaryDirectory() as out:
        trainer = build_grpo_trainer(
            profile,
            full_game_environment(profile),
            str(sft_checkpoint(profile)),
            Path(out),
            stats,
            max_steps=steps,
            bf16=bf16,
            save_strategy="no",
            report_to="none",
        )
        trainer.train()
        if save is not None:
            save_final(trainer, save, str(sft_checkpoint(profile)))
    logged = [row for row in trainer.state.log_history if "reward" in row]
    return {
        "bf16_autocast": bf16,
        "split_seconds": step_split(stats).to_dict("records"),
        "reward": [round(row["reward"], 4) for row in logged],
        "loss": [round(row["loss"], 5) for row in logged],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--precision", choices=["both", "float32", "bf16"], default="both")
    parser.add_argument("--save", type=Path, help="keep the trained model here (a plain checkpoint, LoRA merged)")
    args = parser.parse_args()
    if args.save and args.precision == "both":
        sys.exit("--save keeps one run's model: pass --precision float32 or bf16 with it.")
    if not (sft_checkpoint(PROFILES["cpu"]) / "model.safetensors").is_file():
        sys.exit(f"No SFT model in {sft_checkpoint(PROFILES['cpu'])}: run notebook 08 in the cpu profile first.")
    print(json.dumps({"matmul_gflops_fp32": round(matmul_gflops())}))
    for bf16 in {"both": (False, True), "float32": (False,), "bf16": (True,)}[args.precision]:
        print(json.dumps(run(bf16, args.steps, args.save)), flush=True)
