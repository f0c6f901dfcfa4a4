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
    for name, value in smoke.as_table().items():
        if isinstance(value, int):
            assert value <= cpu.as_table()[name], name


def test_output_dir_is_per_profile_and_overridable(monkeypatch, tmp_path):
    monkeypatch.setenv(profiles.OUTPUT_DIR_VARIABLE, str(tmp_path / "out"))
    assert profiles.output_dir() == tmp_path / "out"
    assert (tmp_path / "out").is_dir()
    monkeypatch.delenv(profiles.OUTPUT_DIR_VARIABLE)
    assert profiles.output_dir(profiles.PROFILES["cpu"]).name == "cpu"


def test_a_setting_changes_its_stage_only():
    cpu = profiles.PROFILES["cpu"]
    steps = cpu.grpo.max_steps
    changed = cpu.with_settings(**{"grpo.max_steps": steps + 3, "max_concurrent": 8})
    assert (changed.grpo.max_steps, changed.max_concurrent) == (steps + 3, 8)
    assert changed.grpo.learning_rate == cpu.grpo.learning_rate and changed.eval == cpu.eval
    assert cpu.grpo.max_steps == steps  # profiles are frozen: the original is unchanged


def test_an_unknown_setting_names_the_known_ones():
    with pytest.raises(ValueError, match="grpo.max_steps"):
        profiles.PROFILES["cpu"].with_settings(**{"grpo.max_step": 3})


def test_sft_micro_batches_add_up_to_the_batch():
    """Catches: a micro batch that does not divide the SFT batch (the effective batch would silently
    shrink: 8 conversations in micro batches of 3 accumulate to 6)."""
    for profile in profiles.PROFILES.values():
        micro = min(profile.sft.batch_size, profile.sft.micro_batch_size)
        assert profile.sft.batch_size % micro == 0, profile.name


def test_grpo_micro_batches_split_every_step():
    """Catches: a profile whose GRPO step does not split into its micro-batches (grpo_config refuses it), for
    notebook 09's run and notebook 11's comparison (the cpu profile's micro-batch of 64 once broke 11 in cpu only)."""
    from course_lib.environment_factory import comparison_profile

    for profile in profiles.PROFILES.values():
        for run in (profile, comparison_profile(profile)):
            rollouts = run.grpo.prompts_per_step * run.grpo.num_generations
            assert rollouts % run.grpo.micro_batch_size == 0, (profile.name, rollouts, run.grpo.micro_batch_size)
