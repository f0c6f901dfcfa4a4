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
row (checked against running each prompt whole in tests/test_every_cell.py); LoRA on every linear layer.

- `cell_tokens(tokenizer)`: the token of each cell after `<move>`.
- `cell_log_probs(model, sequences, cells)`: log pi(c | sequence) for each cell, plus "any other token".
- `expected_reward(log_probs, rewards)`: the loss's core, the few lines notebook 09 has the learner write.
- `play_and_learn(...)`: the training loop; `score_positions(...)`: a held-out score, no gradient.
"""

import random
import time
from dataclasses import dataclass, field

import torch

from course_lib.offline import OfflineClient, run_coroutine
from tictactoe import load_environment, message_text
from tictactoe.game import read_board
from tictactoe.moves import answer_reward, cell_score, kind_of

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


def common_prefix(sequences: list[list[int]]) -> int:
    """How many leading tokens every sequence shares (at least one token is left to each)."""
    shortest = min(map(len, sequences))
    for i in range(shortest - 1):
        if any(seq[i] != sequences[0][i] for seq in sequences):
            return i
    return shortest - 1


def cell_log_probs(model, sequences: list[list[int]], cells: list[int], share_prefix: bool = True):
    """log pi(token | sequence) at the end of each sequence, for each token of `cells` and, last, for all
    other tokens together: a (rows, len(cells) + 1) tensor that keeps its graph.

    With `share_prefix`, the tokens every sequence starts with (the system prompt) run once and their keys and
    values, still attached to the graph, serve every row, so the gradient through them sums over the rows as
    if each had run them; the rest of each sequence runs right-padded after them."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    shared = common_prefix(sequences) if share_prefix and len(sequences) > 1 else 0
    rows, width = len(sequences), max(map(len, sequences)) - shared
    ids = torch.zeros(rows, width, dtype=torch.long, device=device)
    mask = torch.zeros(rows, width, dtype=torch.long, device=device)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq) - shared] = torch.tensor(seq[shared:], device=device)
        mask[row, : len(seq) - shared] = 1
    last = mask.sum(1) - 1  # each row's last real token: the one after which the cell is written
    kept = sorted(set(last.tolist()))
    kwargs = {}
    if shared:
        head = model(input_ids=ids.new_tensor(sequences[0][:shared])[None], use_cache=True, logits_to_keep=1)
        cache = DynamicCache()
        for index, layer in enumerate(head.past_key_values.layers):
            cache.update(layer.keys.expand(rows, -1, -1, -1), layer.values.expand(rows, -1, -1, -1), index)
        mask = torch.cat([mask.new_ones(rows, shared), mask], dim=1)
        kwargs = {"past_key_values": cache, "use_cache": True}
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=torch.tensor(kept, device=device), **kwargs)
    at_last = logits.logits[torch.arange(rows, device=device), last.new_tensor([kept.index(p) for p in last.tolist()])]
    log_probs = torch.log_softmax(at_last.float(), dim=-1)
    chosen = log_probs[:, cells]
    other = torch.log1p(-chosen.exp().sum(-1).clamp(max=1 - 1e-6))
    return torch.cat([chosen, other[:, None]], dim=1)


def expected_reward(log_probs: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
    """The mean over positions of sum_a pi(a) * reward(a): every action of a position, weighted by its
    probability. Its gradient is the exact policy gradient (what sampled GRPO estimates from a few answers)."""
    return (log_probs.exp() * rewards).sum(dim=-1).mean()


def action_rewards(info: dict, answer_prefix: str = "") -> list[float]:
    """What the per-move rubric pays for each cell's answer at this position, then for an answer with no cell."""
    answers = [f"{answer_prefix}{MOVE_TAG}{cell}</move>" for cell in CELLS] + [f"{answer_prefix}{NO_MOVE}"]
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


def position_info(game: Game) -> dict:
    board = read_board(game.messages[-1]["content"])
    return {"board": "".join(cell or "." for cell in board), "kind": kind_of(board)}


@dataclass
class Log:
    """What each optimizer step saw: positions, seconds, expected reward, and per kind the exact expected cell
    score and the probability of an optimal cell (from the policy before the step)."""

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


def play_and_learn(
    model,
    tokenizer,
    optimizer,
    games: int,
    games_at_once: int,
    seed: int,
    minutes: float | None = None,
    answer_format: str = "move",
    log: Log | None = None,
    on_step=None,
) -> Log:
    """Play `games` full games (half against each opponent), `games_at_once` in lockstep; after each turn
    of them, one optimizer step maximising the expected reward of the positions of that turn; then
    every game goes on with a cell drawn from the policy. Stops early after `minutes` of training."""
    env, rows = training_games(games, seed, answer_format)
    cells, log, rng = cell_tokens(tokenizer), log or Log(), random.Random(seed)
    trained = 0.0  # seconds of playing and learning (not of on_step's work)
    for first in range(0, len(rows), games_at_once):
        batch = run_coroutine(start_games(env, rows[first : first + games_at_once]))
        while playing := [game for game in batch if not game.done]:
            if minutes is not None and trained > 60 * minutes:
                return log
            step_start = time.monotonic()
            infos = [position_info(game) for game in playing]
            rewards = torch.tensor([action_rewards(info) for info in infos])
            model.train()
            log_probs = cell_log_probs(model, [render(tokenizer, game.messages) for game in playing], cells)
            loss = -expected_reward(log_probs, rewards)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            probs = log_probs.detach().exp()
            draws = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(rng.randrange(2**31)))
            for game, action in zip(playing, draws[:, 0].tolist()):
                run_coroutine(answer(env, game, f"{MOVE_TAG}{action}</move>" if action < 9 else NO_MOVE))
            seconds = time.monotonic() - step_start
            trained += seconds
            log.add(
                step=len(log.rows) + 1,
                seconds=seconds,
                positions=len(playing),
                expected_reward=-loss.item(),
                **position_scores(infos, probs),
            )
            if on_step is not None:
                on_step(log)
    return log


def position_scores(infos: list[dict], probs: torch.Tensor) -> dict:
    """Exact expected cell score (1 optimal, 0.5 keeps the outcome, 0 throws it away or invalid) and the
    probability of an optimal cell, over all positions and per kind (win, block, other)."""
    from tictactoe.moves import KINDS

    scores, optimal = [], []
    for info, p in zip(infos, probs.tolist()):
        board = [None if ch == "." else ch for ch in info["board"]]
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
    cells, infos, probs = cell_tokens(tokenizer), [], []
    model.eval()
    for first in range(0, len(positions), batch_size):
        part = positions[first : first + batch_size]
        probs.append(cell_log_probs(model, [render(tokenizer, messages) for messages in part], cells).exp())
        for messages in part:
            board = read_board(messages[-1]["content"])
            infos.append({"board": "".join(c or "." for c in board), "kind": kind_of(board)})
    return position_scores(infos, torch.cat(probs))


def held_out_positions(games: list[list[dict]]) -> list[list[dict]]:
    """Every position of X with a choice in `games` (lists of messages), as the conversation up to it."""
    from tictactoe.moves import position_rows

    return [row["prompt"] for row in position_rows(games)]


# --- From the command line -----------------------------------------------------------------------------


def main() -> None:
    """Train a checkpoint with the every-cell loss and save it, with its per-step log and held-out scores:

    python -m course_lib.every_cell --model outputs/cpu/sft_move/final --output-dir outputs/cpu/every_cell/RUN
    """
    import argparse
    import contextlib
    import json
    from pathlib import Path

    import pandas as pd
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from course_lib.hardware import cpu_bf16
    from course_lib.sft import in_answer_format, load_dataset
    from course_lib.training import lora_config

    parser = argparse.ArgumentParser(description=main.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--answer-format", default="move", choices=["move"])
    parser.add_argument("--minutes", type=float, default=30.0, help="training time, held-out scoring excluded")
    parser.add_argument("--games", type=int, default=4000, help="training games at most (half per opponent)")
    parser.add_argument("--games-at-once", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    parser.add_argument("--lora-rank", type=int, default=16, help="0: full fine-tuning")
    parser.add_argument("--score-every", type=int, default=40, help="optimizer steps between held-out scores")
    parser.add_argument("--held-out", type=int, default=200, help="positions of the expert's games to score")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    args.output_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype="float32")
    if args.lora_rank:
        from peft import get_peft_model

        model = get_peft_model(model, lora_config(True, rank=args.lora_rank))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.learning_rate)
    expert = in_answer_format(load_dataset(), args.answer_format)["messages"]
    held_out = held_out_positions(list(expert))[: args.held_out]

    def autocast():  # bf16 autocast where the CPU multiplies bfloat16 natively (float32 weights and optimizer)
        return torch.autocast("cpu", dtype=torch.bfloat16) if cpu_bf16() else contextlib.nullcontext()

    scores = []

    def score(log):
        positions = sum(row["positions"] for row in log.rows)
        with autocast():
            scores.append(
                {"step": len(log.rows), "positions": positions, **score_positions(model, tokenizer, held_out)}
            )
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in scores[-1].items()}), flush=True)

    def on_step(log):
        row = log.rows[-1]
        if len(log.rows) % args.score_every == 0:
            score(log)
        if len(log.rows) % 10 == 0:
            minutes = sum(r["seconds"] for r in log.rows) / 60
            seen = sum(r["positions"] for r in log.rows)
            print(
                f"step {row['step']}: {seen} positions in {minutes:.1f} min ({seen / minutes:.0f} a minute), "
                f"expected reward {row['expected_reward']:.3f}",
                flush=True,
            )

    log = Log()
    score(log)
    with autocast():
        play_and_learn(
            model,
            tokenizer,
            optimizer,
            args.games,
            args.games_at_once,
            args.seed,
            args.minutes,
            args.answer_format,
            log,
            on_step,
        )
    score(log)
    pd.DataFrame(log.rows).to_csv(args.output_dir / "steps.csv", index=False)
    pd.DataFrame(scores).to_csv(args.output_dir / "held_out.csv", index=False)
    final = args.output_dir / "final"
    model = model.merge_and_unload() if args.lora_rank else model
    model.generation_config = GenerationConfig.from_pretrained(args.model)
    model.save_pretrained(str(final))
    tokenizer.save_pretrained(str(final))
    (args.output_dir / "settings.json").write_text(json.dumps({k: str(v) for k, v in vars(args).items()}, indent=1))
    print(f"saved {final}", flush=True)


if __name__ == "__main__":
    main()
