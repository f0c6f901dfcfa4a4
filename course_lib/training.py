"""The helpers every trainer of the course shares: SFT (sft.py) and GRPO (grpo.py,
environment_factory.py) log their curves and set up LoRA the same way, from here.

- `experiment_logging(run_name)`: TRL's logger settings (trackio when COURSE_TRACKIO=1, else none).
- `lora_config(use_lora, rank)`: LoRA adapters on every linear layer, or None for full fine-tuning.
- `can_share_prefix(model)` / `shared_prefix_cache(model, prefix, rows)`: a prefix that many rows start with, run
  once, its keys and values ready for every row with their gradient (GRPO's groups, the every-cell loss's system
  prompt), where the model can share them (not under gradient checkpointing, not LFM2's convolution layers).
"""

import importlib.util
import os
from datetime import datetime

TRACKIO_PROJECT = "llm-rl-environments"


def experiment_logging(run_name: str, report_to: str | None = None) -> dict:
    """TRL's logger settings: none, unless COURSE_TRACKIO=1 and trackio is installed (local, no account: its
    dashboard is `trackio show --project llm-rl-environments`). Off by default because trackio embeds its live
    dashboard in a notebook, with a write token in its address, and the notebooks draw their own figures.
    `report_to`, the caller's own choice (a dev script's "none"), is kept and nothing is printed."""
    if report_to is not None:
        return dict(report_to=report_to)
    if os.environ.get("COURSE_TRACKIO") != "1" or importlib.util.find_spec("trackio") is None:
        return dict(report_to="none")
    print(f"Curves also go to trackio: run `trackio show --project {TRACKIO_PROJECT}` to see them in a browser.")
    started = datetime.now().strftime("%m%d-%H%M")  # one run per training, not one growing curve per name
    return dict(report_to="trackio", project=TRACKIO_PROJECT, run_name=f"{run_name}-{started}")


def lora_config(use_lora: bool, rank: int = 16):
    """LoRA adapters on every linear layer (alpha = 2 x rank), or None: full fine-tuning."""
    if not use_lora:
        return None
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")


def can_share_prefix(model) -> bool:
    """Whether `shared_prefix_cache` works for `model` (under a LoRA or a distributed wrapper, its base model):
    not with gradient checkpointing, which makes transformers drop the cache (the GPU path), and only for models
    whose cache is one plain (keys, values) pair per layer (`local_model.PREFIX_CACHE_MODEL_TYPES`: not LFM2,
    whose convolution layers keep no keys)."""
    from course_lib.local_model import PREFIX_CACHE_MODEL_TYPES

    base = getattr(model, "module", model)  # accelerate's DistributedDataParallel
    base = base.get_base_model() if hasattr(base, "get_base_model") else base
    checkpointing = getattr(base, "is_gradient_checkpointing", False)
    return not checkpointing and getattr(base.config, "model_type", None) in PREFIX_CACHE_MODEL_TYPES


def shared_prefix_cache(model, prefix, rows: int, **kwargs):
    """Run `prefix` (1-D token ids) once and return a cache holding its keys and values for `rows` rows, still
    attached to the graph, so the gradient through them sums over the rows as if each had run the prefix. Only
    where `can_share_prefix(model)`."""
    from transformers import DynamicCache

    head = model(input_ids=prefix[None], use_cache=True, **kwargs)
    cache = DynamicCache()
    for index, layer in enumerate(head.past_key_values.layers):
        cache.update(layer.keys.expand(rows, -1, -1, -1), layer.values.expand(rows, -1, -1, -1), index)
    return cache
