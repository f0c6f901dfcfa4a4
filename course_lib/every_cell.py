"""GRPO whose group is every cell: the exact expected reward of a move, from one forward pass.

Sampled GRPO writes a few answers to a position and compares their rewards: a noisy estimate of
which answer is better, paid for with generated tokens. In tic-tac-toe the answer that matters is
one token: after `<move>` the model's next-token distribution *is* its policy over the nine cells
(SmolLM2 writes each digit 0-8 as one token there). So one forward pass gives the probability of
every cell, the game tree scores every cell, and the expected reward of the position is exact:

    expected reward = sum over cells c of  pi(c) * reward(c)      (+ pi(any other token) * reward of no move)

Maximising it is GRPO whose group is every action, weighted by its probability: no sampling noise.
`reward(c)` is what the per-move environment's rubric pays for the answer `<move>c</move>`
(`tictactoe.moves.answer_reward`): the game tree's verdict, the format bonus, the invalid-move penalty.

The positions are the ones the model's own games go through, shown exactly as the full game shows
them (system prompt, every earlier turn, the board): `play_and_learn` plays a batch of games of the
full-game environment turn by turn, against the random and the optimal opponent, and after each
turn of all the games takes one optimizer step on the positions just seen; then each game goes on
with a cell drawn from the policy. The positions follow the model as it improves, and the games
against the optimal opponent are where it loses.

Speed (RESULTS.md, "Every cell scored"): every position of a step shares the system prompt, so
`cell_log_probs` runs that prefix once and reuses its keys and values, with their gradient, for every
row (checked against running each prompt whole in tests/test_every_cell.py); LoRA on the top layers only
(`top_layers_lora`: the layers below need no backward pass).

- `cell_tokens(tokenizer)`: the token of each cell after `<move>`.
- `cell_log_probs(model, sequences, cells)`: log pi(c | sequence) for each cell, plus "any other token".
- `expected_reward(log_probs, rewards)`: the loss's core, the few lines notebook 09 has the learner write.
- `play_and_learn(...)`: the training loop; `score_positions(...)`: a held-out score, no gradient.
"""

import contextlib
import random
import time
from dataclasses import dataclass, field

import torch

from course_lib.offline import OfflineClient, run_coroutine
from course_lib.training import can_share_prefix, lora_config, shared_prefix_cache
from tictactoe import board_from_text, board_to_text, load_environment, message_text
from tictactoe.game import read_board
from tictactoe.moves import KINDS, answer_reward, cell_score, kind_of, position_rows

CELLS = tuple(range(9))
MOVE_TAG = "<move>"
NO_MOVE = "<move></move>"  # what "any other token after <move>" stands for: an answer with no cell


def cell_tokens(tokenizer, prefix: str = f"x{MOVE_TAG}") -> list[int]:
    """The token id of each cell 0-8 right after `<move>`; an error if a cell is not one token there."""
    base = tokenizer(prefix, add_special_tokens=False)["input_ids"]
    tokens = []
    for cell in CELLS:
        ids = tokenizer(f"{prefix}{cell}", add_special_tokens=False)["input_ids"]
        if ids[: len(base)] != base or len(ids) != len(base) + 1:
            raise ValueError(f"this tokenizer does not write cell {cell} as one token after {MOVE_TAG}")
        tokens.append(ids[-1])
    return tokens


def render(tokenizer, messages: list[dict], answer_prefix: str = MOVE_TAG) -> list[int]:
    """The token ids the model reads before it names a cell: the chat so far, the assistant's turn
    opened, and the answer up to `<move>`."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text + answer_prefix, add_special_tokens=False)["input_ids"]


def common_prefix(sequences: list[list[int]], limit: int | None = None) -> int:
    """How many leading tokens every sequence shares, at most `limit` (and at least one token is left to each)."""
    shortest = min(min(map(len, sequences)) - 1, limit if limit is not None else len(sequences[0]))
    for i in range(shortest):
        if any(seq[i] != sequences[0][i] for seq in sequences):
            return i
    return shortest


def final_hidden_states(model, sequences: list[list[int]], shared: int):
    """The last layer's normed hidden state at every token of each sequence after its first `shared` tokens
    (rows, width, hidden), right-padded, and the model's output head. The first `shared` tokens, the same in
    every sequence, run once: their keys and values, still attached to the graph, serve every row, so the
    gradient through them sums over the rows as if each had run them. The one place that reaches past
    `model(...)`: a causal LM's backbone (`.model`) and head (`.lm_head`), as in Llama and LFM2, so that only
    the positions a loss reads go through the vocabulary-wide head."""
    causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model  # under a LoRA wrapper
    backbone, head = causal_lm.model, causal_lm.lm_head
    device = head.weight.device
    rows, width = len(sequences), max(map(len, sequences)) - shared
    ids = torch.zeros(rows, width, dtype=torch.long, device=device)
    mask = torch.zeros(rows, width, dtype=torch.long, device=device)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq) - shared] = torch.tensor(seq[shared:], device=device)
        mask[row, : len(seq) - shared] = 1
    kwargs = {}
    if shared:
        cache = shared_prefix_cache(backbone, ids.new_tensor(sequences[0][:shared]), rows)
        mask = torch.cat([mask.new_ones(rows, shared), mask], dim=1)
        kwargs = {"past_key_values": cache, "use_cache": True}
    return backbone(input_ids=ids, attention_mask=mask, **kwargs).last_hidden_state, head


def cell_log_probs(model, sequences: list[list[int]], cells: list[int], answers_from=None, share_prefix=True):
    """log pi(token | sequence) at the end of each sequence, for each token of `cells` and, last, for all
    other tokens together: a (rows, len(cells) + 1) tensor that keeps its graph. With `answers_from` (the
    index where each sequence's sampled answer starts), also each row's log-probability of those answer tokens.

    With `share_prefix`, the tokens every sequence starts with (the system prompt) run once for all rows
    (`final_hidden_states`); the result is the same as running each sequence whole (tests/test_every_cell.py)."""
    limit = None if answers_from is None else min(answers_from) - 1  # the answers' logits must be computed
    shared = common_prefix(sequences, limit) if share_prefix and len(sequences) > 1 and can_share_prefix(model) else 0
    hidden, head = final_hidden_states(model, sequences, shared)
    rows = torch.arange(len(sequences), device=hidden.device)
    last = torch.tensor([len(seq) - 1 - shared for seq in sequences], device=hidden.device)
    log_probs = torch.log_softmax(head(hidden[rows, last]).float(), dim=-1)
    chosen = log_probs[:, cells]
    other = torch.log1p(-chosen.exp().sum(-1).clamp(max=1 - 1e-6))
    at_cells = torch.cat([chosen, other[:, None]], dim=1)
    if answers_from is None:
        return at_cells
    answers = []
    for row, (seq, first) in enumerate(zip(sequences, answers_from)):
        reading = torch.arange(first - 1, len(seq) - 1, device=hidden.device) - shared  # each predicts the next
        token_log_probs = torch.log_softmax(head(hidden[row, reading]).float(), dim=-1)
        answers.append(token_log_probs.gather(1, torch.tensor(seq[first:], device=hidden.device)[:, None]).sum())
    return at_cells, torch.stack(answers)


def expected_reward(log_probs: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
    """The mean over positions of sum_a pi(a) * reward(a): every action of a position, weighted by its
    probability. Its gradient is the exact policy gradient (what sampled GRPO estimates from a few answers)."""
    return (log_probs.exp() * rewards).sum(dim=-1).mean()


def action_rewards(info: dict) -> list[float]:
    """What the per-move rubric pays for each cell's answer at this position, then for an answer with no cell."""
    answers = [f"{MOVE_TAG}{cell}</move>" for cell in CELLS] + [NO_MOVE]
    return [answer_reward(answer, info) for answer in answers]


# --- Playing games turn by turn, and learning from every turn ---------------------------------------


@dataclass
class Game:
    """One game of the full-game environment in progress: its state and the conversation so far."""

    state: dict
    messages: list
    done: bool = False


async def start_games(env, rows) -> list[Game]:
    games, nobody = [], OfflineClient()  # the state stores a client; the policy answers here, not through it
    for row in rows:
        state = await env.init_state(row, client=nobody, model="policy")
        state = await env.setup_state(state)
        games.append(Game(state, [dict(m) for m in row["prompt"]]))
    return games


async def answer(env, game: Game, text: str) -> None:
    """The environment judges `text` as the model's answer and replies (or ends the game)."""
    game.messages.append({"role": "assistant", "content": text})
    reply = await env.env_response(game.messages, game.state)
    game.messages += [{"role": "user", "content": message_text(m)} for m in reply]
    game.done = await env.is_completed(game.state)


def position_info(messages: list[dict]) -> dict:
    """The position a conversation ends in, as the per-move rubric reads it: its board and its kind."""
    board = read_board(messages[-1]["content"])
    return {"board": board_to_text(board), "kind": kind_of(board)}


@dataclass
class Log:
    """What each optimizer step saw: positions, seconds (and of them generating reasonings, and forward + backward
    + optimizer; the rest is the environment), expected reward, and per kind the exact expected cell score and the
    probability of an optimal cell (from the policy before the step)."""

    rows: list = field(default_factory=list)

    def add(self, **row):
        self.rows.append(row)


def training_games(games: int, seed: int, answer_format: str = "move"):
    """Full-game rows on the train split (never an evaluation game): half against the random opponent,
    half against the optimal one, the two interleaved, the model starting about half of each."""
    envs = [
        load_environment(
            num_train_examples=(games + 1) // 2 if prob else games // 2,
            num_eval_examples=0,
            min_random_move_prob=prob,
            max_random_move_prob=prob,
            num_groups=1,
            seed=seed,
            answer_format=answer_format,
        )
        for prob in (1.0, 0.0)
    ]
    rows = [row for pair in zip(*(env.get_dataset() for env in envs)) for row in pair]
    return envs[0], rows  # one env serves both: the opponent's skill is each row's


def sample_reasonings(model, tokenizer, prompts: list[list[int]], max_tokens: int, seed: int) -> list[list[int]]:
    """One sampled reasoning per prompt, as token ids up to and including `<move>` (the policy writes it; one
    that runs out of tokens first gets "</think>" and `<move>` appended, so its cells are still scored)."""
    torch.manual_seed(seed)
    width = max(map(len, prompts))
    ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(p)) + p for p in prompts], device=model.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=model.device)  # left-padded
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_tokens,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            stop_strings=[MOVE_TAG],
            tokenizer=tokenizer,
        )
    close_ids = tokenizer(f"</think>\n{MOVE_TAG}", add_special_tokens=False)["input_ids"]
    reasonings = []
    for row in out[:, width:].tolist():
        text = tokenizer.decode(row)
        if MOVE_TAG in text:  # cut right after the first <move>: ids, so the sampled tokens are kept exactly
            for end in range(1, len(row) + 1):
                if tokenizer.decode(row[:end]).count(MOVE_TAG):
                    break
            reasonings.append(row[:end])
        else:
            kept = [t for t in row if t not in (tokenizer.pad_token_id, tokenizer.eos_token_id)]
            reasonings.append(kept + close_ids)
    return reasonings


def play_and_learn(
    model,
    tokenizer,
    optimizer,
    games: int,
    games_at_once: int,
    seed: int,
    minutes: float | None = None,
    answer_format: str = "move",
    reasonings: int = 2,
    max_reasoning_tokens: int = 56,
    micro_batch: int = 8,
    autocast=contextlib.nullcontext,
    objective=expected_reward,
    log: Log | None = None,
    on_step=None,
) -> Log:
    """Play up to `games` full games (half against each opponent), `games_at_once` in lockstep (a finished
    game's place goes to the next); after each turn of them, one optimizer step maximising the expected
    reward of the positions just seen; then every game goes on with a cell drawn from the policy. Stops
    after `minutes` of playing and learning (`on_step`'s work not counted). Each step's forward and backward
    run `micro_batch` sequences at a time. `objective(log_probs, rewards)`: the mean expected reward to maximise.

    `answer_format="think"` keeps the reasoning: per position, `reasonings` sampled reasonings, every cell
    scored after each. The loss adds sampled GRPO on the reasonings, whose reward is their exact expected
    reward (advantage: minus the mean of the position's reasonings); the game goes on with the first."""
    env, rows = training_games(games, seed, answer_format)
    cells, log, rng = cell_tokens(tokenizer), log or Log(), random.Random(seed)
    think = answer_format == "think"
    waiting, playing, trained = list(rows), [], 0.0  # trained: seconds of playing and learning
    while True:
        playing = [game for game in playing if not game.done]
        if waiting and len(playing) < games_at_once:
            new, waiting = waiting[: games_at_once - len(playing)], waiting[games_at_once - len(playing) :]
            playing += run_coroutine(start_games(env, new))
        if not playing or (minutes is not None and trained > 60 * minutes):
            return log
        step_start = time.monotonic()
        infos = [position_info(game.messages) for game in playing]
        prompts = [render(tokenizer, game.messages, answer_prefix="" if think else MOVE_TAG) for game in playing]
        generating = time.monotonic()
        if think:
            copies = [prompt for prompt in prompts for _ in range(reasonings)]
            model.eval()
            with autocast():
                sampled = sample_reasonings(model, tokenizer, copies, max_reasoning_tokens, rng.randrange(2**31))
            sequences = [prompt + reasoning for prompt, reasoning in zip(copies, sampled)]
            rewards = torch.tensor([action_rewards(info) for info in infos for _ in range(reasonings)])
        else:
            sequences, rewards = prompts, torch.tensor([action_rewards(info) for info in infos])
        learning = time.monotonic()
        # Micro-batches of positions of about the same length (a position's reasonings together): padding to
        # the longest row of a step would cost every row the longest history's tokens.
        per_position = reasonings if think else 1
        order = sorted(range(len(playing)), key=lambda i: len(sequences[i * per_position]))
        chunk = max(1, micro_batch // per_position)
        probs = torch.empty(len(sequences), len(cells) + 1)
        expected = torch.empty(len(sequences))
        model.train()
        optimizer.zero_grad()
        for start in range(0, len(order), chunk):
            rows = [i * per_position + j for i in order[start : start + chunk] for j in range(per_position)]
            part = [sequences[r] for r in rows]
            with autocast():
                if think:
                    starts = [len(copies[r]) for r in rows]
                    log_probs, reasoning_log_probs = cell_log_probs(model, part, cells, starts)
                else:
                    log_probs = cell_log_probs(model, part, cells)
                paid = rewards[rows].to(log_probs.device)
                loss = -objective(log_probs, paid) * len(rows) / len(sequences)  # this part's share of the step
                per_sequence = (log_probs.exp() * paid).sum(dim=-1)
                if think:  # a reasoning's reward is its expected reward; advantage: minus its position's mean
                    by_position = per_sequence.detach().view(-1, per_position)
                    advantage = (by_position - by_position.mean(dim=1, keepdim=True)).flatten()
                    lengths = torch.tensor([len(sampled[r]) for r in rows], dtype=torch.float, device=paid.device)
                    loss = loss - (advantage * reasoning_log_probs / lengths).sum() / len(sequences)
            loss.backward()
            probs[rows], expected[rows] = log_probs.detach().exp().float().cpu(), per_sequence.detach().float().cpu()
        optimizer.step()
        learned = time.monotonic()
        first = probs[::reasonings] if think else probs  # the game goes on with its first reasoning
        draws = torch.multinomial(first, 1, generator=torch.Generator().manual_seed(rng.randrange(2**31)))
        for i, (game, action) in enumerate(zip(playing, draws[:, 0].tolist())):
            said = tokenizer.decode(sampled[i * reasonings]) if think else MOVE_TAG
            said = said[: said.rfind(MOVE_TAG)]
            run_coroutine(answer(env, game, f"{said}{MOVE_TAG}{action}</move>" if action < 9 else f"{said}{NO_MOVE}"))
        seconds = time.monotonic() - step_start
        trained += seconds
        log.add(
            step=len(log.rows) + 1,
            seconds=seconds,
            generation_seconds=learning - generating,  # the reasonings sampled ("think" only)
            learning_seconds=learned - learning,  # forward, backward and the optimizer step
            positions=len(playing),
            expected_reward=float(expected.mean()),
            **position_scores(infos, first),
        )
        if on_step is not None:
            on_step(log)


def position_scores(infos: list[dict], probs: torch.Tensor) -> dict:
    """Exact expected cell score (1 optimal, 0.5 keeps the outcome, 0 throws it away or invalid) and the
    probability of an optimal cell, over all positions and per kind (win, block, other)."""
    scores, optimal = [], []
    for info, p in zip(infos, probs.tolist()):
        board = board_from_text(info["board"])
        values = [cell_score(board, c) if board[c] is None else 0.0 for c in CELLS]
        scores.append(sum(pi * v for pi, v in zip(p, values)))
        optimal.append(sum(pi for pi, v in zip(p, values) if v == 1.0))
    out = {"score": sum(scores) / len(scores), "optimal": sum(optimal) / len(optimal)}
    for kind in KINDS:
        picked = [i for i, info in enumerate(infos) if info["kind"] == kind]
        out[f"score_{kind}"] = sum(scores[i] for i in picked) / len(picked) if picked else float("nan")
    return out


@torch.no_grad()
def score_positions(model, tokenizer, positions: list[list[dict]], batch_size: int = 32) -> dict:
    """`position_scores` of the policy on fixed positions (each a conversation ending in a board), no gradient."""
    cells, probs = cell_tokens(tokenizer), []
    model.eval()
    for first in range(0, len(positions), batch_size):
        part = positions[first : first + batch_size]
        probs.append(
            cell_log_probs(model, [render(tokenizer, messages) for messages in part], cells).exp().float().cpu()
        )
    return position_scores([position_info(messages) for messages in positions], torch.cat(probs))


def held_out_positions(games: list[list[dict]]) -> list[list[dict]]:
    """Every position of X with a choice in `games` (lists of messages), as the conversation up to it."""
    return [row["prompt"] for row in position_rows(games)]


def top_layers_lora(model, rank: int, layers: int):
    """The course's LoRA (`training.lora_config`) on every linear layer of the top `layers` decoder layers only:
    the layers below need no backward pass, so a step costs about (L + 2 x layers) / 3L of LoRA on all L layers
    (RESULTS.md, "Every cell scored"). peft takes a layer range only with the modules named."""
    import dataclasses

    total = model.config.num_hidden_layers
    linear = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    return dataclasses.replace(
        lora_config(True, rank),
        target_modules=sorted(linear - {"lm_head"}),
        layers_to_transform=list(range(total - min(layers, total), total)),
    )


def plot_learning(ax, steps, held=None, title: str = "") -> None:
    """A run's learning curves on `ax`: the exact expected cell score of the positions each step trained on (the
    policy before the step, a rolling mean over 20 steps) against positions seen, per kind of position, and the
    held-out score where the run measured it (`train`'s steps and held-out tables)."""
    seen = steps["positions"].cumsum()
    kinds = (("score_block", "block positions"), ("score_win", "win positions"), ("score_other", "other positions"))
    for column, label in (*kinds, ("score", "all")):
        rolling = steps[column].rolling(20, min_periods=5).mean()
        ax.plot(seen, rolling, label=f"{label} (trained on)", lw=2 if column == "score" else 1)
    if held is not None and len(held):
        ax.plot(held["positions"], held["score"], "ko--", ms=4, label="held out (expert's positions)")
    ax.set_title(title or f"{int(seen.iloc[-1])} positions in {steps['seconds'].sum() / 60:.0f} min", fontsize=9)
    ax.set_xlabel("positions trained on")
    ax.set_ylabel("expected cell score (1 optimal, 0.5 keeps the outcome)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="lower right")


# --- A whole run: what notebook 09 and the command line call -------------------------------------------


def train(
    model_path: str,
    output_dir,
    budget,
    answer_format: str = "move",
    objective=expected_reward,
    games: int = 4000,
    reasonings: int = 2,
    seed: int = 0,
    report=print,
):
    """Train `model_path` with the every-cell loss for `budget.minutes` (`profiles.EveryCellBudget`), scoring
    `budget.held_out` positions of the expert's games before, every `budget.score_every` steps and after.
    `objective(log_probs, rewards)`: the loss's core, maximised (notebook 09's learner writes it). Saves
    `output_dir`/final (a plain checkpoint, LoRA merged), steps.csv, held_out.csv and settings.json; returns
    the final checkpoint's path and the two tables. `report`: where a line of progress goes, every few minutes."""
    import json
    from dataclasses import asdict
    from pathlib import Path

    import pandas as pd
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from course_lib.hardware import cpu_bf16
    from course_lib.sft import in_answer_format, load_dataset

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype="float32").to(device)
    if budget.lora_rank:
        from peft import get_peft_model

        model = get_peft_model(model, top_layers_lora(model, budget.lora_rank, budget.lora_layers))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=budget.learning_rate)
    expert = in_answer_format(load_dataset(), answer_format)["messages"]
    held_out = held_out_positions(list(expert))[: budget.held_out] if answer_format == "move" else []

    # bf16 autocast where the hardware multiplies it natively, float32 weights and optimizer; elsewhere (a T4)
    # float32 throughout: fp16 would need a gradient scaler, and LoRA on the top layers keeps float32 affordable
    native_bf16 = torch.cuda.is_bf16_supported() if device == "cuda" else cpu_bf16()

    def autocast():
        return torch.autocast(device, dtype=torch.bfloat16) if native_bf16 else contextlib.nullcontext()

    scores, last_report = [], [time.monotonic()]

    def score(log):
        if held_out:
            with autocast():
                scored = score_positions(model, tokenizer, held_out)
            scores.append({"step": len(log.rows), "positions": sum(r["positions"] for r in log.rows), **scored})

    def on_step(log):
        if len(log.rows) % budget.score_every == 0:
            score(log)
        if report and time.monotonic() - last_report[0] > 120:  # a line every two minutes
            last_report[0] = time.monotonic()
            minutes, seen = sum(r["seconds"] for r in log.rows) / 60, sum(r["positions"] for r in log.rows)
            held = f", held-out score {scores[-1]['score']:.3f}" if scores else ""
            report(f"{minutes:4.1f} of {budget.minutes:g} min: step {len(log.rows)}, {seen} positions{held}")

    log = Log()
    score(log)
    play_and_learn(
        model,
        tokenizer,
        optimizer,
        games,
        budget.games_at_once,
        seed,
        budget.minutes,
        answer_format=answer_format,
        reasonings=reasonings,
        micro_batch=budget.micro_batch,
        autocast=autocast,
        objective=objective,
        log=log,
        on_step=on_step,
    )
    if held_out and scores[-1]["step"] != len(log.rows):  # the last step's score, unless it has one
        score(log)
    steps, held = pd.DataFrame(log.rows), pd.DataFrame(scores)
    steps.to_csv(output_dir / "steps.csv", index=False)
    held.to_csv(output_dir / "held_out.csv", index=False)
    final = output_dir / "final"
    model = model.merge_and_unload() if budget.lora_rank else model
    model.generation_config = GenerationConfig.from_pretrained(model_path)
    model.save_pretrained(str(final))
    tokenizer.save_pretrained(str(final))
    from course_lib.publish_results import portable  # the start model's path without this machine's folders

    settings = {"model": portable(str(model_path)), "answer_format": answer_format, "games": games, "seed": seed}
    (output_dir / "settings.json").write_text(json.dumps({**settings, **asdict(budget)}, indent=1))
    return final, steps, held


def main() -> None:
    """Train a checkpoint with the every-cell loss and save it, with its per-step log and held-out scores:

    python -m course_lib.every_cell --model outputs/cpu/sft/final --output-dir outputs/cpu/every_cell/RUN

    The settings not given are the cpu profile's (profiles.EveryCellBudget)."""
    import argparse
    from dataclasses import fields, replace

    from course_lib.profiles import get_profile

    budget = get_profile("cpu").every_cell
    parser = argparse.ArgumentParser(description=main.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--answer-format", default="move", choices=["move", "think"])
    parser.add_argument("--reasonings", type=int, default=2, help="think: sampled reasonings per position")
    parser.add_argument("--games", type=int, default=4000, help="training games at most (half per opponent)")
    parser.add_argument("--seed", type=int, default=0)
    for setting in fields(budget):
        default = getattr(budget, setting.name)
        parser.add_argument(f"--{setting.name.replace('_', '-')}", type=type(default), default=default)
    args = parser.parse_args()
    chosen = replace(budget, **{f.name: getattr(args, f.name) for f in fields(budget)})
    _, steps, held = train(
        args.model,
        args.output_dir,
        chosen,
        args.answer_format,
        games=args.games,
        reasonings=args.reasonings,
        seed=args.seed,
        report=lambda line: print(line, flush=True),
    )
    print(
        held.round(3).to_string(index=False), f"\n{steps['positions'].sum()} positions; saved {args.output_dir}/final"
    )


if __name__ == "__main__":
    main()
