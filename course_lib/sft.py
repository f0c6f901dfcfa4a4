"""SFT warm-up: a teacher plays through the environment, we keep its good games, then TRL's SFTTrainer.

Read top to bottom:
1. `play_games`: the teacher plays training games with the environment's own `evaluate`, the call
   that scores models (the scripted expert offline; a local server or an API model the same way).
2. `rejection_reason` / `game_to_messages` / `build_dataset`: keep finished games that were not lost
   and whose every answer was a well-formed legal move; turn each into the conversation the model
   sees at evaluation and training time (the environment's system prompt and messages, verbatim).
3. `save_dataset` / `load_dataset`: JSON Lines (`data/tictactoe_sft/` ships the expert's games).
4. `training_chat_template`: loss on assistant tokens only needs `{% generation %}` markers in the
   chat template; SmolLM2's has none and TRL does not patch it, so the course's template for the
   embedded model (models.py) comes with a marked twin.
5. `build_sft_trainer` / `save_final`: SFTConfig from the profile (full fine-tuning on CPU, LoRA on
   GPU profiles) and a plain checkpoint that `course_lib.serving.start_server` can serve.
   `checkpoint_or_train`: the checkpoint for notebook 09, trained there if notebook 08 has not run.

The same trainer teaches tool calls in notebook 08's last section: its data lives in `tool_sft.py`.

Regenerate the shipped dataset (deterministic, a few seconds): `python -m course_lib.sft`
"""

import json
from pathlib import Path

from course_lib.hardware import (
    cuda_capability,
    mixed_precision,
    release,
    score_answer_tokens_only_on_cpu,
    training_dtype,
)
from course_lib.profiles import Profile, get_profile
from course_lib.training import experiment_logging, lora_config
from tictactoe import GAME_STATE_COLUMNS, MAX_TURNS, load_environment, outcome

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "tictactoe_sft"
GAMES_FILE = "games.jsonl"
TEACHER_SEED = 0  # the environment's seed for the teacher's games ("train" split: never an evaluation game)
MAX_LENGTH = 1024  # tokens per conversation; a whole game is 460-640 tokens with SmolLM2's tokenizer


# --- 1. The teacher plays through the environment ------------------------------------------


def teacher_environment(num_games: int, seed: int = TEACHER_SEED):
    """The tic-tac-toe environment with `num_games` training rows, opponents of every skill.

    `evaluate` plays the eval set, so we point it at the training rows: the teacher's games are
    drawn from the "train" split and never share a seed with the games of the evaluation harness.
    """
    env = load_environment(num_train_examples=num_games, num_eval_examples=0, seed=seed, max_turns=MAX_TURNS)
    env.eval_dataset = env.get_dataset()
    return env


async def play_games(
    client,
    model: str,
    num_games: int,
    seed: int = TEACHER_SEED,
    max_concurrent: int | None = None,
    progress: bool = True,
) -> list[dict]:
    """`num_games` games by the teacher behind `client` (any verifiers client), in row order,
    `max_concurrent` at once (default: the profile's `max_concurrent`)."""
    env = teacher_environment(num_games, seed)
    results = await env.evaluate(
        client,
        model,
        sampling_args={},
        num_examples=-1,
        rollouts_per_example=1,
        max_concurrent=max_concurrent or get_profile().max_concurrent,
        state_columns=GAME_STATE_COLUMNS,
        on_start=None if progress else lambda *args: None,
    )  # no start, no progress bar
    return sorted(results["outputs"], key=lambda output: output["example_id"])


# --- 2. Filter and convert -----------------------------------------------------------------


def rejection_reason(output: dict) -> str | None:
    """Why a game must not be imitated, or None to keep it. Checked in this order."""
    if output.get("error"):
        return "error"
    if output["winner"] is None:
        return "unfinished"
    if output["winner"] == "O":
        return "lost"
    if output["invalid_moves"] > 0:
        return "invalid move"
    if output["well_formed_turns"] < output["model_turns"]:
        return "badly formatted"
    return None


def game_to_messages(output: dict) -> list[dict]:
    """The conversation as the model sees it: the environment's prompt (system + first board) and
    every message after it, as plain {"role", "content"} dicts, up to the last assistant answer
    (the final "Game over" message asks for nothing, so there is nothing to learn after it)."""
    messages = [
        {"role": m["role"], "content": m["content"]} for m in list(output["prompt"]) + list(output["completion"])
    ]
    last_answer = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return messages[: last_answer + 1]


def build_dataset(outputs: list[dict], teacher: str) -> tuple[list[dict], dict[str, int]]:
    """SFT rows from the kept games, and how many games each filter dropped.

    Repeats are dropped too: against strong opponents, games with different seeds often replay
    the same moves, and a copy costs training time without teaching anything new.
    """
    rows, dropped, seen = [], {}, set()
    for output in outputs:
        reason = rejection_reason(output)
        moves = json.dumps(output["moves"])
        if reason is None and moves in seen:
            reason = "repeat of a kept game"
        if reason is not None:
            dropped[reason] = dropped.get(reason, 0) + 1
            continue
        seen.add(moves)
        rows.append(
            {
                "messages": game_to_messages(output),
                "teacher": teacher,
                "example_id": output["example_id"],
                "game_seed": output["game_seed"],
                "model_starts": output["model_starts"],
                "random_move_prob": output["random_move_prob"],
                "result": outcome(output["winner"]),
                "model_turns": output["model_turns"],
                "moves": [cell for _, cell in output["moves"]],  # cells in play order, the first mover's first
            }
        )
    return rows, dropped


# --- 3. Save and load ----------------------------------------------------------------------


def save_dataset(rows: list[dict], directory: Path, meta: dict) -> Path:
    """JSON Lines (one game per line, reads in milliseconds, diffs in git) plus meta.json."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / GAMES_FILE).write_text("".join(json.dumps(row) + "\n" for row in rows))
    (directory / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return directory / GAMES_FILE


def load_dataset(directory: Path = DATA_DIR):
    """The SFT games as a `datasets.Dataset` (default: the shipped expert games), each with a list of
    `messages`; a broken file fails here with a ValueError naming the file, the line and the fix."""
    from datasets import Dataset

    path = Path(directory) / GAMES_FILE
    fix = (
        "Write the games again with `python -m course_lib.sft` (notebook 07), or restore the shipped "
        "ones with `git checkout data/tictactoe_sft`."
    )

    def problem(game) -> str | None:
        if not isinstance(game, dict):
            return f"a JSON {type(game).__name__}, not an object with messages"
        if (messages := game.get("messages")) is None:
            return "field 'messages' is missing (every row needs messages)"
        if not isinstance(messages, list):
            return f"field 'messages' is {messages!r:.60}, a {type(messages).__name__}; it must be a list"
        return None

    if not path.is_file() or not path.read_bytes().strip():
        raise ValueError(f"{path}: {'the file has no rows' if path.is_file() else 'file not found'}. {fix}")
    try:  # datasets reads; on_mixed_types=None: a field of two types fails instead of becoming JSON text
        games = Dataset.from_json(str(path), on_mixed_types=None)
        if not any(map(problem, games)):
            return games
        error = "a row the check refuses"
    except Exception as failure:
        error = failure.__cause__ or failure
    for number, line in enumerate(path.read_bytes().splitlines(), 1):  # datasets names no line: find it
        try:
            reason = problem(json.loads(line)) if line.strip() else None
        except ValueError as failure:  # bad bytes or a truncated line
            reason = f"not valid JSON in UTF-8 ({failure}); each line must be one complete JSON object"
        if reason:
            raise ValueError(f"{path}, line {number}: {reason}. {fix}")
    raise ValueError(f"{path}: datasets cannot read it ({error}). {fix}")


def in_answer_format(games, answer_format: str):
    """The same games with answers in another of the environment's formats (`tictactoe.ANSWER_FORMATS`):
    its system prompt, and for "move" every answer without its <think>...</think> (same moves, same games)."""
    from tictactoe import system_prompt

    def convert(game):
        messages = [dict(m) for m in game["messages"]]
        messages[0]["content"] = system_prompt(answer_format)
        if answer_format == "move":
            for message in messages:
                if message["role"] == "assistant":
                    message["content"] = message["content"][message["content"].rfind("<move>") :]
        return {"messages": messages}

    return games.map(convert)


def dataset_meta(teacher: str, outputs: list[dict], rows: list[dict], dropped: dict, seed: int = TEACHER_SEED) -> dict:
    """What data/README.md's data card reports, stored next to the games."""
    return {
        "teacher": teacher,
        "environment_seed": seed,
        "split": "train",
        "games_played": len(outputs),
        "games_kept": len(rows),
        "dropped": dropped,
        "max_turns": MAX_TURNS,
        "command": "python -m course_lib.sft",
    }


async def make_expert_dataset(num_games: int, directory: Path, seed: int = TEACHER_SEED):
    """Play `num_games` games with the scripted expert, filter them and save: the shipped dataset."""
    from course_lib.scripted_client import ScriptedClient

    outputs = await play_games(ScriptedClient("expert"), "expert", num_games, seed=seed, progress=False)
    rows, dropped = build_dataset(outputs, teacher="expert (scripted)")
    save_dataset(rows, directory, dataset_meta("expert (scripted)", outputs, rows, dropped, seed))
    return rows, dropped


# --- 4. A chat template that marks what the model writes -----------------------------------
# Loss on the assistant's tokens only needs {% generation %} ... {% endgeneration %} around what the
# model writes, here each answer and its closing <|im_end|> (how it learns to stop). SmolLM2's
# template has none and TRL does not patch it; the course's template for the embedded model
# (SmolLM2's, plus tool calls: models.py) has a marked twin that renders the same text.


def training_chat_template(tokenizer) -> str | None:
    """The marked template to train with, or None to leave it to TRL (it patches LFM2, Qwen, ...)."""
    from trl.chat_template_utils import has_generation_markers

    from course_lib.models import CHAT_TEMPLATE, TRAINING_CHAT_TEMPLATE

    template = tokenizer.chat_template
    if has_generation_markers(template):
        return template
    if template == CHAT_TEMPLATE:
        return TRAINING_CHAT_TEMPLATE
    return None


# --- 5. The trainer ------------------------------------------------------------------------


def sft_config(profile: Profile, output_dir: Path, **overrides):
    from trl import SFTConfig

    capability = cuda_capability()
    micro_batch = min(profile.sft.batch_size, profile.sft.micro_batch_size)  # gradients accumulate to batch_size
    settings = dict(
        output_dir=str(output_dir),
        num_train_epochs=profile.sft.epochs,
        learning_rate=profile.sft.learning_rate,
        per_device_train_batch_size=micro_batch,
        gradient_accumulation_steps=max(1, profile.sft.batch_size // micro_batch),
        lr_scheduler_type="cosine",
        warmup_steps=0.1,  # a float below 1 is a share of the steps
        assistant_only_loss=True,  # needs {% generation %} markers: see training_chat_template
        max_length=MAX_LENGTH,
        logging_steps=1,
        save_strategy="no",  # minutes of training: we save the final model only
        **experiment_logging(f"sft-{profile.name}-{Path(output_dir).name}", overrides.pop("report_to", None)),
        seed=0,
        use_cpu=capability is None,
        **mixed_precision(capability, cpu_autocast=True),  # SFTConfig's default bf16=True is emulated on a T4
        gradient_checkpointing=capability is not None,  # saves GPU memory; on CPU it only costs time
    )
    settings.update(overrides)
    return SFTConfig(**settings)


def build_sft_trainer(profile: Profile, dataset, model_path: str, output_dir: Path, callbacks=None, **config_overrides):
    """An SFTTrainer on the `messages` column, loss on the assistant's tokens only."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.chat_template = training_chat_template(tokenizer) or tokenizer.chat_template
    capability = cuda_capability()
    if capability is None:
        score_answer_tokens_only_on_cpu()
    return SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_path, dtype=training_dtype(capability, profile.sft.use_lora)),
        args=sft_config(profile, output_dir, **config_overrides),
        train_dataset=dataset.select_columns([c for c in ("messages", "tools") if c in dataset.column_names]),
        processing_class=tokenizer,
        peft_config=lora_config(profile.sft.use_lora),
        callbacks=callbacks,
    )


def save_final(trainer, path: Path, base_model_path: str) -> Path:
    """A plain checkpoint that transformers serve and vLLM load (LoRA merged), with the tokenizer
    files and generation settings of the model training started from: eos <|im_end|>, and
    do_sample=True so that a server samples (see models.py). GRPO saves its model this way too."""
    from transformers import AutoTokenizer, GenerationConfig

    model = trainer.model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    base_generation = Path(base_model_path) / "generation_config.json"
    if base_generation.is_file():
        model.generation_config = GenerationConfig.from_pretrained(base_model_path)
    model.save_pretrained(str(path))
    AutoTokenizer.from_pretrained(base_model_path).save_pretrained(str(path))  # the unmarked template
    (Path(path) / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))  # for notebook 10
    return Path(path)


def training_data_dir(profile: Profile) -> Path:
    """Notebook 07's games for this profile if it ran, else the expert games shipped in data/."""
    from course_lib.profiles import output_dir

    generated = output_dir(profile) / "tictactoe_sft"
    return generated if (generated / GAMES_FILE).is_file() else DATA_DIR


def training_dataset(profile: Profile):
    """Notebook 08's training games: `training_data_dir`'s, with answers in the profile's answer format."""
    return in_answer_format(load_dataset(training_data_dir(profile)), profile.answer_format)


def checkpoint_or_train(profile: Profile) -> Path:
    """Notebook 08's SFT model; when it is missing (a notebook opened alone), say so and train it
    here the way 08 does (same data and settings: training is deterministic, so the same model), or,
    if the learner chose so, use the course's own (`shipped_models`). GRPO must never start from the
    base model without anyone noticing."""
    from course_lib import shipped_models
    from course_lib.models import resolve_model

    final = sft_checkpoint(profile)
    if (final / "config.json").is_file():
        return final
    if shipped_models.wanted(profile):
        return shipped_models.shipped_checkpoint("after SFT")
    data, base = training_data_dir(profile), resolve_model(profile)
    print(
        f"No SFT checkpoint at {final}: notebook 08 (08_sft_warmup.ipynb) makes it. Training it now with "
        f"08's settings on {data} (08's training step in the cpu profile: 9 minutes on 2 cores of an AMD EPYC, "
        "twice that on slower CPUs; "
        "a minute in smoke), so that GRPO starts from a model that knows the answer format. "
        "Run notebook 08 to see it made and evaluated, or skip the training: stop here, set "
        f"{shipped_models.SHIPPED_VARIABLE}=1 (e.g. `%env {shipped_models.SHIPPED_VARIABLE}=1`) and run this "
        "cell again to start from the course's own SFT model, shipped in assets/models/.",
        flush=True,
    )
    trainer = build_sft_trainer(profile, training_dataset(profile), base, sft_output_dir(profile))
    trainer.train()
    save_final(trainer, final, base)
    release(trainer)
    return final


def sft_output_dir(profile: Profile | None = None) -> Path:
    from course_lib.profiles import output_dir

    return output_dir(profile or get_profile()) / "sft"


def sft_checkpoint(profile: Profile | None = None) -> Path:
    """Where notebook 08 saves the SFT model (and notebooks 09-10 look for it)."""
    return sft_output_dir(profile) / "final"


if __name__ == "__main__":
    import asyncio

    games = get_profile("cpu").sft.num_games
    kept, dropped = asyncio.run(make_expert_dataset(games, DATA_DIR))
    print(f"{games} expert games played, {len(kept)} kept in {DATA_DIR / GAMES_FILE}; dropped: {dropped}")
