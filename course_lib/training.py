"""The helpers every trainer of the course shares: SFT (sft.py) and GRPO (grpo.py,
environment_factory.py) log their curves and set up LoRA the same way, from here.

- `experiment_logging(run_name)`: TRL's logger settings (trackio where installed, else none).
- `lora_config(use_lora, rank)`: LoRA adapters on every linear layer, or None for full fine-tuning.
"""

import importlib.util
import os
from datetime import datetime

TRACKIO_PROJECT = "llm-rl-environments"


def experiment_logging(run_name: str, report_to: str | None = None) -> dict:
    """TRL's logger settings: trackio where it is installed (local, no account: its dashboard is
    `trackio show --project llm-rl-environments`), else none; COURSE_TRACKIO=0 turns it off.
    `report_to`, the caller's own choice (a dev script's "none"), is kept and nothing is printed."""
    if report_to is not None:
        return dict(report_to=report_to)
    if os.environ.get("COURSE_TRACKIO") == "0" or importlib.util.find_spec("trackio") is None:
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
