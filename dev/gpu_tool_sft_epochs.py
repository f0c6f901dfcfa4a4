"""One lever of the cpu course, decided on a lent GPU: tool SFT (notebook 08, section 9) for one epoch instead of two.

    python3 dev/gpu_tool_sft_epochs.py --out tool_sft_epochs.json            # GPU machine, about 4 minutes
    COURSE_PROFILE=cpu python3 dev/gpu_tool_sft_epochs.py --out t.json --models BASE CKPT --examples 20 --rollouts 3
                                                  # no training: time notebook 08's evaluations of these checkpoints
    COURSE_PROFILE=smoke python3 dev/gpu_tool_sft_epochs.py --out /tmp/t.json  # any CPU, smoke budgets
    COURSE_PROFILE=cpu python3 dev/gpu_tool_sft_epochs.py --out t.json --epochs 2 --learning-rates 2e-4 --autocast \
        --lora --examples 20 --rollouts 3          # on a CPU: notebook 08's tool SFT as LoRA, and its evaluation

Notebook 08's recipe with the `cpu` profile's budgets (the scripted expert's conversations on the training
questions, `sft.build_sft_trainer`, the profile's learning rate, max_length 2048), trained in float32 as on a CPU
(course_lib would pick bfloat16 on this GPU), once per number of epochs; each model then answers the held-out
questions `--rollouts` times each (T = the profile's temperature) through the course's in-process client
(`LocalModel`, its network moved to the GPU: not a course path). The rule, written before the run: keep one epoch
in the cpu profile if its share of right answers is at least the two-epoch model's minus 5 points.
The JSON keeps every rollout's reward, so the comparison can be redone.
"""

import argparse
import asyncio
import json
import platform
import tempfile
import time
from pathlib import Path


def train(profile, rows, base, folder: Path, epochs: float, learning_rate: float, autocast: bool) -> tuple[str, dict]:
    from datasets import Dataset

    from course_lib import sft
    from course_lib.hardware import release

    # float32 weights, as on a CPU (the lever is for the cpu profile); `autocast`: bf16 autocast over them, as the
    # course trains SFT on CPUs with native bfloat16 since 2026-11-26
    sft.mixed_precision = lambda capability, cpu_autocast: {"bf16": autocast, "fp16": False}
    sft.training_dtype = lambda capability, lora: "float32"
    trainer = sft.build_sft_trainer(
        profile,
        Dataset.from_list(rows),
        base,
        folder,
        num_train_epochs=epochs,
        learning_rate=learning_rate,
        max_length=2048,
    )
    start = time.monotonic()
    trainer.train()
    seconds = time.monotonic() - start
    final = sft.save_final(trainer, folder / "final", base)
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    release(trainer)
    return str(final), {
        "epochs": epochs,
        "learning_rate": learning_rate,
        "bf16_autocast": autocast,
        "steps": len(losses),
        "train_seconds": round(seconds, 1),
        "losses": losses,
    }


def evaluate(profile, model_path: str, env, rollouts: int, examples: int = -1) -> dict:
    import torch

    from course_lib.local_model import LocalModel

    llm = LocalModel(model_path, max_batch_size=profile.max_concurrent)
    if torch.cuda.is_available():
        llm.network.to("cuda")
    sampling = {"max_tokens": profile.env.tool_max_tokens, "temperature": profile.env.temperature}
    start = time.monotonic()
    with llm:
        outputs = asyncio.run(
            env.evaluate(
                client=llm.client,
                model=llm.model,
                num_examples=examples,
                rollouts_per_example=rollouts,
                sampling_args=sampling,
                max_concurrent=profile.max_concurrent,
                independent_scoring=True,
            )
        )["outputs"]
        unreadable = llm.client.unreadable_tool_calls
    rewards = [float(o["reward"]) for o in outputs]
    return {
        "eval_seconds": round(time.monotonic() - start, 1),
        "rollouts": len(rewards),
        "right": int(sum(rewards)),
        "share_right": round(sum(rewards) / len(rewards), 4),
        "tool_calls_per_rollout": round(sum(o["metrics"]["total_tool_calls"] for o in outputs) / len(outputs), 2),
        "errors": sum(o["error"] is not None for o in outputs),
        "unreadable_tool_calls": unreadable,
        "per_rollout": [[o["example_id"], r] for o, r in zip(outputs, rewards)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rollouts", type=int, default=10, help="per held-out question")
    parser.add_argument("--epochs", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument(
        "--learning-rates", type=float, nargs="+", help="one per --epochs entry (default: the profile's for each)"
    )
    parser.add_argument("--autocast", action="store_true", help="bf16 autocast over float32 weights (else float32)")
    parser.add_argument("--lora", action="store_true", help="LoRA adapters (the gpu profile's SFT) instead of full")
    parser.add_argument(
        "--models", nargs="+", help="evaluate these checkpoints only (no training); BASE: the profile's model"
    )
    parser.add_argument("--examples", type=int, default=-1, help="held-out questions (-1: all 27)")
    args = parser.parse_args()

    import torch

    import wiki_search as wiki
    from course_lib import scripted_client, tool_sft
    from course_lib.models import resolve_model
    from course_lib.profiles import get_profile

    profile = get_profile().with_settings(**{"sft.use_lora": args.lora})
    result = {
        "profile": profile.name,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rule": "decided before the run: RESULTS.md",
        "runs": [],
    }
    out = Path(args.out)
    base = str(resolve_model(profile))
    train_questions, held_out = tool_sft.wiki_split()
    held_out_env = wiki.load_environment(questions=held_out)
    result.update(held_out_questions=len(held_out))
    for model_path in [base if name == "BASE" else name for name in args.models or []]:
        run = {"model": model_path, **evaluate(profile, model_path, held_out_env, args.rollouts, args.examples)}
        result["runs"].append(run)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(
            f"{model_path}: {run['right']}/{run['rollouts']} right, {run['tool_calls_per_rollout']} tool calls "
            f"per rollout, {run['unreadable_tool_calls']} unreadable calls, eval {run['eval_seconds']} s",
            flush=True,
        )
    if args.models:
        return
    trace_env = wiki.load_environment(questions=train_questions[: profile.env.tool_sft_questions])
    traces = asyncio.run(
        trace_env.evaluate(
            client=scripted_client.wiki_expert_client(),
            model="scripted-expert",
            num_examples=-1,
            rollouts_per_example=1,
        )
    )["outputs"]
    rows = tool_sft.tool_trace_rows(traces)
    result.update(training_conversations=len(rows))
    work = Path(tempfile.mkdtemp(prefix="tool_sft_epochs-"))
    rates = args.learning_rates or [profile.env.tool_sft_learning_rate] * len(args.epochs)
    if len(rates) != len(args.epochs):
        raise SystemExit(f"--learning-rates: {len(rates)} given for {len(args.epochs)} --epochs entries")
    for number, (epochs, rate) in enumerate(zip(args.epochs, rates)):
        model_path, run = train(profile, rows, base, work / f"run_{number}", epochs, rate, args.autocast)
        run.update(evaluate(profile, model_path, held_out_env, args.rollouts, args.examples), lora=args.lora)
        result["runs"].append(run)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(
            f"{epochs:g} epoch(s) at lr {rate:g}: {run['steps']} steps in {run['train_seconds']} s, "
            f"final loss {run['losses'][-1]:.3f}; held out: {run['right']}/{run['rollouts']} right, "
            f"{run['tool_calls_per_rollout']} tool calls per rollout, "
            f"{run['errors']} errors, eval {run['eval_seconds']} s",
            flush=True,
        )
    print("SUMMARY", json.dumps([[r["epochs"], r["learning_rate"], r["right"], r["rollouts"]] for r in result["runs"]]))


if __name__ == "__main__":
    main()
