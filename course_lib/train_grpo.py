"""GRPO on tic-tac-toe from the command line: the `full` profile's multi-GPU entry point.
The notebook (09) runs the same code in one process.

    # one GPU serves generation with vLLM, the others train (here 1 + 3 GPUs):
    CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model MODEL &
    CUDA_VISIBLE_DEVICES=1,2,3 accelerate launch --config_file course_lib/configs/accelerate_full.yaml \\
        -m course_lib.train_grpo --profile full --model MODEL

`trl vllm-serve` is deprecated in TRL 1.16 (removal planned for 2.0): it now only starts vLLM's
own server with the flags a trainer needs (weight transfer over NCCL, processed logprobs) and
prints the equivalent `VLLM_SERVER_DEV_MODE=1 vllm serve ...` command; run that one directly
once `trl vllm-serve` is gone.

MODEL defaults to the profile's SFT checkpoint (notebook 08); without one the script stops
rather than train the base model unnoticed. A run that is interrupted resumes from its last checkpoint
when started again.

It trains in the per-move environment notebook 09 uses (the start model's own games are played once
first, in one process); `--environment game` trains on whole games instead, one reward each.

Exploring settings (e.g. on a laptop, before choosing the recipe notebook 09 runs): `--set` changes
any profile field for this run, and `--evaluate N` then plays the start and the trained model on the
same N games per opponent and appends one row to `sweep.csv` beside the run's folder (settings,
minutes of training, outcome rates, paired p-values). The start model plays its games once
(`evaluation.evaluate_model` stores them); later runs reuse them:

    python -m course_lib.train_grpo --profile cpu --output-dir outputs/cpu/grpo_sweep/lr2e-5 \
        --set grpo.learning_rate=2e-5 --set grpo.max_steps=20 --evaluate 100
"""

import argparse
import asyncio
import json
from pathlib import Path

from course_lib.grpo import (
    build_grpo_trainer,
    full_game_environment,
    latest_checkpoint,
    move_environment,
    play_position_games,
    step_split,
)
from course_lib.profiles import get_profile, output_dir
from course_lib.sft import save_final, sft_checkpoint


def default_model(profile) -> str:
    final = sft_checkpoint(profile)
    if not (final / "config.json").is_file():
        raise SystemExit(
            f"No SFT checkpoint at {final}: run notebook 08 (08_sft_warmup.ipynb) first, or pass "
            "--model (a checkpoint path or Hub id) to start from another model on purpose."
        )
    return str(final)


def with_settings(profile, settings: list[str]):
    """The profile with `name=value` pairs applied (dotted names, "grpo.max_steps=20"), each value
    read as the setting's type."""
    table = profile.as_table()
    changes = {}
    for setting in settings:
        name, _, value = setting.partition("=")
        if name not in table:
            raise SystemExit(f"--set {setting}: no profile setting {name!r}; settings: {', '.join(table)}")
        kind = type(table[name])
        changes[name] = value.lower() in ("1", "true", "yes") if kind is bool else kind(value)
    return profile.with_settings(**changes)


def evaluate_before_after(profile, start: str, final: str, games: int, out: Path) -> dict:
    """Both models on the same games; one row of rates and paired p-values (per opponent, outcome).
    The start model's games are stored: the other runs of a sweep, all from one start, reuse them."""
    from course_lib.evaluation import EvalResult, evaluate_model, paired_comparison

    evaluated = EvalResult.concat(
        [
            asyncio.run(evaluate_model(profile, model, player, games))
            for player, model in [("start", start), ("after GRPO", final)]
        ]
    )
    evaluated.games.to_csv(out / "eval_games.csv", index=False)
    row = {}
    for _, r in paired_comparison(evaluated.games, "start", "after GRPO").iterrows():
        key = f"{r['outcome']} vs {r['opponent']}"
        row |= {f"{key}: start": r["start"], f"{key}: after": r["after GRPO"], f"{key}: p": r["p_value"]}
    for _, r in evaluated.summary.iterrows():
        row[f"invalid per answer vs {r['opponent']}: {r['player']}"] = r["invalid_per_move"]
    return row


def train_from_command_line(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", help="smoke, cpu, gpu or full (default: from the hardware)")
    parser.add_argument("--model", help="checkpoint or Hub id to start from")
    parser.add_argument("--output-dir", type=Path, help="default: outputs/<profile>/grpo")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change a profile field for this run, e.g. grpo.learning_rate=2e-5 (repeatable)",
    )
    parser.add_argument(
        "--environment",
        choices=("moves", "game"),
        default="moves",
        help="moves (notebook 09): one move per episode, rewarded from the game tree; game: one reward per game",
    )
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=("win", "block", "other"),
        help="moves only: train on these kinds of position (default all: win now, block O's line, other)",
    )
    parser.add_argument(
        "--evaluate",
        type=int,
        metavar="N",
        help="then play start and trained model on the same N games per opponent (one process only)",
    )
    args = parser.parse_args(argv)

    profile = with_settings(get_profile(args.profile), args.set)
    out = args.output_dir or output_dir(profile) / "grpo"
    start = args.model or default_model(profile)
    if args.environment == "moves":
        from accelerate import PartialState

        with PartialState().main_process_first():  # one process plays the start model's games, the others read them
            games = asyncio.run(play_position_games(profile, start))
            env = move_environment(
                games,
                kinds=args.kinds,
                false_claim_penalty=profile.grpo.false_claim_penalty,
                needed_claim_bonus=profile.grpo.needed_claim_bonus,
                answer_format=profile.answer_format,
            )
        overrides = {"shuffle_dataset": True}  # positions in random order: no opponent blocks to keep
    else:
        env, overrides = full_game_environment(profile), {}
    stats = {}
    trainer = build_grpo_trainer(profile, env, start, out, stats=stats, **overrides)
    trainer.train(resume_from_checkpoint=latest_checkpoint(out))
    # every step's time, from the log: a resumed run's log holds the steps before its interruption too
    minutes = sum(row.get("step_time", 0) for row in trainer.state.log_history) / 60
    if not trainer.accelerator.is_main_process:
        return
    final = save_final(trainer, out / "final", start)
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    step_split(stats).to_csv(out / "step_split.csv")
    if args.evaluate:
        import pandas as pd

        from course_lib.hardware import release

        release(trainer)
        kinds_setting = [f"--kinds {' '.join(args.kinds)}"] if args.kinds else []
        row = {
            "run": out.name,
            "settings": " ".join([f"--environment {args.environment}", *kinds_setting, *args.set]),
            "training minutes": round(minutes, 1),
            "games per opponent": args.evaluate,
            **evaluate_before_after(profile, start, str(final), args.evaluate, out),
        }
        table = out.parent / "sweep.csv"
        pd.DataFrame([row]).to_csv(table, mode="a", header=not table.exists(), index=False)
        print(pd.Series(row).to_string())


if __name__ == "__main__":
    train_from_command_line()
