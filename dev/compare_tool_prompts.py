"""Held-out wiki answers with the tools shown as tool SFT trains on them, and with their `strict` flag dropped.

    python dev/compare_tool_prompts.py --out data/tool_prompts   # after notebook 08 ran on cpu

Until 2026-11-28 the in-process client (`LocalModelClient.to_native_tool`) rendered each tool without the
`"strict": true` that verifiers' client sends a server and that tool SFT's rows keep, so on a CPU notebook 08
evaluated its models on prompts the tool-SFT model had not been trained on. This plays notebook 08's held-out
evaluation (20 questions x 3 rollouts, the cpu profile's sampling) for the base model and the tool-SFT model,
once with each rendering, the same seed before each, and compares the two per rollout (exact McNemar).
Writes rollouts.csv and summary.json to --out.
"""

import argparse
import asyncio
import json
import sys
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import wiki_search as wiki  # noqa: E402
from course_lib import tool_sft  # noqa: E402
from course_lib.evaluation import mcnemar_p_value  # noqa: E402
from course_lib.local_model import LocalModel, LocalModelClient  # noqa: E402
from course_lib.models import resolve_model  # noqa: E402
from course_lib.profiles import PROFILES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROFILE = PROFILES["cpu"]


class StrictDroppedClient(LocalModelClient):
    """The client as it was before the fix: each tool without its `strict` flag."""

    async def to_native_tool(self, tool):
        return {
            "type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
        }


def rollouts(model: LocalModel, client_class, env) -> list[dict]:
    """Notebook 08's held-out evaluation call (section 9), with a fresh client of `client_class`."""
    env_args = PROFILE.env
    sampling_args = {
        "max_tokens": env_args.tool_max_tokens,
        "temperature": env_args.temperature,
        "extra_body": {"max_tokens": env_args.tool_max_tokens},
    }
    client = client_class(model.tokenizer, model.generate_batch, model.sampling, model.max_batch_size)
    torch.manual_seed(0)
    results = asyncio.run(
        env.evaluate(
            client=client,
            model=model.model,
            num_examples=env_args.num_examples,
            rollouts_per_example=env_args.rollouts_per_example,
            sampling_args=sampling_args,
            max_concurrent=PROFILE.max_concurrent,
            independent_scoring=True,
        )
    )
    return [
        {"example_id": o["example_id"], "reward": o["reward"], "tool_calls": o["metrics"]["total_tool_calls"]}
        for o in results["outputs"]
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tool-model", default=str(ROOT / "outputs" / "cpu" / "tool_sft" / "final"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    _, held_out = tool_sft.wiki_split()
    env = wiki.load_environment(questions=held_out)
    table, summary = [], []
    for player, path in (("base model", resolve_model(PROFILE)), ("tool SFT", args.tool_model)):
        with LocalModel(path) as model:
            for rendering, client_class in (("as trained", LocalModelClient), ("strict dropped", StrictDroppedClient)):
                rows = pd.DataFrame(rollouts(model, client_class, env))
                rows["rollout"] = rows.groupby("example_id").cumcount()
                table.append(rows.assign(player=player, rendering=rendering))
                print(f"{player}, tools {rendering}: {int(rows['reward'].sum())} of {len(rows)} right", flush=True)
        both = pd.concat(table[-2:])
        pairs = both.pivot_table(index=["example_id", "rollout"], columns="rendering", values="reward")
        right_as_trained, right_dropped = pairs["as trained"] > 0, pairs["strict dropped"] > 0
        only_trained, only_dropped = (
            int((right_as_trained & ~right_dropped).sum()),
            int((right_dropped & ~right_as_trained).sum()),
        )
        summary.append(
            {
                "player": player,
                "right_as_trained": int(right_as_trained.sum()),
                "right_strict_dropped": int(right_dropped.sum()),
                "rollouts": len(pairs),
                "only_as_trained": only_trained,
                "only_strict_dropped": only_dropped,
                "mcnemar_p": mcnemar_p_value(only_trained, only_dropped),
            }
        )
        print(json.dumps(summary[-1]), flush=True)
    pd.concat(table).to_csv(args.out / "rollouts.csv", index=False)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
