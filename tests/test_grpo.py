"""GRPO wiring: configs per profile, stratified batches through TRL's sampler, two real steps."""

import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from course_lib import grpo, rollout_bridge
from course_lib.models import resolve_model
from course_lib.profiles import PROFILES, get_profile
from course_lib.scripted_client import scripted_answer
from tictactoe.game import read_board


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_builds_a_config_with_its_rollouts_per_step(name, tmp_path):
    profile = PROFILES[name]
    config = grpo.grpo_config(profile, tmp_path, [1.0, 0.2, -0.1])
    assert config.per_device_train_batch_size * config.gradient_accumulation_steps == (
        profile.grpo.prompts_per_step * profile.grpo.num_generations
    )
    assert config.num_generations == profile.grpo.num_generations
    assert (config.loss_type, config.scale_rewards, config.shuffle_dataset) == ("dapo", "none", False)
    assert config.use_vllm == bool(profile.grpo.vllm_mode)


def test_full_profile_launch_files_load():
    accelerate = yaml.safe_load((Path(grpo.__file__).parent / "configs" / "accelerate_full.yaml").read_text())
    assert accelerate["distributed_type"] == "MULTI_GPU" and accelerate["num_processes"] >= 1
    assert PROFILES["full"].grpo.vllm_mode == "server"
    help_text = subprocess.run(
        [sys.executable, "-m", "course_lib.train_grpo", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "accelerate launch" in help_text


def tiny_copy_of_the_embedded_model(path: Path) -> str:
    """The embedded model's architecture and tokenizer at a 2-layer, 64-wide size, randomly
    initialised: TRL's steps run in seconds instead of minutes (notebook 09 runs the real model)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    embedded = resolve_model(get_profile("smoke"))
    config = AutoConfig.from_pretrained(embedded)
    config.update(
        dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
        )
    )
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    AutoTokenizer.from_pretrained(embedded).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def smoke_trainer(tmp_path_factory):
    profile = get_profile("smoke").with_settings(**{"grpo.prompts_per_step": 2})  # two buckets: stratification can fail
    env = grpo.full_game_environment(profile)
    stats = {}
    model = tiny_copy_of_the_embedded_model(tmp_path_factory.mktemp("tiny_model"))
    trainer = grpo.build_grpo_trainer(profile, env, model, tmp_path_factory.mktemp("grpo"), stats, save_strategy="no")
    return profile, env, trainer, stats


def test_every_generation_batch_spans_every_opponent_skill_bucket(smoke_trainer):
    """TRL's own sampler must keep the environment's stratified blocks (shuffle off)."""
    profile, env, trainer, _ = smoke_trainer
    buckets = [row["info"]["bucket"] for row in env.get_dataset()]
    batch = profile.grpo.prompts_per_step * profile.grpo.num_generations
    indices = list(itertools.islice(iter(trainer._get_train_sampler(trainer.train_dataset)), 4 * batch))
    for start in range(0, len(indices), batch):
        chunk = indices[start : start + batch]
        assert sorted({buckets[i] for i in chunk}) == list(range(profile.grpo.prompts_per_step))
        # each prompt appears num_generations times in a row: one group
        assert all(
            len(set(chunk[g : g + profile.grpo.num_generations])) == 1
            for g in range(0, batch, profile.grpo.num_generations)
        )


def test_two_grpo_steps_on_groups_whose_rewards_differ_change_the_weights(smoke_trainer, monkeypatch):
    """Real TRL steps (on a tiny copy of the embedded model). The first rollout of each group plays
    the scripted expert and the second answers nonsense, so every group has reward spread."""
    profile, env, trainer, stats = smoke_trainer
    tokenizer = trainer.processing_class

    def expert_or_nonsense(prompts, sampling):
        results = []
        for i, ids in enumerate(prompts):
            board = read_board(tokenizer.decode(ids).rsplit("<|im_start|>user", 1)[-1])
            text = scripted_answer(board, "expert", random.Random(i)) if i % 2 == 0 else "I pass."
            out = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            results.append((out, [0.0] * len(out)))
        return results

    rollout_func = rollout_bridge.make_rollout_func(
        env, env.get_dataset(), tokenizer, lambda _: expert_or_nonsense, profile.grpo.max_tokens_per_turn, stats
    )
    monkeypatch.setattr(trainer, "rollout_func", rollout_func)
    # the weights training changes: all of them, or the LoRA adapters (the smoke profile's, like cpu's)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    logs = [row for row in trainer.state.log_history if "loss" in row]
    assert len(logs) == 2
    assert all(row["frac_reward_zero_std"] == 0.0 for row in logs)
    assert all(row["rewards/any_invalid_move/mean"] == 0.5 for row in logs)  # the nonsense half
    changed = [
        name
        for name, p in trainer.model.named_parameters()
        if name in before and not (p.detach() == before[name]).all()
    ]
    assert len(changed) > 0.9 * len(before)
    json.dumps(trainer.state.log_history)  # the notebook saves it
    # Catches: a step split whose parts do not add up to the step, or that misses a step.
    split = grpo.step_split(stats)
    assert list(split.index) == [1, 2] and (split >= 0).all().all()
    parts = split[["generation", "environment", "forward + backward", "optimizer"]].sum(axis=1)
    assert (abs(parts - split["step (s)"]) <= 0.2).all() and (split["forward + backward"] > 0).all()


def padded_micro_batch():
    """Two episodes of 4 and 7 completion tokens, padded (as TRL pads a step) to 12; the second has
    environment tokens (tool_mask 0) at 2-3."""
    import torch

    ids = torch.randint(100, 1000, (2, 17), generator=torch.Generator().manual_seed(0))
    completion_mask = torch.zeros(2, 12, dtype=torch.long)
    completion_mask[0, :4], completion_mask[1, :7] = 1, 1
    tool_mask = torch.ones(2, 12, dtype=torch.long)
    tool_mask[1, 2:4] = 0
    return {
        "prompt_ids": ids[:, :5],
        "prompt_mask": torch.ones(2, 5, dtype=torch.long),
        "completion_ids": ids[:, 5:],
        "completion_mask": completion_mask,
        "tool_mask": tool_mask,
        "sampling_per_token_logps": torch.full((2, 12), -1.0),
        "importance_sampling_ratio": torch.ones(2, 1),
        "advantages": torch.tensor([1.0, -0.5]),
        "num_items_in_batch": (completion_mask * tool_mask).sum(),
    }


def test_a_micro_batch_loses_only_the_padding_columns_none_of_its_episodes_uses():
    """Catches: a trim that cuts a real token (the longer episode's last), keeps the step's padding,
    touches the prompt, or cuts a per-episode tensor that happens to be 2-D."""
    inputs = padded_micro_batch()
    trimmed = grpo.without_unused_padding(inputs)
    for key in ("completion_ids", "completion_mask", "tool_mask", "sampling_per_token_logps"):
        assert (trimmed[key] == inputs[key][:, :7]).all(), key
    for key in ("prompt_ids", "prompt_mask", "importance_sampling_ratio", "advantages", "num_items_in_batch"):
        assert trimmed[key] is inputs[key], key


def test_the_trainer_computes_the_same_loss_on_fewer_columns(smoke_trainer, monkeypatch):
    """Catches: the course's trainer scoring the padding again (the model sees 17 columns), or a
    trim that changes the loss TRL computes on the padded micro-batch."""
    import torch
    from trl import GRPOTrainer

    _, _, trainer, _ = smoke_trainer
    monkeypatch.setattr(trainer, "current_gradient_accumulation_steps", 1, raising=False)
    monkeypatch.setattr(trainer.args, "report_to", [])  # outside train(), TRL's timers would log to a closed run
    widths = []
    hook = trainer.model.register_forward_pre_hook(
        lambda _, args, kwargs: widths.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        with torch.no_grad():
            trimmed = trainer.compute_loss(trainer.model, padded_micro_batch())
            padded = GRPOTrainer.compute_loss(trainer, trainer.model, padded_micro_batch())
    finally:
        hook.remove()
    assert widths == [5 + 7, 5 + 12]
    torch.testing.assert_close(trimmed, padded)


def test_sweep_settings_take_the_field_type_and_unknown_fields_stop_with_the_list():
    """Catches: a --set value kept as a string (a learning rate "2e-5" reaching the optimizer), a
    boolean read as truthy text, or a misspelt field silently ignored."""
    from course_lib.train_grpo import with_settings

    profile = get_profile("smoke")
    changed = with_settings(profile, ["grpo.learning_rate=2e-5", "grpo.max_steps=7", "grpo.use_lora=false"])
    assert (changed.grpo.learning_rate, changed.grpo.max_steps, changed.grpo.use_lora) == (2e-5, 7, False)
    assert with_settings(profile, ["grpo.use_lora=true"]).grpo.use_lora is True
    with pytest.raises(SystemExit, match="grpo.learning_rate"):
        with_settings(profile, ["grpo_learnig_rate=1"])


def test_on_cpu_trl_trainers_score_only_the_trained_tokens_with_the_same_log_probs(tmp_path, monkeypatch):
    """Catches: TRL's fused LM head scoring the prompt and the environment's replies on CPU too (a
    fifth of a training step's time), or the switch changing log-probabilities (e.g. a TRL upgrade
    that moves it: then the spy sees every position again)."""
    import torch
    import trl.kernels.chunked_logprob as kernels
    import trl.trainer.utils as trl_utils
    from transformers import AutoModelForCausalLM

    from course_lib.hardware import score_answer_tokens_only_on_cpu

    model = AutoModelForCausalLM.from_pretrained(tiny_copy_of_the_embedded_model(tmp_path))
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    ids = torch.randint(0, model.config.vocab_size, (2, 40), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(ids, -100)
    labels[:, 10:15], labels[:, 30:36] = ids[:, 10:15], ids[:, 30:36]  # two answers; the rest is prompt and replies
    scored, kernel = [], trl_utils._ChunkedLogProbFunction

    class Spy:
        @staticmethod
        def apply(hidden, *args):
            scored.append(hidden.shape[0])
            return kernel.apply(hidden, *args)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Spy)
    monkeypatch.setattr(trl_utils, "_use_triton", kernels._use_triton)  # TRL's own switch, unpatched
    every_position = model(input_ids=ids, labels=labels, fused_lm_head=True).log_probs
    score_answer_tokens_only_on_cpu()
    answers_only = model(input_ids=ids, labels=labels, fused_lm_head=True).log_probs
    assert scored == [2 * 39, 2 * 11]
    torch.testing.assert_close(answers_only, every_position)


def test_on_cpu_both_trainers_switch_to_scoring_the_trained_tokens_only(tmp_path, monkeypatch):
    """Catches: SFT or GRPO built on CPU without the switch (each would score every position)."""
    import torch
    import trl.kernels.chunked_logprob as kernels
    import trl.trainer.utils as trl_utils

    from course_lib import sft

    model = tiny_copy_of_the_embedded_model(tmp_path / "model")
    profile = get_profile("smoke")
    for build in (
        lambda: sft.build_sft_trainer(profile, sft.load_dataset().select(range(2)), model, tmp_path / "sft"),
        lambda: grpo.build_grpo_trainer(profile, grpo.full_game_environment(profile), model, tmp_path / "grpo"),
    ):
        monkeypatch.setattr(trl_utils, "_use_triton", kernels._use_triton)
        assert not trl_utils._use_triton(torch.device("cpu"))
        build()
        assert trl_utils._use_triton(torch.device("cpu"))


def fake_log(step: int) -> dict:
    """One logged GRPO step with every column the curves read."""
    won = step / 10
    return {
        "step": step,
        "reward": 0.4 + 0.05 * step,
        "reward_std": 0.3,
        "rewards/won/mean": won,
        "rewards/drew/mean": 0.2,
        "rewards/lost/mean": 0.8 - won,
        "rewards/invalid_moves/mean": 0.1,
        "frac_reward_zero_std": 0.0,
        "completions/mean_length": 140.0,
    }


def test_training_curves_draw_every_panel_from_the_log_and_skip_rows_without_rewards():
    """Catches: a curve reading a column TRL does not log (an empty panel), or the final summary row
    (no reward) plotted as a step."""
    history = [fake_log(step) for step in (1, 2, 3)] + [{"step": 3, "train_runtime": 10.0}]
    fig = grpo.training_curves(history, "test")
    drawn = [ax for ax in fig.axes if ax.lines]
    assert [ax.get_title() for ax in drawn] == [
        grpo.CURVES[c]
        for c in ("reward", "outcomes", "rewards/invalid_moves/mean", "frac_reward_zero_std", "completions/mean_length")
    ]
    assert all(len(line.get_xdata()) == 3 for ax in drawn for line in ax.lines)
    fig.canvas.draw()
    assert all(tick == int(tick) for ax in drawn for tick in ax.get_xticks())  # steps, not 1.5 or 2.5


def test_training_curves_of_single_moves_draw_what_a_move_logs():
    """Catches: a per-move run drawn with the full game's panels (outcomes it never logs, empty)."""
    history = [
        {
            "step": step,
            "reward": 0.5,
            "reward_std": 0.2,
            "rewards/optimal/mean": 0.3,
            "rewards/legal/mean": 0.9,
            "frac_reward_zero_std": 0.1,
            "completions/mean_length": 30.0,
        }
        for step in (1, 2)
    ]
    fig = grpo.training_curves(history, "moves")
    assert [ax.get_title() for ax in fig.axes if ax.lines] == [
        grpo.CURVES[c]
        for c in (
            "reward",
            "rewards/optimal/mean",
            "rewards/legal/mean",
            "frac_reward_zero_std",
            "completions/mean_length",
        )
    ]


def test_live_curves_redraw_one_display_and_a_resumed_run_starts_with_its_first_part(monkeypatch):
    """Catches: one new figure per step (a wall of plots), or a resumed run's curves that forget the
    steps before the interruption."""
    from types import SimpleNamespace

    import IPython.display

    shown = []

    class Handle:
        def update(self, fig):
            shown.append(("update", len(fig.axes[0].lines[0].get_xdata())))

    def display(fig, display_id=False):
        shown.append(("display", len(fig.axes[0].lines[0].get_xdata())))
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    live = grpo.LiveCurves("test")
    state = SimpleNamespace(log_history=[fake_log(1), fake_log(2)], global_step=2)
    live.on_train_begin(None, state, None)  # resumed after step 2
    for step in (3, 4):
        state.global_step = step
        live.on_log(None, state, None, logs={k: v for k, v in fake_log(step).items() if k != "step"})
    live.on_log(None, state, None, logs={"train_runtime": 1.0})  # the summary row: no redraw
    assert shown == [("display", 3), ("update", 4)]


def test_the_sweep_table_reads_the_rows_train_grpo_writes(tmp_path):
    """Catches: the table reading a column name that train_grpo no longer writes, or intervals
    computed over one opponent's games when the metric pools both."""
    import pandas as pd

    from course_lib.sweeps import sweep_table

    row = {"run": "a", "settings": "grpo.learning_rate=2e-5", "training minutes": 30.0, "games per opponent": 100}
    for outcome in ("win", "loss", "non-loss"):
        for opponent in ("random", "optimal", "both"):
            row |= {f"{outcome} vs {opponent}: start": 0.5, f"{outcome} vs {opponent}: after": 0.6}
            row[f"{outcome} vs {opponent}: p"] = 0.04
    for opponent in ("random", "optimal"):
        row |= {f"invalid per answer vs {opponent}: start": 0.08, f"invalid per answer vs {opponent}: after GRPO": 0.04}
    pd.DataFrame([row]).to_csv(tmp_path / "sweep.csv", index=False)
    table = sweep_table(tmp_path / "sweep.csv")
    assert table.loc[0, "settings"] == "learning_rate=2e-5"
    assert table.loc[0, "non-losses, after"] == "60% [53%, 67%]"  # 120 of 200 games
    assert table.loc[0, "invalid answers vs random / optimal"] == "8.0% / 8.0% -> 4.0% / 4.0%"
    assert table.loc[0, "losses vs random"] == "50% -> 60% (p 0.04)"


def test_the_recorded_sweep_has_a_row_a_log_and_games_for_every_run():
    """Catches: a run committed to sweep.csv without its training log or games (notebooks 09 and 10
    read both), or a log that stops before the run's last step."""
    import pandas as pd

    from course_lib.sweeps import RECORDED_SWEEP, sweep_histories, sweep_table

    table = sweep_table(RECORDED_SWEEP / "sweep.csv")
    assert len(table) >= 4
    for run, history in sweep_histories(RECORDED_SWEEP).items():
        steps = [row["step"] for row in history if "reward" in row]
        settings = dict(s.split("=") for s in table.set_index("run").loc[run, "settings"].split())
        assert steps == list(range(1, int(settings["max_steps"]) + 1)), run
        games = pd.read_csv(RECORDED_SWEEP / run / "eval_games.csv")
        assert set(games["player"]) == {"start", "after GRPO"}
        assert len(games) == 2 * 2 * 100  # two models, two opponents, 100 games each


def test_the_cpu_profile_trains_with_the_settings_of_its_recorded_run():
    """Catches: the cpu profile's GRPO settings drifting from the recorded per-move run that notebooks 09
    and 10 show as its result."""
    import pandas as pd

    from course_lib.profiles import get_profile
    from course_lib.sweeps import CPU_RECIPE_RUN, MOVES_SWEEP
    from course_lib.train_grpo import with_settings

    runs = pd.read_csv(MOVES_SWEEP / "sweep.csv").set_index("run")
    cpu = get_profile("cpu")
    environment, recorded = runs.loc[CPU_RECIPE_RUN, "settings"].split(maxsplit=2)[1:]
    assert environment == "moves"
    assert with_settings(cpu, recorded.split()) == cpu
    # what the run did not set: the cpu profile's values when it ran
    unset = (cpu.grpo.temperature, cpu.grpo.max_tokens_per_turn, cpu.grpo.position_games, cpu.grpo.prompts_per_step)
    assert unset == (1.0, 56, 128, 8)
    played = pd.read_csv(MOVES_SWEEP / CPU_RECIPE_RUN / "eval_games.csv").groupby(["player", "opponent"]).size()
    assert set(played) == {100}


def test_the_notebook_progress_bar_survives_a_run_stopped_early(tmp_path):
    """Catches: notebook 09's interrupted run (stopped at step 2 of 5) failing in transformers'
    notebook progress bar (TypeError in on_train_end, transformers 5.17). The stock bar must still
    fail the same way, else the fence in grpo.py is no longer needed."""
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from transformers.utils.notebook import NotebookProgressCallback

    from course_lib.grpo import notebook_progress_that_stops_early

    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)

    def stop_at_step_2_of_5(bar):
        state, control = TrainerState(max_steps=5, num_train_epochs=1, epoch=0.4), TrainerControl()
        bar.on_train_begin(args, state, control)
        for step in (1, 2):
            state.global_step = step
            bar.on_step_end(args, state, control)
        bar.on_train_end(args, state, control)

    with pytest.raises(TypeError):
        stop_at_step_2_of_5(NotebookProgressCallback())
    stop_at_step_2_of_5(notebook_progress_that_stops_early())


def test_the_policy_copy_generates_with_the_policys_weights_lora_merged(smoke_trainer):
    """PolicyCopy takes the policy's current weights at each step, LoRA adapters merged in, and
    leaves the trained weights as they were. Catches: adapters left out (or their scale), a
    weight not copied, a copy that writes the policy's weights, a prefix cache kept across steps."""
    import torch

    _, _, trainer, _ = smoke_trainer
    policy = trainer.model
    assert type(policy).__name__.startswith("PeftModel")  # the smoke profile trains LoRA adapters, as cpu does
    trained = {name: p.detach().clone() for name, p in policy.named_parameters()}
    with torch.no_grad():  # adapters as after some training (B starts at zero: its delta would be nothing)
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(name)))
    before = {name: p.detach().clone() for name, p in policy.named_parameters()}
    try:
        copy = rollout_bridge.PolicyCopy(policy.peft_config["default"].base_model_name_or_path, 4, dtype="float32")
        copy.model.prefix_cache.entries.append(([1, 2, 3], []))  # a sequence of the previous step's weights
        generate_batch = copy(trainer)
        assert copy.model.prefix_cache.entries == []
        assert all((p.detach() == before[name]).all() for name, p in policy.named_parameters())
        ids = torch.tensor([trainer.processing_class("Your move: the centre.", add_special_tokens=False)["input_ids"]])
        policy.eval()
        with torch.no_grad():
            expected = policy(input_ids=ids).logits
            with policy.disable_adapter():
                without_adapters = policy(input_ids=ids).logits
            got = copy.model.network(input_ids=ids).logits
        assert not torch.allclose(expected, without_adapters, atol=1e-3)  # the adapters matter here
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
        [(completion, logprobs)] = generate_batch(ids.tolist(), {"max_tokens": 4, "temperature": 1.0, "top_p": 1.0})
        assert len(completion) == len(logprobs) > 0 and all(lp <= 0 for lp in logprobs)
    finally:
        policy.train()
        with torch.no_grad():
            for name, parameter in policy.named_parameters():
                parameter.copy_(trained[name])


def test_per_move_grpo_makes_the_rewarded_cell_more_likely(tmp_path, monkeypatch):
    """Direction, not only change: in each group one answer names an optimal cell and the other a cell that
    throws the game away, with the same reasoning text, so only the move differs. After three real steps
    through the bridge the policy must prefer the optimal cell more than before. Catches rewards paired
    with the wrong episodes, or an advantage with the wrong sign, which a change of weights alone does not."""
    import re

    import torch

    from tictactoe.game import best_moves, legal_moves
    from tictactoe.moves import cell_score

    profile = get_profile("smoke").with_settings(**{"grpo.max_steps": 3, "grpo.learning_rate": 1e-2})
    env = grpo.move_environment([])  # the expert's games' positions
    model = tiny_copy_of_the_embedded_model(tmp_path / "tiny_model")
    trainer = grpo.build_grpo_trainer(profile, env, model, tmp_path / "grpo", save_strategy="no")
    tokenizer = trainer.processing_class
    rows = env.get_dataset()

    def answers(board):
        optimal = scripted_answer(board, "expert", random.Random(0))
        losing = next(cell for cell in legal_moves(board) if cell_score(board, cell) == 0.0)
        assert int(re.search(r"<move>(\d)</move>", optimal).group(1)) in best_moves(board, "X")
        return optimal, re.sub(r"<move>\d</move>", f"<move>{losing}</move>", optimal)

    def board_of(ids):
        return read_board(tokenizer.decode(ids).rsplit("<|im_start|>user", 1)[-1])

    def optimal_or_losing(prompts, sampling):
        results = []
        for i, ids in enumerate(prompts):
            text = answers(board_of(ids))[i % 2]
            out = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            results.append((out, [0.0] * len(out)))
        return results

    def preference(row) -> float:
        """log p(optimal answer) - log p(losing answer) under the policy, after the row's prompt."""
        text = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
        total = 0.0
        for sign, answer in zip((1, -1), answers(board_of(prompt))):
            ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logits = trainer.model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1]
            total += sign * float(logits.log_softmax(-1).gather(1, torch.tensor(ids)[:, None]).sum())
        return total

    trained = [rows[i] for i in range(profile.grpo.max_steps * profile.grpo.prompts_per_step)]
    before = sum(preference(row) for row in trained)
    monkeypatch.setattr(
        trainer,
        "rollout_func",
        rollout_bridge.make_rollout_func(
            env, rows, tokenizer, lambda _: optimal_or_losing, profile.grpo.max_tokens_per_turn
        ),
    )
    trainer.train()
    logs = [row for row in trainer.state.log_history if "loss" in row]
    assert [row["rewards/optimal/mean"] for row in logs] == [0.5] * 3  # one of the two answers each step
    after = sum(preference(row) for row in trained)
    assert after > before + 0.1, (before, after)


def test_the_trainer_scores_a_group_under_gradient_checkpointing(smoke_trainer, monkeypatch):
    """Catches: the shared-prompt path under the GPU path's gradient checkpointing, where transformers drops the
    cache and `layer.keys` fails on the first micro-batch that is one group."""
    import torch

    _, _, trainer, _ = smoke_trainer
    monkeypatch.setattr(trainer.args, "report_to", [])  # outside train(), TRL's timers would log to a closed run
    model = trainer.model
    ids = torch.tensor([[5, 17, 3, 44, 9, 7, 8], [5, 17, 3, 44, 9, 30, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 0]])
    model.train()
    model.gradient_checkpointing_enable()
    try:
        log_probs, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, logits_to_keep=2)
    finally:
        model.gradient_checkpointing_disable()
    assert log_probs.shape == (2, 2)


def test_a_released_trainer_holds_no_reference_to_its_models(tmp_path):
    """Catches: a model kept alive after `release(trainer)` while the notebook's `trainer` variable still exists
    (by the callback handler, the vLLM generation, a reference model or the rollout function's generation copy),
    so that the next stage's server or trainer finds the GPU still full. Checked by references, not by a GPU."""
    import gc
    import weakref

    from course_lib.hardware import release
    from course_lib.sft import build_sft_trainer, load_dataset

    profile = get_profile("smoke")
    model = tiny_copy_of_the_embedded_model(tmp_path / "tiny")
    trainers = {
        "grpo": grpo.build_grpo_trainer(
            profile, grpo.full_game_environment(profile), model, tmp_path / "g", save_strategy="no", report_to="none"
        ),
        "sft": build_sft_trainer(profile, load_dataset().select(range(2)), model, tmp_path / "s", report_to="none"),
    }
    for name, trainer in trainers.items():
        held = [weakref.ref(trainer.model)]
        if name == "grpo":  # the policy's generation copy (PolicyCopy's LocalModel), held by the rollout function
            copies = [c.cell_contents for c in trainer.rollout_func.__closure__]
            held += [weakref.ref(c.model.network) for c in copies if isinstance(c, rollout_bridge.PolicyCopy)]
            assert len(held) == 2
            del copies
        release(trainer)
        gc.collect()
        alive = [ref() for ref in held if ref() is not None]
        referrers = [type(r).__name__ for obj in alive for r in gc.get_referrers(obj)]
        assert not alive, f"{name}: a model is still referenced after release, by {referrers}"
