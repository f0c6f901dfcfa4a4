"""bf16 autocast against float32 for notebook 08's SFT on this CPU: seconds per step and loss, same steps.

    python dev/measure_bf16_sft.py --steps 4   # cpu profile, the shipped expert games; about 4 minutes

Both runs start from the embedded model with float32 weights (full fine-tuning keeps float32 master
weights: bf16 weights would round away updates of this size); `bf16=True` adds autocast, so matrix
products run in bfloat16. Steps 2..N are timed (step 1 also warms up). Prints one JSON line per run.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from transformers import TrainerCallback  # noqa: E402

from course_lib.hardware import matmul_gflops  # noqa: E402
from course_lib.models import embedded_checkpoint  # noqa: E402
from course_lib.profiles import PROFILES  # noqa: E402
from course_lib.sft import DATA_DIR, build_sft_trainer, load_dataset  # noqa: E402


class StepTimes(TrainerCallback):
    def __init__(self):
        self.ends = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())


def run(bf16: bool, steps: int) -> dict:
    times = StepTimes()
    with tempfile.TemporaryDirectory() as out:
        trainer = build_sft_trainer(
            PROFILES["cpu"],
            load_dataset(DATA_DIR),
            str(embedded_checkpoint()),
            Path(out),
            callbacks=[times],
            bf16=bf16,
            max_steps=steps,
            report_to="none",
        )
        trainer.train()
    losses = [round(row["loss"], 4) for row in trainer.state.log_history if "loss" in row]
    seconds = [round(b - a, 1) for a, b in zip(times.ends, times.ends[1:])]
    return {"bf16_autocast": bf16, "seconds_per_step": seconds, "loss": losses}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    print(json.dumps({"matmul_gflops_fp32": round(matmul_gflops())}))
    for bf16 in (False, True):
        print(json.dumps(run(bf16, args.steps)), flush=True)
