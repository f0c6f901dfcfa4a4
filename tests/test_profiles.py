from dataclasses import fields

import pytest

from course_lib import profiles


def test_hardware_picks_profile():
    assert profiles.profile_name_for(0) == "cpu"
    assert profiles.profile_name_for(1) == "gpu"
    assert profiles.profile_name_for(4) == "full"


def test_environment_variable_forces_profile(monkeypatch):
    monkeypatch.setattr(profiles, "cuda_capability", lambda: (8, 0))  # the GPU profiles need one
    for name in profiles.PROFILES:
        monkeypatch.setenv(profiles.PROFILE_VARIABLE, name)
        assert profiles.get_profile().name == name


def test_without_variable_profile_follows_hardware(monkeypatch):
    monkeypatch.delenv(profiles.PROFILE_VARIABLE, raising=False)
    monkeypatch.setattr(profiles, "detect_hardware", lambda: {"gpus": ["A", "B"]})
    monkeypatch.setattr(profiles, "cuda_capability", lambda: (8, 0))
    assert profiles.get_profile().name == "full"


def test_unknown_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(profiles.PROFILE_VARIABLE, "turbo")
    with pytest.raises(ValueError, match="COURSE_PROFILE"):
        profiles.get_profile()


def test_profile_names_match_keys_and_cpu_profiles_use_the_embedded_model():
    for key, profile in profiles.PROFILES.items():
        assert profile.name == key
    assert profiles.PROFILES["smoke"].model == profiles.PROFILES["cpu"].model == profiles.EMBEDDED_MODEL
    assert profiles.PROFILES["gpu"].server == profiles.PROFILES["full"].server == "vllm"


def test_smoke_budgets_are_never_larger_than_cpu():
    smoke, cpu = profiles.PROFILES["smoke"], profiles.PROFILES["cpu"]
    for field in fields(profiles.Profile):
        value = getattr(smoke, field.name)
        if isinstance(value, int):
            assert value <= getattr(cpu, field.name), field.name


def test_output_dir_is_per_profile_and_overridable(monkeypatch, tmp_path):
    monkeypatch.setenv(profiles.OUTPUT_DIR_VARIABLE, str(tmp_path / "out"))
    assert profiles.output_dir() == tmp_path / "out"
    assert (tmp_path / "out").is_dir()
    monkeypatch.delenv(profiles.OUTPUT_DIR_VARIABLE)
    assert profiles.output_dir(profiles.PROFILES["cpu"]).name == "cpu"
