"""Notebooks 09 and 10 opened alone, on an output folder where notebooks 08 and 09 never ran: they
say so, and never train or evaluate another model in the missing one's place."""

import types

import pytest

from course_lib import grpo, sft, train_grpo
from course_lib.profiles import PROFILES

SMOKE = PROFILES["smoke"]


@pytest.fixture
def fresh_output(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setattr("course_lib.models.resolve_model", lambda profile=None: "/models/base")
    return tmp_path


def make_checkpoint(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")


def test_09_alone_trains_notebook_08s_model_first(fresh_output, monkeypatch):
    """Catches: GRPO silently starting from the base model when 08's checkpoint is missing."""
    calls = []
    trainer = types.SimpleNamespace(train=lambda: calls.append("train"))
    monkeypatch.setattr(
        sft, "build_sft_trainer", lambda profile, data, base, out: calls.append(("build", data, base)) or trainer
    )
    monkeypatch.setattr(sft, "training_dataset", lambda profile: f"08's games in {profile.answer_format}")
    monkeypatch.setattr(sft, "save_final", lambda t, path, base: calls.append(("save", path)) or make_checkpoint(path))
    monkeypatch.setattr(sft, "release", lambda t: calls.append("release"))
    final = sft.checkpoint_or_train(SMOKE)
    assert final == fresh_output / "sft" / "final" and (final / "config.json").is_file()
    built = ("build", "08's games in move", "/models/base")  # notebook 08's data, in the profile's answer format
    assert calls == [built, "train", ("save", final), "release"]  # freed before GRPO loads


def test_09_alone_message_names_notebook_08(fresh_output, monkeypatch, capsys):
    monkeypatch.setattr(sft, "build_sft_trainer", lambda *a: types.SimpleNamespace(train=lambda: None))
    monkeypatch.setattr(sft, "training_dataset", lambda profile: None)
    monkeypatch.setattr(sft, "save_final", lambda t, path, base: make_checkpoint(path))
    monkeypatch.setattr(sft, "release", lambda t: None)
    sft.checkpoint_or_train(SMOKE)
    out = capsys.readouterr().out
    assert "No SFT checkpoint at" in out and "08_sft_warmup.ipynb" in out and str(sft.DATA_DIR) in out


def test_09_after_08_uses_its_checkpoint_without_training(fresh_output, monkeypatch):
    make_checkpoint(fresh_output / "sft" / "final")
    monkeypatch.setattr(sft, "build_sft_trainer", lambda *a: pytest.fail("trained although 08's model exists"))
    assert sft.checkpoint_or_train(SMOKE) == fresh_output / "sft" / "final"


def test_07s_games_are_the_training_data_when_07_ran(fresh_output):
    assert sft.training_data_dir(SMOKE) == sft.DATA_DIR
    (fresh_output / "tictactoe_sft").mkdir()
    (fresh_output / "tictactoe_sft" / sft.GAMES_FILE).write_text("")
    assert sft.training_data_dir(SMOKE) == fresh_output / "tictactoe_sft"


def test_grpo_script_without_08s_checkpoint_stops_with_what_to_run(fresh_output):
    with pytest.raises(SystemExit, match="run notebook 08 .08_sft_warmup.ipynb. first, or pass --model"):
        train_grpo.default_model(SMOKE)
    make_checkpoint(fresh_output / "sft" / "final")
    assert train_grpo.default_model(SMOKE) == str(fresh_output / "sft" / "final")


def test_10_alone_compares_only_the_models_that_exist_and_names_the_missing_notebooks(fresh_output, capsys):
    """Catches: notebook 10 evaluating a stand-in (or the base model) under the name of a missing stage."""
    assert grpo.training_stages(SMOKE) == {"base model": "/models/base"}
    out = capsys.readouterr().out
    assert "after SFT: missing" in out and "Run 08_sft_warmup.ipynb first" in out
    assert "after GRPO: missing" in out and "Run 09_grpo_training.ipynb first" in out


def test_10_after_08_and_09_has_every_stage(fresh_output, capsys):
    make_checkpoint(fresh_output / "sft" / "final")
    make_checkpoint(fresh_output / "grpo" / "final")
    assert grpo.training_stages(SMOKE) == {
        "base model": "/models/base",
        "after SFT": str(fresh_output / "sft" / "final"),
        "after GRPO": str(fresh_output / "grpo" / "final"),
    }
    assert "missing" not in capsys.readouterr().out
