"""bf16 autocast against float32 for notebook 08's SFT on this CPU: seconds per step and loss, same steps.

    python dev/measure_bf16_sft.py --steps 4   # cpu profile, the shipped expert games; about 4 minutes
    python dev/measure_bf16_sft.py --lora      # bf16 autocast, full fine-tuning against LoRA, twice each (timing only)
    python dev/measure_bf16_sft.py --micro-batches 2 8 4 2 8 --steps 5   # bf16 autocast, conversations per pass
    python dev/measure_bf16_sft.py --whole     # after notebook 08 ran on cpu: a whole bf16 SFT run, then its
                                               # games beside the float32 model's (about 30 minutes)

`--whole` trains notebook 08's SFT (all its steps) with bf16 autocast into outputs/cpu/sft_bf16/final, plays
notebook 08's evaluation games with it (seed 0, the cpu profile's games per opponent) and compares them pair by
pair with the float32 SFT model's (outputs/cpu/sft/final, games stored by notebook 08): tables in
data/bf16_sft/, the loss curves in assets/bf16_sft_loss.png (`--plot` redraws them), the rule in RESULTS.md
("bf16 autocast ... a whole run").

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
from course_lib.profiles import PROFILES, output_dir  # noqa: E402
from course_lib.sft import DATA_DIR, build_sft_trainer, load_dataset, save_final  # noqa: E402


class StepTimes(TrainerCallback):
    def __init__(self):
        self.ends = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())


def run(
    bf16: bool,
    steps: int | None,
    final: Path | None = None,
    lora: bool = False,
    micro_batch: int = PROFILES["cpu"].sft.micro_batch_size,
) -> dict:
    """Train (`steps` steps, or the profile's whole run) and time each step; save to `final` if given.
    `lora`: LoRA adapters (the `gpu` profile's SFT) instead of full fine-tuning; `micro_batch`: conversations per
    forward/backward pass, the optimizer step's batch unchanged."""
    times = StepTimes()
    limit = {"max_steps": steps} if steps else {}
    with tempfile.TemporaryDirectory() as out:
        trainer = build_sft_trainer(
            PROFILES["cpu"].with_settings(**{"sft.use_lora": lora, "sft.micro_batch_size": micro_batch}),
            load_dataset(DATA_DIR),
            str(embedded_checkpoint()),
            Path(out),
            callbacks=[times],
            bf16=bf16,
            report_to="none",
            **limit,
        )
        trainer.train()
        if final is not None:
            save_final(trainer, final, str(embedded_checkpoint()))
    losses = [round(row["loss"], 4) for row in trainer.state.log_history if "loss" in row]
    seconds = [round(b - a, 1) for a, b in zip(times.ends, times.ends[1:])]
    settings = {"bf16_autocast": bf16, "lora": lora, "micro_batch": micro_batch}
    return {**settings, "seconds_per_step": seconds, "loss": losses}


def whole_run_compared():
    """A whole bf16 SFT run, then its games beside the float32 SFT model's, pair by pair."""
    import asyncio

    from course_lib.evaluation import EvalResult, evaluate_model, paired_comparison

    profile = PROFILES["cpu"]
    out = output_dir(profile)
    fp32, bf16 = out / "sft" / "final", out / "sft_bf16" / "final"
    if not (fp32 / "model.safetensors").is_file():
        sys.exit(f"No float32 SFT model in {fp32}: run notebook 08 in the cpu profile first.")
    start = time.perf_counter()
    trained = run(True, None, bf16)
    print(json.dumps({**trained, "minutes": round((time.perf_counter() - start) / 60, 1)}), flush=True)
    fp32_losses = [
        round(row["loss"], 4) for row in json.loads((fp32 / "log_history.json").read_text()) if "loss" in row
    ]
    print(json.dumps({"float32_loss_of_notebook_08": fp32_losses}))
    games = profile.eval.games
    result = EvalResult.concat(
        [
            asyncio.run(evaluate_model(profile, str(fp32), "SFT float32", games)),
            asyncio.run(evaluate_model(profile, str(bf16), "SFT bf16 autocast", games)),
        ]
    )
    tables = Path(__file__).resolve().parent.parent / "data" / "bf16_sft"
    tables.mkdir(parents=True, exist_ok=True)
    result.summary.to_csv(tables / "summary.csv", index=False)
    paired = paired_comparison(
        result.games, "SFT float32", "SFT bf16 autocast", ("win", "loss", "non-loss", "invalid answer")
    )
    paired.to_csv(tables / "paired.csv", index=False)
    (tables / "losses.json").write_text(json.dumps({"float32": fp32_losses, "bf16_autocast": trained["loss"]}))
    print(result.summary[["player", "opponent", "win", "draw", "loss", "unfinished", "invalid_per_move"]].round(3))
    print(paired.round(3).to_string())
    plot_losses()


def plot_losses():
    """Both runs' loss per step, from data/bf16_sft/losses.json, into assets/bf16_sft_loss.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root = Path(__file__).resolve().parent.parent
    losses = json.loads((root / "data" / "bf16_sft" / "losses.json").read_text())
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for key, label in (("float32", "float32 (notebook 08's run)"), ("bf16_autocast", "bf16 autocast")):
        ax.plot(range(1, len(losses[key]) + 1), losses[key], marker="o", ms=2.5, label=label)
    ax.set(xlabel="optimizer step", ylabel="loss (assistant tokens)", ylim=(0, None))
    ax.set_title("Notebook 08's SFT on 2 CPU cores: float32 vs bf16 autocast")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(root / "assets" / "bf16_sft_loss.png", dpi=110)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--whole", action="store_true", help="a whole bf16 run and its games (see above)")
    parser.add_argument("--lora", action="store_true", help="bf16: full fine-tuning vs LoRA, alternated twice")
    parser.add_argument("--plot", action="store_true", help="only redraw the loss curves of the last --whole run")
    parser.add_argument("--micro-batches", type=int, nargs="+", help="bf16: one run per micro-batch size, in order")
    args = parser.parse_args()
    if args.plot:
        plot_losses()
        sys.exit()
    print(json.dumps({"matmul_gflops_fp32": round(matmul_gflops())}))
    if args.micro_batches:
        for micro_batch in args.micro_batches:
            print(json.dumps(run(True, args.steps, micro_batch=micro_batch)), flush=True)
    elif args.lora:
        for lora in (False, True, False, True):
            print(json.dumps(run(True, args.steps, lora=lora)), flush=True)
    elif args.whole:
        whole_run_compared()
    else:
        for bf16 in (False, True):
            print(json.dumps(run(bf16, args.steps)), flush=True)
