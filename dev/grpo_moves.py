"""GRPO on one move per episode (tictactoe.moves), from the SFT model, judged on full games.

    # 1. the SFT model's own games on training rows (never the evaluation's games)
    python dev/grpo_moves.py play --model outputs/cpu/sft/final --games 128 --out outputs/cpu/moves/games.jsonl
    # 2. train on their positions (and the expert's SFT games), then play both models on full games
    python dev/grpo_moves.py train --model outputs/cpu/sft/final --games-file outputs/cpu/moves/games.jsonl \
        --output-dir outputs/cpu/moves/run1 --set grpo.max_steps=20 --evaluate 64
"""

import argparse
import asyncio
import json
import time
from pathlib import Path

from course_lib.profiles import get_profile
from course_lib.train_grpo import evaluate_before_after, with_settings

EXPERT_GAMES = Path(__file__).resolve().parent.parent / "data" / "tictactoe_sft" / "games.jsonl"
TRAINING_GAMES_SEED = 100  # the evaluations use seeds 0-5 of the eval split; these are train-split rows


async def play(model: str, games: int, min_prob: float, max_prob: float, out: Path) -> None:
    from course_lib.evaluation import turn_sampling_args
    from course_lib.serving import start_model
    from tictactoe import GAME_STATE_COLUMNS, load_environment

    profile = get_profile("cpu")
    env = load_environment(
        num_train_examples=games,
        num_eval_examples=0,
        min_random_move_prob=min_prob,
        max_random_move_prob=max_prob,
        num_groups=8,
        seed=TRAINING_GAMES_SEED,
    )
    env.eval_dataset = env.dataset
    start = time.monotonic()
    with start_model(profile, model_path=model) as llm:
        results = await env.evaluate(
            llm.client,
            llm.model,
            sampling_args=turn_sampling_args(profile),
            num_examples=-1,
            rollouts_per_example=1,
            max_concurrent=profile.max_concurrent,
            state_columns=GAME_STATE_COLUMNS,
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        for o in results["outputs"]:
            messages = [{"role": m["role"], "content": m["content"]} for m in o["prompt"] + o["completion"]]
            f.write(json.dumps({"winner": o["winner"], "messages": messages}) + "\n")
    print(f"{games} games in {(time.monotonic() - start) / 60:.1f} min -> {out}")


def load_games(paths: list[Path]) -> list[list[dict]]:
    return [json.loads(line)["messages"] for path in paths for line in path.read_text().splitlines() if line.strip()]


def train(args) -> None:
    import pandas as pd

    from course_lib.grpo import build_grpo_trainer, step_split
    from course_lib.hardware import release
    from course_lib.sft import save_final
    from tictactoe.moves import load_environment

    profile = with_settings(get_profile("cpu"), args.set)
    sources = [*args.games_file, *([] if args.no_expert else [EXPERT_GAMES])]
    env = load_environment(load_games(sources))
    dataset = env.get_dataset()
    print(f"{len(dataset)} positions:", pd.Series([r["kind"] for r in dataset["info"]]).value_counts().to_dict())
    out = args.output_dir
    stats = {}
    trainer = build_grpo_trainer(profile, env, args.model, out, stats=stats, shuffle_dataset=True)
    start = time.monotonic()
    trainer.train()
    minutes = (time.monotonic() - start) / 60
    final = save_final(trainer, out / "final", args.model)
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    split = step_split(stats)
    split.to_csv(out / "step_split.csv")
    print(split.to_string())
    for row in trainer.state.log_history:
        if "reward" in row:
            print(
                row["step"],
                round(row["reward"], 3),
                "optimal",
                round(row.get("rewards/optimal/mean", 0), 3),
                "legal",
                round(row.get("rewards/legal/mean", 0), 3),
                "zero-std",
                round(row.get("frac_reward_zero_std", 0), 2),
            )
    print(f"training {minutes:.1f} min")
    if args.evaluate:
        release(trainer)
        row = {
            "run": out.name,
            "settings": " ".join(args.set),
            "training minutes": round(minutes, 1),
            "games per opponent": args.evaluate,
            **evaluate_before_after(profile, args.model, str(final), args.evaluate, out),
        }
        table = out.parent / "sweep.csv"
        pd.DataFrame([row]).to_csv(table, mode="a", header=not table.exists(), index=False)
        print(pd.Series(row).to_string())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("play")
    p.add_argument("--model", required=True)
    p.add_argument("--games", type=int, default=128)
    p.add_argument("--min-prob", type=float, default=0.0)
    p.add_argument("--max-prob", type=float, default=0.5)
    p.add_argument("--out", type=Path, required=True)
    t = sub.add_parser("train")
    t.add_argument("--model", required=True)
    t.add_argument("--games-file", type=Path, action="append", default=[])
    t.add_argument("--no-expert", action="store_true")
    t.add_argument("--output-dir", type=Path, required=True)
    t.add_argument("--set", action="append", default=[])
    t.add_argument("--evaluate", type=int)
    args = parser.parse_args()
    if args.command == "play":
        asyncio.run(play(args.model, args.games, args.min_prob, args.max_prob, args.out))
    else:
        train(args)


if __name__ == "__main__":
    main()
