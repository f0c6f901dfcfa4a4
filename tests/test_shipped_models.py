"""The course's own trained models, shipped small: rebuilt right, chosen only on request, damage named."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from course_lib import grpo, sft, shipped_models
from course_lib.profiles import PROFILES


@pytest.fixture
def chosen(monkeypatch, tmp_path):
    """A learner who ran no training notebook here and chose the shipped models."""
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv(shipped_models.SHIPPED_VARIABLE, "1")


def expert_answer_loss(checkpoint) -> float:
    """Mean loss on the expert's answers of one shipped SFT game, in the format SFT trains (the tokens of its loss
    mask)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(checkpoint).eval()
    messages = sft.in_answer_format(sft.load_dataset().select(range(1)), PROFILES["cpu"].answer_format)[0]["messages"]
    rendered = tokenizer.apply_chat_template(
        messages,
        chat_template=sft.training_chat_template(tokenizer),
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    ids = torch.tensor([rendered["input_ids"]])
    labels = torch.where(torch.tensor([rendered["assistant_masks"]]).bool(), ids, -100)
    with torch.no_grad():
        return model(input_ids=ids, labels=labels).loss.item()


def test_notebook_09_starts_from_the_course_sft_model_without_training(chosen, monkeypatch):
    monkeypatch.setattr(sft, "build_sft_trainer", lambda *a, **k: pytest.fail("trained although shipped was chosen"))
    start = sft.checkpoint_or_train(PROFILES["smoke"])
    assert start.parent.name == "shipped" and (start / "config.json").is_file()
    # The rebuilt model answers like the SFT model, not like the base model (a wrong sign or a
    # missing change would not): on move-only answers the rebuilt SFT model's loss is about 0.06, the base's 0.59.
    from course_lib.models import embedded_checkpoint

    assert expert_answer_loss(start) < 0.2 < 0.4 < expert_answer_loss(embedded_checkpoint())


def test_notebook_10_compares_the_course_models_for_stages_not_run_here(chosen):
    stages = grpo.training_stages(PROFILES["smoke"])
    assert list(stages) == ["base model", "after SFT", "after GRPO"]
    assert "after_grpo" in stages["after GRPO"] and "after_sft" in stages["after SFT"]
    # notebook 10 draws SFT's curve from the log its checkpoint carries ("no log" before), GRPO's from the run's
    assert any("loss" in row for row in json.loads((Path(stages["after SFT"]) / "log_history.json").read_text()))
    from course_lib.sweeps import EVERY_CELL_RUN

    assert not (Path(stages["after GRPO"]).parent / "steps.csv").is_file() and (EVERY_CELL_RUN / "steps.csv").is_file()


def test_without_the_choice_nothing_shipped_is_used(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path))
    monkeypatch.delenv(shipped_models.SHIPPED_VARIABLE, raising=False)
    assert list(grpo.training_stages(PROFILES["smoke"])) == ["base model"]


def test_a_damaged_or_missing_file_is_named_with_the_notebook_that_makes_the_model(monkeypatch, tmp_path):
    copy = tmp_path / "models"
    shutil.copytree(shipped_models.SHIPPED_DIR, copy)
    monkeypatch.setattr(shipped_models, "SHIPPED_DIR", copy)
    monkeypatch.setattr(shipped_models, "MANIFEST", copy / shipped_models.MANIFEST.name)
    damaged = copy / "after_sft.safetensors"
    data = bytearray(damaged.read_bytes())
    data[-1] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with pytest.raises(shipped_models.ShippedModelError, match=r"after_sft\.safetensors is damaged.*notebook 08"):
        shipped_models.shipped_checkpoint("after SFT")
    damaged.unlink()
    with pytest.raises(shipped_models.ShippedModelError, match=r"after_sft\.safetensors is missing.*notebook 08"):
        shipped_models.shipped_checkpoint("after SFT")


def test_a_profile_that_trains_another_model_is_told_so(monkeypatch):
    monkeypatch.setenv(shipped_models.SHIPPED_VARIABLE, "1")
    with pytest.raises(shipped_models.ShippedModelError, match="Unset COURSE_SHIPPED_MODELS"):
        shipped_models.wanted(PROFILES["gpu"])
