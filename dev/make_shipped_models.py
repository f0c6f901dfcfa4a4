"""Write assets/models/: the course's cpu-run models as low-rank differences (course_lib/shipped_models.py).

    python dev/make_shipped_models.py make      # after notebooks 08 and 09 ran in the cpu profile (about 3 minutes)
    python dev/make_shipped_models.py compare   # the rebuilt SFT model on notebook 08's games, paired (8 minutes)
    python dev/make_shipped_models.py compare --stage "after GRPO"   # the same for notebook 09's model

SFT changed every weight a little (full fine-tuning): each matrix's change is cut to its best rank-27
approximation (truncated SVD), the largest rank that keeps the file under 20 MB in float16 (rank 28:
20,004,464 bytes). Notebook 09 trained LoRA adapters (every_cell.lora_rank, on its top layers), so its change
is of that rank exactly. Vectors (norm weights) are shipped whole. Notebook 10 draws a shipped GRPO model's
curve from the course run's log (sweeps.EVERY_CELL_RUN).
"""

import argparse
import asyncio
import datetime
import hashlib
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course_lib.models import embedded_checkpoint  # noqa: E402
from course_lib.profiles import PROFILES, output_dir  # noqa: E402
from course_lib.shipped_models import MANIFEST, SHIPPED_DIR  # noqa: E402

MAX_BYTES = 20_000_000
OUT = output_dir(PROFILES["cpu"])
# How each rebuilt model plays beside the trained one (`compare`; RESULTS.md "Skip a stage"), said when it is used
HOW_IT_PLAYS = {
    "after SFT": "not yet compared game by game with the SFT model it approximates (`compare`)",
    "after GRPO": "not compared game by game with the GRPO model; it starts from the rebuilt SFT model above",
}
STAGES = {  # stage: (file, trained checkpoint, the stage it starts from, rank, notebook that trains it)
    "after SFT": ("after_sft.safetensors", OUT / "sft" / "final", None, 27, "notebook 08 (08_sft_warmup.ipynb)"),
    "after GRPO": (
        "after_grpo.safetensors",
        OUT / "grpo" / "final",
        "after SFT",
        PROFILES["cpu"].every_cell.lora_rank,  # LoRA merged: the change is of this rank exactly
        "notebook 09 (09_grpo_training.ipynb)",
    ),
}


def low_rank_difference(trained: dict, start: dict, rank: int) -> dict:
    changes = {}
    for name, weight in trained.items():
        change = weight.float() - start[name].float()
        if not change.any():
            continue
        if change.dim() == 1:
            changes[name] = change.half()
            continue
        u, s, vh = torch.linalg.svd(change, full_matrices=False)
        changes[f"{name}.up"] = (u[:, :rank] * s[:rank].sqrt()).half().contiguous()
        changes[f"{name}.down"] = (s[:rank].sqrt()[:, None] * vh[:rank]).half().contiguous()
    return changes


def make():
    SHIPPED_DIR.mkdir(parents=True, exist_ok=True)
    manifest, paths = {}, {None: embedded_checkpoint()}
    for stage, (file, trained, starts_from, rank, notebook) in STAGES.items():
        paths[stage] = trained
        changes = low_rank_difference(
            load_file(trained / "model.safetensors"), load_file(paths[starts_from] / "model.safetensors"), rank
        )
        path = SHIPPED_DIR / file
        save_file(changes, path)  # what it is made from: the manifest
        size = path.stat().st_size
        assert size <= MAX_BYTES, f"{path} is {size} bytes: lower the rank"
        if (trained / "log_history.json").is_file():  # SFT's; notebook 09's run keeps steps.csv beside final/
            shutil.copy(trained / "log_history.json", path.with_suffix(".log_history.json"))
        weights_sha = hashlib.sha256((trained / "model.safetensors").read_bytes()).hexdigest()
        manifest[stage] = {
            "file": file,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "bytes": size,
            "rank": rank,
            "starts_from": starts_from,
            "made_by": notebook,
            "made_from": f"the course's cpu run, {notebook}; weights sha256 {weights_sha[:12]}",
            "how_it_plays": HOW_IT_PLAYS[stage],
            "written": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        }
        print(f"{stage}: {path} ({size / 1e6:.1f} MB, rank {rank})")
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")


def compare(stage: str):
    """Play the rebuilt model on the games the trained one played (same seed, 100 per opponent), paired."""
    from course_lib.evaluation import EvalResult, evaluate_model, paired_comparison
    from course_lib.shipped_models import shipped_checkpoint

    profile, trained = PROFILES["cpu"], STAGES[stage][1]
    games = profile.eval.games
    result = EvalResult.concat(
        [
            asyncio.run(evaluate_model(profile, str(trained), stage, games)),
            asyncio.run(evaluate_model(profile, str(shipped_checkpoint(stage)), f"{stage}, shipped", games)),
        ]
    )
    out = Path(__file__).resolve().parent.parent / "data" / "shipped_models"
    out.mkdir(parents=True, exist_ok=True)
    name = stage.replace(" ", "_")
    result.summary.to_csv(out / f"{name}_summary.csv", index=False)
    paired = paired_comparison(result.games, stage, f"{stage}, shipped", ("win", "loss", "non-loss", "invalid answer"))
    paired.to_csv(out / f"{name}_paired.csv", index=False)
    print(result.summary[["player", "opponent", "win", "draw", "loss", "unfinished", "invalid_per_move"]].round(3))
    print(paired.round(3).to_string())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["make", "compare"])
    parser.add_argument("--stage", default="after SFT", choices=list(STAGES))
    args = parser.parse_args()
    make() if args.step == "make" else compare(args.stage)
