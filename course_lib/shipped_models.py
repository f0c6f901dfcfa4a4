"""The course's own trained models, shipped small, so that a learner can skip a training stage.

Notebook 08's SFT model and notebook 09's GRPO model of the course's `cpu` run are 517 MB each; the
repository ships what they changed instead: each weight matrix's difference from the model its stage
started from, cut to a low rank (`dev/make_shipped_models.py` made them; RESULTS.md "Skip a stage"
says how close they play). `COURSE_SHIPPED_MODELS=1` makes notebooks 09 and 10 use them for a stage
whose notebook has not run here; nothing uses them otherwise.

- `wanted(profile)`: did the learner choose them (and do they fit this profile's model)?
- `shipped_checkpoint(stage)`: the stage's model ("after SFT" or "after GRPO"), rebuilt once (seconds)
  into the course's cache from the embedded model plus the shipped differences.
"""

import hashlib
import json
import os
import shutil
from pathlib import Path

SHIPPED_VARIABLE = "COURSE_SHIPPED_MODELS"
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "assets" / "models"
MANIFEST = SHIPPED_DIR / "shipped_models.json"  # per stage: file, sha256, what it was made from


class ShippedModelError(RuntimeError):
    pass


def wanted(profile) -> bool:
    """True if the learner set COURSE_SHIPPED_MODELS=1; an error if this profile trains another model."""
    from course_lib.profiles import EMBEDDED_MODEL

    if os.environ.get(SHIPPED_VARIABLE) != "1":
        return False
    if profile.model != EMBEDDED_MODEL:
        raise ShippedModelError(
            f"The shipped models are SmolLM2-135M-Instruct trained in the cpu profile; profile {profile.name} "
            f"trains {profile.model}. Unset {SHIPPED_VARIABLE} (e.g. `%env {SHIPPED_VARIABLE}=0`) to train it here."
        )
    return True


def shipped_checkpoint(stage: str) -> Path:
    """A plain checkpoint of the course's model after `stage`, labelled as the course's when used."""
    from course_lib.models import cache_dir, embedded_checkpoint

    entry = json.loads(MANIFEST.read_text())[stage]
    difference = SHIPPED_DIR / entry["file"]
    if not difference.is_file() or hashlib.sha256(difference.read_bytes()).hexdigest() != entry["sha256"]:
        raise ShippedModelError(
            f"{difference} is {'damaged' if difference.is_file() else 'missing'}: restore it with "
            f"`git checkout -- {difference.relative_to(SHIPPED_DIR.parent.parent)}`, or unset "
            f"{SHIPPED_VARIABLE} and train this stage yourself ({entry['made_by']} makes it)."
        )
    target = cache_dir() / "shipped" / f"{difference.stem}-{entry['sha256'][:12]}"
    if not (target / "model.safetensors").is_file():
        start = shipped_checkpoint(entry["starts_from"]) if entry["starts_from"] else embedded_checkpoint()
        _rebuild(start, difference, target)
    print(
        f"{stage}: the course's own model ({entry['made_from']}), rebuilt from {difference.name}, not trained "
        f"here. It plays {entry['how_it_plays']}."
    )
    return target


def _rebuild(start: Path, difference: Path, target: Path) -> None:
    """start + difference, saved as a checkpoint beside copies of start's config and tokenizer files."""
    from safetensors.torch import load_file, save_file

    weights, changes = load_file(start / "model.safetensors"), load_file(difference)
    for name in weights:
        if f"{name}.up" in changes:  # a matrix's change as up @ down (rank r)
            change = changes[f"{name}.up"].float() @ changes[f"{name}.down"].float()
        elif name in changes:  # a vector's change (norm weights), whole
            change = changes[name].float()
        else:
            continue
        weights[name] = (weights[name].float() + change).to(weights[name].dtype)
    partial = target.with_name(target.name + ".partial")  # never leave a half-written checkpoint
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(start, partial, ignore=shutil.ignore_patterns("model.safetensors", "log_history.json"))
    save_file(weights, partial / "model.safetensors", metadata={"format": "pt"})
    log = difference.with_suffix(".log_history.json")  # the training curve, for notebook 10
    if log.is_file():
        shutil.copy(log, partial / "log_history.json")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
