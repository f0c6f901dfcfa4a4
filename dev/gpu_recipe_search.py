"""Search GRPO recipes for notebook 09 on one GPU: each trained from the same SFT model, then played on the
same games as that model, so every recipe gets a paired test against its start.

    python3 dev/gpu_recipe_search.py --work /tmp/search --out $OUT    # on the GPU machine (about 8 minutes)
    python3 dev/gpu_recipe_search.py --smoke --work /tmp/s --out /tmp/s_out --recipes course win_block_kl

The SFT model is notebook 08's recipe (the cpu profile's budget) trained here from the embedded model; a
rerun reuses it. Each recipe then runs in its own process, all at once: notebook 09's per-move GRPO with
the cpu profile's budget (20 steps x 64 episodes unless the recipe says otherwise), then `--games` games
per opponent at evaluation seed `--seed`. The SFT model plays the same games in one more process.
Positions come from games an SFT model played on the CPU (`--own-games`, `--strong-games`: notebook 09's
stored position games), so nothing is played before training.

A search, not a confirmation: the recipe it picks is confirmed on the CPU with `dev/confirm_on_fresh_games.py`
on other games. Out: `search.json` (rewritten as processes finish), `search.tar.gz` (every process's games,
transcripts, training log and step split; no weights).
"""

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path

START = "SFT"

# Each recipe: profile settings (`train_grpo --set` names), kinds of position, the games its positions come from.
RECIPES = {
    "course": {},  # notebook 09's cpu recipe as it is
    "kl": {"settings": {"grpo.beta": 0.1}},
    "steps60": {"settings": {"grpo.max_steps": 60}},  # three times notebook 09's budget: does more of it move play?
    "win_block": {"kinds": ["win", "block"]},
    "win_block_kl": {"kinds": ["win", "block"], "settings": {"grpo.beta": 0.1}},
    "small_steps": {"settings": {"grpo.max_steps": 40, "grpo.prompts_per_step": 4, "grpo.micro_batch_size": 32}},
    "strong_games_kl": {"games": "strong", "settings": {"grpo.beta": 0.1}},
    "true_reasons": {"settings": {"grpo.false_claim_penalty": 0.5}},  # a right cell for a false reason pays less
    "groups16_kl": {
        "settings": {"grpo.prompts_per_step": 4, "grpo.num_generations": 16, "grpo.beta": 0.1},
    },
}


def say(*args) -> None:
    print(f"[search {datetime.now(timezone.utc):%H:%M:%S}]", *args, flush=True)


def write_json(path: Path, data: dict) -> None:
    """Written whole each time (a call cut short keeps the last complete report)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".partial").write_text(json.dumps(data, indent=1, default=str))
    path.with_suffix(".partial").replace(path)


def profile_of(args, settings=None):
    from course_lib.profiles import get_profile

    profile = get_profile("smoke" if args.smoke else "cpu")
    return profile.with_settings(**(settings or {}))


def train_sft(args, work: Path) -> str:
    """Notebook 08's SFT from the embedded model, once per work folder."""
    from course_lib import sft
    from course_lib.models import resolve_model

    final = work / "sft" / "final"
    if (final / "config.json").is_file():
        return str(final)
    profile = profile_of(args)
    base = resolve_model(profile)
    trainer = sft.build_sft_trainer(profile, sft.load_dataset(sft.training_data_dir(profile)), base, work / "sft")
    trainer.train()
    sft.save_final(trainer, final, base)
    return str(final)


def worker(args, name: str) -> None:
    """One recipe: train from the SFT model (unless `name` is the start), then play the evaluation games."""
    import asyncio

    import torch

    from course_lib.evaluation import evaluate_player, load_transcripts, turn_sampling_args
    from course_lib.hardware import release
    from course_lib.local_model import LocalModel

    work = Path(args.work)
    out = work / name
    out.mkdir(parents=True, exist_ok=True)
    result = {"recipe": name, **RECIPES.get(name, {}), "started": time.time()}
    model = str(work / "sft" / "final")
    if name != START:
        from course_lib.grpo import build_grpo_trainer, move_environment, step_split

        recipe = RECIPES[name]
        profile = profile_of(args, recipe.get("settings"))
        games_file = args.strong_games if recipe.get("games") == "strong" else args.own_games
        games = [game["messages"] for game in load_transcripts(Path(games_file))]
        env = move_environment(
            games,
            kinds=recipe.get("kinds"),
            false_claim_penalty=profile.grpo.false_claim_penalty,
            needed_claim_bonus=profile.grpo.needed_claim_bonus,
        )
        stats = {}
        start = time.monotonic()
        trainer = build_grpo_trainer(profile, env, model, out, stats=stats, shuffle_dataset=True, save_strategy="no")
        trainer.train()
        result["train_seconds"] = round(time.monotonic() - start, 1)
        result["positions"] = len(env.get_dataset())
        (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
        step_split(stats).to_csv(out / "step_split.csv")
        from course_lib.sft import save_final

        model = str(save_final(trainer, work / "models" / name, model))
        release(trainer)
        del trainer
        write_json(out / "result.json", result)
    profile = profile_of(args)
    start = time.monotonic()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with LocalModel(model, max_batch_size=args.batch, device=device) as llm:
        played = asyncio.run(
            evaluate_player(
                llm.client,
                llm.model,
                name,
                args.games,
                sampling_args=turn_sampling_args(profile),
                max_concurrent=args.batch,
                seed=args.seed,
                out_dir=out,
            )
        )
    played.games.to_csv(out / "games.csv", index=False)
    result["eval_seconds"] = round(time.monotonic() - start, 1)
    result["summary"] = played.summary.to_dict("records")
    write_json(out / "result.json", result)


def compare(work: Path, names: list[str]) -> dict:
    """Each finished recipe against the start model on the same games: the paired test of notebook 10."""
    import pandas as pd

    from course_lib.evaluation import paired_comparison, plays_better

    start_games = work / START / "games.csv"
    if not start_games.is_file():
        return {}
    rows = {}
    for name in names:
        games = work / name / "games.csv"
        if not games.is_file():
            continue
        both = pd.concat([pd.read_csv(start_games), pd.read_csv(games)])
        table = paired_comparison(both, START, name, ("win", "loss", "non-loss", "invalid answer"))
        rows[name] = {"decided test": plays_better(table, START, name), "table": table.to_dict("records")}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="checkpoints and games (a rerun reuses the SFT model)")
    parser.add_argument("--out", required=True, help="search.json and search.tar.gz")
    parser.add_argument("--recipes", nargs="*", default=list(RECIPES))
    parser.add_argument("--games", type=int, default=200, help="games per opponent for every model")
    parser.add_argument("--seed", type=int, default=3, help="evaluation seed (the course's own runs use 0)")
    parser.add_argument("--batch", type=int, default=128, help="games in flight per model")
    parser.add_argument("--deadline", type=int, default=520, help="seconds from the start; then stop every process")
    parser.add_argument("--own-games", default="data/grpo_moves_cpu/position_games/course_run_sft_0-50.jsonl")
    parser.add_argument("--strong-games", default="data/grpo_moves_cpu/position_games/p1_sft_0-20.jsonl")
    parser.add_argument("--smoke", action="store_true", help="the smoke profile's budgets (any CPU)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args, args.worker)

    begun = time.monotonic()
    work, out = Path(args.work), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    report = {"command": " ".join(sys.argv), "started": datetime.now(timezone.utc).isoformat(), "recipes": {}}
    import torch

    report["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    start = time.monotonic()
    report["sft_model"] = train_sft(args, work)
    report["sft_seconds"] = round(time.monotonic() - start, 1)
    say(f"SFT model ready in {report['sft_seconds']} s")
    write_json(out / "search.json", report)

    names = [START, *args.recipes]
    worker_env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    running = {}
    for name in names:
        log = open(work / f"{name}.log", "w")
        command = [sys.executable, __file__, "--worker", name, *sys.argv[1:]]
        running[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=worker_env)
    while running and time.monotonic() - begun < args.deadline:
        time.sleep(5)
        for name, process in list(running.items()):
            if process.poll() is not None:
                say(f"{name} finished, exit {process.returncode}")
                report["recipes"][name] = {"exit": process.returncode}
                del running[name]
        report["compared"] = compare(work, args.recipes)
        write_json(out / "search.json", report)
    for name, process in running.items():
        process.kill()
        report["recipes"][name] = {"exit": "stopped at the deadline"}
        say(f"{name} stopped at the deadline")
    for name in names:
        done = work / name / "result.json"
        if done.is_file():
            report["recipes"][name].update(json.loads(done.read_text()))
    report["compared"] = compare(work, args.recipes)
    report["wall_seconds"] = round(time.monotonic() - begun, 1)
    write_json(out / "search.json", report)
    with tarfile.open(out / "search.tar.gz", "w:gz") as tar:
        for path in sorted(work.glob("*.log")) + [work / name for name in names if (work / name).is_dir()]:
            tar.add(path, arcname=path.relative_to(work))
    for name, compared in report["compared"].items():
        say(f"{name}: {compared['decided test']}")


if __name__ == "__main__":
    main()
