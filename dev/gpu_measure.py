"""Measure the course's own pipeline on a GPU: the embedded SmolLM2-135M-Instruct at the `cpu` profile's budgets.

    python3 dev/gpu_measure.py --out gpu_measure.json            # on the GPU machine (about 6 minutes)
    python3 dev/gpu_measure.py --smoke --out /tmp/gpu_smoke.json  # the smoke profile's budgets, any CPU

Parts, in this order, each in its own Python process under a time cap (a part that fails or runs out of time
is recorded with its traceback or the cap, and the next part still runs):

- model: the embedded checkpoint (`models.resolve_model`: converted from the GGUF once, then cached);
- grpo: `grpo.build_grpo_trainer` on `grpo.full_game_environment`, from the base model, the profile's recipe
  with grpo.max_steps=2 (cpu: 8 prompts x 8 games a step, LoRA, transformers generation);
  seconds per step, split into the rollout (`rollout_func`: the games, generation included) and the rest
  (scoring, forward/backward, optimizer, checkpoint), and the course's own split (`grpo.step_split`);
- sft: `sft.build_sft_trainer` on `sft.training_data_dir`'s games (notebook 08's data), `--sft-steps` steps;
- eval: `evaluation.evaluate_model` of the base model, the profile's games per opponent (cpu: 100) against
  the random and the optimal opponent, the way notebooks 06 and 08 call it (`serving.start_model`: on a GPU,
  `transformers serve --device cuda --continuous-batching`; on a CPU, `LocalModel` in the process);
- eval_local: the same games with `local_model.LocalModel` (the CPU path's in-process batching client),
  its network moved to the GPU when there is one (the course itself never does that): only if time is left.

The JSON (`--out`) is rewritten after every part, so a run cut short still leaves what it measured.
Outputs (checkpoints, stored evaluations) go to a fresh temporary folder: nothing is reused from outputs/.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# seconds per part on the GPU (the smoke profile on a CPU gets its own caps below)
GPU_BUDGETS = {"model": 120, "grpo": 200, "sft": 90, "eval": 150, "eval_local": 90}
SMOKE_BUDGETS = {"model": 300, "grpo": 400, "sft": 300, "eval": 300, "eval_local": 300}
PARTS = ("model", "grpo", "sft", "eval", "eval_local")


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def say(*args) -> None:
    print(f"[gpu_measure {datetime.now(timezone.utc).strftime('%H:%M:%S')}]", *args, flush=True)


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=1, default=str) + "\n")
    partial.replace(path)


def environment_info() -> dict:
    import importlib.metadata as md

    info = {"python": platform.python_version(), "platform": platform.platform(), "cpu_cores": os.cpu_count()}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "verifiers", "datasets", "openai", "gguf"):
        try:
            info[name] = md.version(name)
        except md.PackageNotFoundError:
            info[name] = None
    try:
        import torch

        info["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            info["device"] = torch.cuda.get_device_name(0)
            info["device_memory_gib"] = round(props.total_memory / 2**30, 1)
            info["capability"] = list(torch.cuda.get_device_capability(0))
            info["torch_cuda"] = torch.version.cuda
        else:
            info["device"] = f"cpu ({platform.processor() or platform.machine()})"
    except Exception as error:  # torch broken: say so, the parts will fail with their own tracebacks
        info["torch_error"] = repr(error)
    return info


# --- The parts (each runs in its own process: `--part NAME --part-out FILE`) -----------------------


class PartRecord:
    """A part's numbers, written to its JSON file after every change (so a killed part leaves them)."""

    def __init__(self, path: Path):
        self.path, self.data = path, {}

    def update(self, **values) -> None:
        self.data.update(values)
        write_json(self.path, self.data)


def gpu_memory() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {}
    return {
        "gpu_max_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "gpu_max_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2),
    }


def part_model(profile, record: PartRecord, args) -> None:
    from course_lib import models

    cached = (models.cached_embedded_checkpoint() / "model.safetensors").is_file()
    record.update(gguf=str(models.find_embedded_gguf()), checkpoint_was_cached=cached)
    start = time.monotonic()
    path = models.resolve_model(profile)
    record.update(checkpoint=path, seconds=round(time.monotonic() - start, 2))


def step_timer(record: PartRecord, key: str):
    """A TrainerCallback that records each optimizer step's wall time (seconds) under `key`."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self.start = [], None

        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.monotonic()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(round(time.monotonic() - self.start, 3))
            record.update(**{key: self.times})
            say(f"{key}: step {state.global_step} took {self.times[-1]:.1f} s")

    return StepTimer()


def gpu_settings(args) -> dict:
    """Config overrides for a CPU check of what the GPU runs differently (gradient checkpointing)."""
    return {"gradient_checkpointing": True} if args.gradient_checkpointing else {}


def part_grpo(profile, record: PartRecord, args) -> None:
    from course_lib import grpo
    from course_lib.models import resolve_model

    profile = profile.with_settings(**{"grpo.max_steps": args.grpo_steps})
    base = resolve_model(profile)
    env = grpo.full_game_environment(profile)
    stats = {}
    out = Path(args.work_dir) / "grpo"
    build_start = time.monotonic()
    trainer = grpo.build_grpo_trainer(
        profile, env, base, out, stats, callbacks=[step_timer(record, "step_seconds")], **gpu_settings(args)
    )
    rollout_seconds = []
    rollout = trainer.rollout_func

    def timed_rollout(prompts, trainer_):
        start = time.monotonic()
        try:
            return rollout(prompts, trainer_)
        finally:
            rollout_seconds.append(round(time.monotonic() - start, 3))
            record.update(rollout_seconds=rollout_seconds)

    trainer.rollout_func = timed_rollout
    record.update(
        recipe={
            "max_steps": profile.grpo.max_steps,
            "prompts_per_step": profile.grpo.prompts_per_step,
            "num_generations": profile.grpo.num_generations,
            "micro_batch_size": profile.grpo.micro_batch_size,
            "max_tokens_per_turn": profile.grpo.max_tokens_per_turn,
            "max_episode_tokens": profile.grpo.max_episode_tokens,
            "use_lora": profile.grpo.use_lora,
            "generation": "vllm" if profile.grpo.vllm_mode else "transformers",
            "bf16": trainer.args.bf16,
            "gradient_checkpointing": trainer.args.gradient_checkpointing,
            "model_device": str(trainer.model.device),
            "model_dtype": str(trainer.model.dtype),
        },
        build_seconds=round(time.monotonic() - build_start, 2),
    )
    start = time.monotonic()
    trainer.train()
    train_seconds = time.monotonic() - start
    steps = record.data.get("step_seconds", [])
    # TRL generates a step's games in the step's first micro-batch: one rollout per optimizer step
    split = [
        {"step": i + 1, "seconds": s, "rollout": r, "rest": round(s - r, 3)}
        for i, (s, r) in enumerate(zip(steps, rollout_seconds))
    ]
    logs = [row for row in trainer.state.log_history if "reward" in row or "step_time" in row]
    keep = ("step", "step_time", "reward", "reward_std", "completions/mean_length", "num_tokens")
    timers = ("step_seconds", "rollout_seconds", "generation_seconds", "optimizer_seconds")
    course_stats = {key: [round(x, 3) for x in stats[key]] for key in timers if key in stats}
    try:  # the course's own split (grpo.step_split: generation / environment / forward+backward / optimizer)
        course_split = (
            None if "generation_seconds" not in stats else grpo.step_split(stats).reset_index().to_dict("records")
        )
    except Exception as error:
        course_split = repr(error)
    record.update(
        train_seconds=round(train_seconds, 2),
        split=split,
        course_stats=course_stats,
        course_split=course_split,
        trl_log=[{k: row[k] for k in keep if k in row} for row in logs],
        closed_turns=stats.get("closed_turns"),
        **gpu_memory(),
    )


def part_sft(profile, record: PartRecord, args) -> None:
    from course_lib import sft
    from course_lib.models import resolve_model

    base = resolve_model(profile)
    data_dir = sft.training_data_dir(profile)
    dataset = sft.load_dataset(data_dir)
    build_start = time.monotonic()
    trainer = sft.build_sft_trainer(
        profile,
        dataset,
        base,
        Path(args.work_dir) / "sft",
        callbacks=[step_timer(record, "step_seconds")],
        max_steps=args.sft_steps,
        **gpu_settings(args),
    )
    targs = trainer.args
    record.update(
        data=str(data_dir.relative_to(REPO) if data_dir.is_relative_to(REPO) else data_dir),
        games=dataset.num_rows,
        setup={
            "max_steps": targs.max_steps,
            "per_device_train_batch_size": targs.per_device_train_batch_size,
            "gradient_accumulation_steps": targs.gradient_accumulation_steps,
            "use_lora": profile.sft.use_lora,
            "bf16": targs.bf16,
            "gradient_checkpointing": targs.gradient_checkpointing,
            "model_device": str(trainer.model.device),
            "model_dtype": str(trainer.model.dtype),
        },
        build_seconds=round(time.monotonic() - build_start, 2),
    )
    start = time.monotonic()
    trainer.train()
    steps = record.data.get("step_seconds", [])
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    record.update(
        train_seconds=round(time.monotonic() - start, 2),
        mean_step_seconds_after_first=round(sum(steps[1:]) / len(steps[1:]), 3) if len(steps) > 1 else None,
        losses=[round(loss, 4) for loss in losses],
        **gpu_memory(),
    )


def summary_rows(result) -> list[dict]:
    columns = ["opponent", "games", "win", "draw", "loss", "unfinished", "format_compliance", "invalid_per_move"]
    columns += ["tokens_per_game", "errors"]
    rows = result.summary[[c for c in columns if c in result.summary]].to_dict("records")
    for row in rows:
        row["W/D/L/unfinished"] = "/".join(
            str(round(row[k] * row["games"])) for k in ("win", "draw", "loss", "unfinished")
        )
    return rows


def part_eval(profile, record: PartRecord, args) -> None:
    import asyncio

    from course_lib.evaluation import evaluate_model
    from course_lib.hardware import cuda_capability
    from course_lib.models import resolve_model

    base = resolve_model(profile)
    games = profile.eval.games
    llm, how = None, "serving.start_model (course path)"
    if args.eval_via_server and cuda_capability() is None:
        # a CPU check of the GPU's path: evaluate_model through `transformers serve` (the CPU's own server)
        from course_lib.serving import start_server

        start = time.monotonic()
        llm, how = start_server(profile, base), "serving.start_server (forced, to check the GPU path on CPU)"
        record.update(server_start_seconds=round(time.monotonic() - start, 2))
    record.update(how=how, games_per_opponent=games, max_tokens_per_turn=profile.eval.max_tokens_per_turn)
    start = time.monotonic()
    try:
        result = asyncio.run(evaluate_model(profile, base, "base model", games, llm=llm))
    finally:
        if llm is not None:
            llm.stop()
    record.update(wall_seconds=round(time.monotonic() - start, 2), summary=summary_rows(result), **gpu_memory())


def part_eval_local(profile, record: PartRecord, args) -> None:
    import asyncio

    import torch

    from course_lib.evaluation import evaluate_player, turn_sampling_args
    from course_lib.local_model import LocalModel
    from course_lib.models import resolve_model

    base = resolve_model(profile)
    start = time.monotonic()
    llm = LocalModel(base, max_batch_size=profile.max_concurrent)
    if torch.cuda.is_available():
        llm.network.to("cuda")  # not what the course does: LocalModel always loads on the CPU
    record.update(
        how="local_model.LocalModel, network moved to the GPU" if torch.cuda.is_available() else "LocalModel (CPU)",
        fast_generation=llm.fast,
        model_device=str(llm.network.device),
        model_dtype=str(llm.network.dtype),
        load_seconds=round(time.monotonic() - start, 2),
    )
    start = time.monotonic()
    with llm:
        result = asyncio.run(
            evaluate_player(
                llm.client,
                llm.model,
                "base model (LocalModel)",
                profile.eval.games,
                sampling_args=turn_sampling_args(profile),
                max_concurrent=profile.max_concurrent,
            )
        )
    record.update(wall_seconds=round(time.monotonic() - start, 2), summary=summary_rows(result), **gpu_memory())


PART_FUNCTIONS = {
    "model": part_model,
    "grpo": part_grpo,
    "sft": part_sft,
    "eval": part_eval,
    "eval_local": part_eval_local,
}


def run_part(args) -> int:
    from course_lib.profiles import get_profile

    record = PartRecord(Path(args.part_out))
    record.update(started_utc=now())
    start = time.monotonic()
    try:
        PART_FUNCTIONS[args.part](get_profile(), record, args)
        record.update(ok=True)
        return 0
    except BaseException as error:  # recorded, then the parent moves on to the next part
        record.update(ok=False, error=repr(error), traceback=traceback.format_exc())
        traceback.print_exc()
        return 1
    finally:
        record.update(finished_utc=now(), part_seconds=round(time.monotonic() - start, 2))


# --- The parent: each part in a subprocess, under its cap and the total budget ----------------------


def run_parts(args) -> dict:
    out = Path(args.out)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="gpu_measure-"))
    os.environ["COURSE_PROFILE"] = "smoke" if args.smoke else "cpu"
    os.environ["COURSE_OUTPUT_DIR"] = str(work / "outputs")  # fresh: no stored evaluation is reused
    os.environ.setdefault("COURSE_TRACKIO", "0")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    budgets = dict(SMOKE_BUDGETS if args.smoke else GPU_BUDGETS)
    result = {
        "script": "dev/gpu_measure.py",
        "argv": sys.argv[1:],
        "profile": os.environ["COURSE_PROFILE"],
        "started_utc": now(),
        "environment": environment_info(),
        "budgets_s": budgets,
        "total_budget_s": args.total_budget_s,
        "parts": {},
    }
    say(f"profile {result['profile']}, device {result['environment'].get('device')}, work dir {work}")
    write_json(out, result)
    start = time.monotonic()
    for part in args.parts:
        left = args.total_budget_s - (time.monotonic() - start)
        if part == "eval_local" and left < budgets[part] / 2:
            result["parts"][part] = {"skipped": f"only {left:.0f} s of the total budget left"}
            say(f"{part}: skipped, only {left:.0f} s left")
            write_json(out, result)
            continue
        cap = max(10, min(budgets[part], left))
        part_out = work / f"{part}.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--part", part, "--part-out", str(part_out)]
        command += ["--out", str(out), "--work-dir", str(work), "--grpo-steps", str(args.grpo_steps)]
        command += ["--sft-steps", str(args.sft_steps)] + (["--smoke"] if args.smoke else [])
        command += ["--eval-via-server"] if args.eval_via_server else []
        command += ["--gradient-checkpointing"] if args.gradient_checkpointing else []
        say(f"{part}: starting (cap {cap:.0f} s)")
        part_start = time.monotonic()
        process = subprocess.Popen(command, cwd=REPO, start_new_session=True)
        try:
            code = process.wait(timeout=cap)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(process.pid, 9)  # the part and anything it started (a server)
            code = process.wait()
        data = json.loads(part_out.read_text()) if part_out.is_file() else {}
        data.update(exit_code=code, wall_seconds_with_startup=round(time.monotonic() - part_start, 2))
        if timed_out:
            data.update(ok=False, error=f"stopped at its cap of {cap:.0f} s")
        result["parts"][part] = data
        say(f"{part}: {'ok' if data.get('ok') else 'FAILED: ' + str(data.get('error'))[:300]}")
        write_json(out, result)
    result["finished_utc"] = now()
    result["total_seconds"] = round(time.monotonic() - start, 1)
    write_json(out, result)
    say(f"done in {result['total_seconds']} s; wrote {out}")
    print("SUMMARY " + json.dumps(summary(result), default=str), flush=True)
    return result


def summary(result: dict) -> dict:
    """The numbers in one line (the device tool returns the output's tail even when files do not come back)."""
    keep = ("ok", "error", "seconds", "checkpoint_was_cached", "build_seconds", "step_seconds", "rollout_seconds")
    keep += ("train_seconds", "mean_step_seconds_after_first", "wall_seconds", "server_start_seconds", "load_seconds")
    keep += ("gpu_max_allocated_gib", "skipped", "model_device", "fast_generation", "course_split")
    parts = {}
    for name, data in result["parts"].items():
        parts[name] = {k: data[k] for k in keep if k in data}
        if "error" in parts[name]:
            parts[name]["error"] = str(parts[name]["error"])[:300]
        if "summary" in data:
            parts[name]["W/D/L/unfinished"] = {row["opponent"]: row["W/D/L/unfinished"] for row in data["summary"]}
    env = result["environment"]
    return {"device": env.get("device"), "torch": env.get("torch"), "total_s": result.get("total_seconds"), **parts}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the JSON of the numbers")
    parser.add_argument("--smoke", action="store_true", help="the smoke profile's budgets (a CPU check)")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--grpo-steps", type=int, default=2)
    parser.add_argument("--sft-steps", type=int, help="default 10, smoke 2")
    parser.add_argument("--total-budget-s", type=float, help="all parts (eval_local: if left); default 390, smoke 1500")
    parser.add_argument("--eval-via-server", action="store_true", help="on a CPU: evaluate through transformers serve")
    parser.add_argument(
        "--gradient-checkpointing", action="store_true", help="on a CPU: train as on a GPU, with checkpointing"
    )
    parser.add_argument("--work-dir", help="checkpoints and stored evaluations (default: a fresh temporary folder)")
    parser.add_argument("--part", choices=PARTS, help=argparse.SUPPRESS)  # internal: run one part in this process
    parser.add_argument("--part-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sft_steps = args.sft_steps or (2 if args.smoke else 10)
    args.total_budget_s = args.total_budget_s or (1500 if args.smoke else 390)
    if args.part:
        return run_part(args)
    result = run_parts(args)
    return 0 if all(p.get("ok") or "skipped" in p for p in result["parts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
