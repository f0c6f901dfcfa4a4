"""Tests for course_lib/sft.py: teacher data through the environment, filtering, the chat template
and its loss mask, and a real two-step SFT run (smoke profile).

Each test names the bug it would catch.
"""

import asyncio
import json
import random
from pathlib import Path

import pytest
import torch

from course_lib import hardware, sft, training
from course_lib.profiles import PROFILES, get_profile
from course_lib.scripted_client import ScriptedClient, read_board
from tictactoe import MoveParser
from tictactoe.game import WIN_LINES

EXPECTED_KEYS = {
    "messages",
    "teacher",
    "example_id",
    "game_seed",
    "model_starts",
    "random_move_prob",
    "result",
    "model_turns",
    "moves",
}


def run(coroutine):
    return asyncio.run(coroutine)


def replay_winner(moves: list[int], model_starts: bool) -> str | None:
    """The winner of a game from its cells in play order, computed without course_lib's game code."""
    board = [None] * 9
    players = ("X", "O") if model_starts else ("O", "X")
    for i, cell in enumerate(moves):
        assert board[cell] is None, f"cell {cell} played twice"
        board[cell] = players[i % 2]
        for a, b, c in WIN_LINES:
            if board[a] is not None and board[a] == board[b] == board[c]:
                return board[a]
    return "draw" if None not in board else None


def assert_good_game(row: dict) -> None:
    """A kept game: system, then user/assistant pairs, ending on the model's answer; no invalid
    move, not lost (checked by replaying the moves), every answer well formed."""
    roles = [m["role"] for m in row["messages"]]
    assert roles[0] == "system" and roles[-1] == "assistant"
    assert roles[1:] == ["user", "assistant"] * row["model_turns"]
    assert not any("Invalid move" in m["content"] for m in row["messages"] if m["role"] == "user")
    assert row["result"] in ("win", "draw")
    assert replay_winner(row["moves"], row["model_starts"]) == {"win": "X", "draw": "draw"}[row["result"]]
    parser = MoveParser()
    assert all(parser.is_well_formed(m["content"]) for m in row["messages"] if m["role"] == "assistant")


# --- The shipped dataset ---------------------------------------------------------------------


def test_shipped_dataset_schema_and_filters():
    """Catches: a lost or invalid game in the shipped data, a row without its metadata, repeated
    games, a conversation that ends on the game-over message, counts that disagree with meta.json."""
    rows = [json.loads(line) for line in (sft.DATA_DIR / sft.GAMES_FILE).read_text().splitlines()]
    meta = json.loads((sft.DATA_DIR / "meta.json").read_text())
    assert len(rows) == meta["games_kept"] == meta["games_played"] - sum(meta["dropped"].values())
    assert meta["games_played"] == get_profile("cpu").sft.num_games
    assert len(rows) >= 180  # a couple of hundred distinct games
    for row in rows:
        assert set(row) == EXPECTED_KEYS
        assert_good_game(row)
    assert len({json.dumps([row["model_starts"], row["moves"]]) for row in rows}) == len(rows)
    dataset = sft.load_dataset()
    assert dataset.num_rows == len(rows) and dataset[0]["messages"] == rows[0]["messages"]


def test_teacher_rationale_lists_exactly_the_empty_cells_of_the_board_it_answers():
    """Catches: a rationale that lists a taken cell or misses an empty one (the student would learn
    to misread the board), or a move outside the list it just wrote."""
    rows = [json.loads(line) for line in (sft.DATA_DIR / sft.GAMES_FILE).read_text().splitlines()]
    answers = 0
    for row in rows:
        messages = row["messages"]
        for question, answer in zip(messages[1::2], messages[2::2]):
            board = read_board(question["content"])
            empty = [cell for cell in range(9) if board[cell] is None]
            listed = answer["content"].split("Empty cells: ", 1)[1].split(".", 1)[0]
            assert [int(cell) for cell in listed.split()] == empty, (question["content"], answer["content"])
            assert MoveParser().judge(answer["content"], board)[0] in empty
            answers += 1
    assert answers == sum(row["model_turns"] for row in rows)


def test_shipped_dataset_is_what_the_environment_produces_now():
    """Regenerating the first games gives the shipped rows exactly.
    Catches: stale data after a change to the environment's prompts (run `python -m course_lib.sft`),
    and any randomness in the teacher's games (the data must be deterministic)."""
    outputs = run(sft.play_games(ScriptedClient("expert"), "expert", 30))
    fresh, _ = sft.build_dataset(outputs, teacher="expert (scripted)")
    shipped = sft.load_dataset()
    assert fresh == shipped.select(range(len(fresh))).to_list()


# --- Filtering -------------------------------------------------------------------------------


class SloppyExpert(ScriptedClient):
    """The expert, except that in some games it answers a taken cell once, or adds chatter."""

    def respond(self, prompt, **kwargs):
        answer = super().respond(prompt, **kwargs)
        board = read_board(prompt[-1]["content"])
        rng = random.Random(prompt[1]["content"])  # decided per game by its first message
        taken = [cell for cell in range(9) if board and board[cell] is not None]
        if taken and rng.random() < 0.3 and len(prompt) == 4:  # its second answer, in 30% of games
            return f"<move>{taken[0]}</move>"
        if rng.random() < 0.2:
            return answer + " Good luck!"
        return answer


def test_filter_drops_lost_invalid_and_badly_formatted_games():
    """Catches: a filter that lets a lost game, a game with an invalid move, or a badly formatted
    answer into the data (the random player loses; the sloppy expert plays taken cells and chats)."""
    outputs = run(sft.play_games(ScriptedClient("random"), "random", 40))
    outputs += run(sft.play_games(SloppyExpert("expert"), "sloppy", 40))
    rows, dropped = sft.build_dataset(outputs, teacher="mixed")
    assert dropped.get("lost", 0) > 0 and dropped.get("invalid move", 0) > 0
    assert dropped.get("badly formatted", 0) > 0
    assert len(rows) + sum(dropped.values()) == len(outputs)
    for row in rows:
        assert_good_game(row)
    for output in outputs:
        if output["winner"] == "O" or output["invalid_moves"] > 0:
            assert sft.rejection_reason(output) is not None


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"winner": "O"}, "lost"),
        ({"winner": None}, "unfinished"),
        ({"invalid_moves": 1}, "invalid move"),
        ({"well_formed_turns": 2}, "badly formatted"),
        ({"error": {"error": "boom"}}, "error"),
    ],
)
def test_rejection_reason(change, reason):
    """Catches: a check that is missing or reads the wrong state key."""
    good = {"error": None, "winner": "draw", "invalid_moves": 0, "well_formed_turns": 4, "model_turns": 4}
    assert sft.rejection_reason(good) is None
    assert sft.rejection_reason({**good, **change}) == reason


# --- The conversation is what the model sees -------------------------------------------------


class RecordingExpert(ScriptedClient):
    """The expert, remembering every prompt it was sent and what it answered."""

    def __init__(self):
        super().__init__("expert")
        self.calls = []

    def respond(self, prompt, **kwargs):
        answer = super().respond(prompt, **kwargs)
        self.calls.append(([{"role": m["role"], "content": m["content"]} for m in prompt], answer))
        return answer


@pytest.mark.parametrize("game", [0, 1, 2])
def test_conversation_equals_what_the_model_sees(game):
    """The SFT conversation is the last prompt the player received plus its last answer.
    Catches: a conversation built from a different prompt (another system prompt, a reformatted
    board), a dropped or extra turn, or the final game-over message left in."""
    client = RecordingExpert()
    env = sft.teacher_environment(game + 1)
    env.eval_dataset = env.eval_dataset.select([game])
    results = run(
        env.evaluate(
            client,
            "expert",
            sampling_args={},
            num_examples=-1,
            rollouts_per_example=1,
            max_concurrent=1,
            state_columns=sft.GAME_STATE_COLUMNS,
        )
    )
    output = results["outputs"][0]
    last_prompt, last_answer = client.calls[-1]
    messages = sft.game_to_messages(output)
    assert messages == last_prompt + [{"role": "assistant", "content": last_answer}]
    assert messages[0]["content"] == env.system_prompt
    assert len(output["completion"]) == len(messages) - len(output["prompt"]) + 1  # + "Game over"
    assert "Game over" in output["completion"][-1]["content"]


def tokenizer():
    from transformers import AutoTokenizer

    from course_lib.models import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(get_profile("smoke")))


def test_training_template_renders_exactly_like_the_models_own():
    """Catches: a training template that trains on a text the model never sees when served
    (a missing newline, another default system prompt), or a checkpoint without the course's template."""
    from course_lib.models import CHAT_TEMPLATE, TRAINING_CHAT_TEMPLATE

    tok = tokenizer()
    assert tok.chat_template == CHAT_TEMPLATE
    assert sft.training_chat_template(tok) == TRAINING_CHAT_TEMPLATE
    rows = sft.load_dataset().select(range(5)).to_list()
    for messages in [row["messages"] for row in rows] + [rows[0]["messages"][1:]]:  # also without a system prompt
        for cut in (len(messages), 2):
            for generation_prompt in (False, True):
                kwargs = dict(tokenize=False, add_generation_prompt=generation_prompt)
                training = tok.apply_chat_template(messages[:cut], chat_template=TRAINING_CHAT_TEMPLATE, **kwargs)
                assert training == tok.apply_chat_template(messages[:cut], **kwargs)


# --- Training (smoke profile) ----------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two real SFT steps on two games, as notebook 08 does them; short sequences keep it fast."""
    from course_lib.models import resolve_model

    profile = get_profile("smoke")
    base = resolve_model(profile)
    dataset = sft.load_dataset().select(range(2))
    out = tmp_path_factory.mktemp("sft")
    trainer = sft.build_sft_trainer(
        profile,
        dataset,
        base,
        out,
        max_steps=2,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=1,
        max_length=320,
        disable_tqdm=True,
    )
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    final = sft.save_final(trainer, out / "final", base)
    return trainer, before, final, dataset, base


def test_label_mask_trains_only_the_assistants_tokens(trained):
    """The labels the trainer uses are -100 everywhere except the assistant's answers and their
    <|im_end|>. Catches: training on the system prompt and boards (no generation markers), or an
    answer whose end-of-turn token is not trained (the model would never learn to stop)."""
    trainer, _, _, dataset, _ = trained
    tok = trainer.processing_class
    full = tok.apply_chat_template(
        dataset[0]["messages"],
        chat_template=sft.training_chat_template(tok),
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    example = trainer.train_dataset[0]
    ids, labels = example["input_ids"], example["labels"]
    assert ids == full["input_ids"][: len(ids)]  # truncated to max_length=320 in this test
    assert [label != -100 for label in labels] == [bool(m) for m in full["assistant_masks"][: len(ids)]]
    assert all(label in (-100, token) for label, token in zip(labels, ids))
    # The trained spans decode to exactly the assistant answers, each ending with <|im_end|>.
    spans, current = [], []
    for token, label in zip(ids, labels):
        if label != -100:
            current.append(token)
        elif current:
            spans, current = spans + [current], []
    answers = [m["content"] + "<|im_end|>" for m in dataset[0]["messages"] if m["role"] == "assistant"]
    assert spans and [tok.decode(span) for span in spans] == answers[: len(spans)]
    # On the untruncated conversation every answer is trained, and nothing else.
    masked = [t for t, m in zip(full["input_ids"], full["assistant_masks"]) if m]
    assert tok.decode(masked) == "".join(answers)


def test_two_sft_steps_change_the_weights_and_save_a_servable_checkpoint(trained):
    """Catches: an optimizer that never steps (zero learning rate, every label masked), a loss
    that is not finite, and a saved checkpoint that lost eos <|im_end|>, sampling by default
    (transformers serve would decode greedily) or the model's own chat template."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    trainer, before, final, _, base = trained
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    assert len(losses) == 2 and all(torch.isfinite(torch.tensor(losses)))
    changed = [name for name, p in trainer.model.named_parameters() if not torch.equal(before[name], p.detach())]
    assert len(changed) == len(before)  # full fine-tuning: every tensor moved
    model = AutoModelForCausalLM.from_pretrained(final)
    assert not torch.equal(model.state_dict()["model.norm.weight"], before["model.norm.weight"])
    tok = AutoTokenizer.from_pretrained(final)
    assert tok.eos_token == "<|im_end|>" and tok.chat_template == AutoTokenizer.from_pretrained(base).chat_template
    generation = GenerationConfig.from_pretrained(final)
    assert generation.do_sample is True and generation.eos_token_id == tok.eos_token_id


def test_sft_config_fits_the_profile():
    """Catches: bf16 on a CPU without native bfloat16 (emulated: slower), no assistant-only loss, an
    effective batch that is not the profile's, and LoRA on the CPU profile or full fine-tuning of the GPU model."""
    profile = get_profile("cpu")
    config = sft.sft_config(profile, "/tmp/unused")
    assert config.use_cpu and config.bf16 == hardware.cpu_has_native_bf16() and config.assistant_only_loss
    assert config.per_device_train_batch_size * config.gradient_accumulation_steps == profile.sft.batch_size
    assert config.per_device_train_batch_size == profile.sft.micro_batch_size
    assert config.learning_rate == profile.sft.learning_rate and config.num_train_epochs == profile.sft.epochs
    assert training.lora_config(profile.sft.use_lora) is None
    assert all(training.lora_config(PROFILES[name].sft.use_lora) is not None for name in ("gpu", "full"))


def test_training_logs_to_trackio_only_when_asked(monkeypatch, capsys):
    """Catches: a notebook embedding trackio's live dashboard (a write token in its address) unasked, the SFT
    or GRPO config logging to nothing when asked, or saying its curves go to trackio when the caller said none."""
    import importlib.util

    from course_lib import grpo

    monkeypatch.delenv("COURSE_TRACKIO", raising=False)
    assert training.experiment_logging("x") == {"report_to": "none"}
    monkeypatch.setenv("COURSE_TRACKIO", "1")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "trackio" else None)
    assert training.experiment_logging("x")["report_to"] == "trackio"
    assert training.experiment_logging("x")["project"] == training.TRACKIO_PROJECT
    for config in (
        sft.sft_config(PROFILES["smoke"], "/tmp/unused"),
        grpo.grpo_config(PROFILES["smoke"], "/tmp/unused", [1.0]),
    ):
        assert config.report_to == ["trackio"] and config.run_name.startswith(("sft-smoke-unused", "grpo-smoke-unused"))
    capsys.readouterr()
    for config in (  # a caller's own choice (dev scripts pass "none") wins, and no trackio line is printed
        sft.sft_config(PROFILES["smoke"], "/tmp/unused", report_to="none"),
        grpo.grpo_config(PROFILES["smoke"], "/tmp/unused", [1.0], report_to="none"),
    ):
        assert config.report_to == []
    assert "trackio" not in capsys.readouterr().out
    monkeypatch.setenv("COURSE_TRACKIO", "0")
    assert training.experiment_logging("x") == {"report_to": "none"}
    monkeypatch.setenv("COURSE_TRACKIO", "1")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert training.experiment_logging("x") == {"report_to": "none"}


def test_the_test_runs_log_to_a_trackio_folder_of_their_own():
    """Catches: `make test` writing its smoke training runs into the learner's trackio dashboard."""
    from trackio.utils import HF_HOME, TRACKIO_DIR

    assert TRACKIO_DIR != Path(HF_HOME) / "trackio" and TRACKIO_DIR.name.startswith("course-tests-trackio-")
