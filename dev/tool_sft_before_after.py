"""Notebook 04's tool SFT measured outside the notebook: the same functions, settings and evaluation.

    python dev/tool_sft_before_after.py --profile cpu --out outputs/cpu/tool_sft_run
    python dev/tool_sft_before_after.py --profile cpu --trained outputs/cpu/tool_sft_run/final --out ...

Trains the profile's model on the scripted expert's traces of the training questions (unless
--trained names a checkpoint), then serves the base model and the trained one in turn with
`transformers serve --continuous-batching` (as notebook 04 does on a CPU) and plays the held-out
questions through the wiki-search ToolEnv (the profile's num_examples x rollouts_per_example, at
most tool_max_tokens per turn). Writes summary.csv (reward with its 95% interval, tool calls,
share of rollouts that read a section, errors, minutes) and rollouts.jsonl (every conversation)
under --out.
"""

import argparse
import asyncio
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from datasets import Dataset

import wiki_search as wiki
from course_lib import sft
from course_lib.evaluation import wilson_interval
from course_lib.models import resolve_model
from course_lib.profiles import get_profile
from course_lib.scripted_client import wiki_expert_client
from course_lib.serving import start_server


def train(profile, base: str, out: Path) -> tuple[Path, float]:
    train_questions, _ = sft.wiki_split()
    trace_env = wiki.load_environment(questions=train_questions[: profile.env.tool_sft_questions])
    traces = asyncio.run(trace_env.evaluate(client=wiki_expert_client(), model="scripted-expert", num_examples=-1))
    rows = sft.tool_trace_rows(traces["outputs"])
    trainer = sft.build_sft_trainer(
        profile,
        Dataset.from_list(rows),
        base,
        out,
        num_train_epochs=profile.env.tool_sft_epochs,
        learning_rate=profile.env.tool_sft_learning_rate,
        max_length=2048,
    )
    start = time.monotonic()
    trainer.train()
    minutes = (time.monotonic() - start) / 60
    return sft.save_final(trainer, out / "final", base), minutes


def play(profile, model_path: str, max_concurrent: int) -> tuple[list[dict], float]:
    _, held_out = sft.wiki_split()
    env = wiki.load_environment(questions=held_out)
    sampling_args = {
        "max_tokens": profile.env.tool_max_tokens,
        "temperature": profile.env.temperature,
        "extra_body": {"max_tokens": profile.env.tool_max_tokens},
    }
    with start_server(profile, model_path, extra_args=("--continuous-batching",)) as server:
        start = time.monotonic()
        results = asyncio.run(
            env.evaluate(
                client=server.client,
                model=server.model,
                num_examples=profile.env.num_examples,
                rollouts_per_example=profile.env.rollouts_per_example,
                sampling_args=sampling_args,
                max_concurrent=max_concurrent,
                independent_scoring=True,
            )
        )
        return results["outputs"], (time.monotonic() - start) / 60


def summary_row(name: str, outputs: list[dict], minutes: float) -> dict:
    rewards = np.array([o["reward"] for o in outputs])
    low, high = wilson_interval(int(rewards.sum()), len(rewards))
    return {
        "model": name,
        "rollouts": len(outputs),
        "reward": rewards.mean(),
        "reward_low": low,
        "reward_high": high,
        "tool_calls_per_rollout": np.mean([o["metrics"]["total_tool_calls"] for o in outputs]),
        "read_the_wiki": np.mean([o["metrics"]["read_section_calls"] > 0 for o in outputs]),
        "errors": sum(o["error"] is not None for o in outputs),
        "eval_minutes": minutes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trained", help="a tool-SFT checkpoint to evaluate instead of training one")
    parser.add_argument("--max-concurrent", type=int, default=16, help="rollouts in flight (notebook 04: 16)")
    args = parser.parse_args()

    profile = get_profile(args.profile)
    base = resolve_model(profile)
    args.out.mkdir(parents=True, exist_ok=True)
    trained, sft_minutes = (Path(args.trained), float("nan")) if args.trained else train(profile, base, args.out)
    rows = []
    with open(args.out / "rollouts.jsonl", "w") as file:
        for name, path in (("base", base), ("after tool SFT", str(trained))):
            outputs, minutes = play(profile, path, args.max_concurrent)
            rows.append(summary_row(name, outputs, minutes))
            for output in outputs:
                messages = [m if isinstance(m, dict) else m.model_dump() for m in output["completion"]]
                record = {"model": name, "question": output["info"], "answer": output["answer"]}
                record |= {"reward": output["reward"], "metrics": output["metrics"], "completion": messages}
                file.write(json.dumps(record | {"error": output["error"]}, default=str) + "\n")
    table = pd.DataFrame(rows).assign(sft_minutes=sft_minutes)
    table.to_csv(args.out / "summary.csv", index=False)
    print(table.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
