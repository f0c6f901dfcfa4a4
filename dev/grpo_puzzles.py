"""GRPO that the 135M model visibly gains from in 15 minutes on 2 CPU cores: single-turn
tic-tac-toe puzzles (issue 32, item 4). RESULTS.md, "GRPO on tic-tac-toe puzzles", has the runs.

Every position the model (X) can face, from the game tree, with the answers the classic strategy
accepts (`puzzles`): win now (any winning cell), block (the one cell that stops O's line), or,
elsewhere, any optimal move (minimax). One prompt, one short answer (the move is the reply's first
digit), reward 1 for an accepted cell, 0 otherwise, plus 0.2 for a legal cell (any empty one).
Positions are split by symmetry class: a rotation or mirror of a training position is never held
out. Known shortcut: a reply that copies the board names an empty cell (RESULTS.md).

    python3 dev/grpo_puzzles.py train --output-dir outputs/puzzles/confirm --bf16 --set grpo.max_steps=15 \
        --set grpo.prompts_per_step=2 --set grpo.num_generations=8 --set grpo.micro_batch_size=16 \
        --set grpo.learning_rate=5e-4
    python3 dev/grpo_puzzles.py evaluate --trained outputs/puzzles/confirm/final --split heldout --items 200 --out DIR
    python3 dev/grpo_puzzles.py transfer --trained outputs/puzzles/confirm/final --games 50 --out DIR
"""

import argparse
import asyncio
import functools
import json
import random
import re
import time
from pathlib import Path

from tictactoe import board_to_text, render
from tictactoe.game import best_moves, is_over, legal_moves, winning_cells

KINDS = ("win", "block", "best")  # the first rule that applies names the puzzle
# Short on purpose: every prompt token is computed again in each training forward and backward pass.
SYSTEM_PROMPT = "You play tic-tac-toe as X. Reply with only the number (0-8) of the empty cell you play."
MAX_TOKENS = 8  # the answer is the first digit of the reply, so it must come early

SYMMETRIES = (  # cell permutations of the square: rotations and mirrors
    (0, 1, 2, 3, 4, 5, 6, 7, 8),
    (6, 3, 0, 7, 4, 1, 8, 5, 2),
    (8, 7, 6, 5, 4, 3, 2, 1, 0),
    (2, 5, 8, 1, 4, 7, 0, 3, 6),
    (2, 1, 0, 5, 4, 3, 8, 7, 6),
    (6, 7, 8, 3, 4, 5, 0, 1, 2),
    (0, 3, 6, 1, 4, 7, 2, 5, 8),
    (8, 5, 2, 7, 4, 1, 6, 3, 0),
)


def canonical(text: str) -> str:
    return min("".join(text[i] for i in perm) for perm in SYMMETRIES)


def answers(board) -> tuple[str, list[int]]:
    if wins := winning_cells(board, "X"):
        return "win", wins
    if threats := winning_cells(board, "O"):
        return "block", threats if len(threats) == 1 else best_moves(board, "X")
    return "best", best_moves(board, "X")


@functools.cache
def puzzles() -> list[dict]:
    """Every non-final position reachable with X to move (X started, or O did), one row each."""
    seen, rows = set(), []

    def visit(board, to_move):
        text = board_to_text(board)
        if (text, to_move) in seen or is_over(board):
            return
        seen.add((text, to_move))
        if to_move == "X" and len(legal_moves(board)) < 9:  # the empty board is no puzzle
            kind, cells = answers(board)
            rows.append({"board": text, "kind": kind, "answers": cells, "legal": len(legal_moves(board))})
        for cell in legal_moves(board):
            visit(board[:cell] + [to_move] + board[cell + 1 :], "O" if to_move == "X" else "X")

    visit([None] * 9, "X")
    visit([None] * 9, "O")
    return rows


def split(rows: list[dict], name: str, seed: int = 0, heldout_share: float = 0.3) -> list[dict]:
    """'train' or 'heldout': symmetry classes shuffled with `seed`, the first `heldout_share` held out;
    the rows come back shuffled (same seed), so any prefix mixes the kinds."""
    classes = sorted({canonical(row["board"]) for row in rows})
    random.Random(seed).shuffle(classes)
    held = set(classes[: round(heldout_share * len(classes))])
    chosen = [row for row in rows if (canonical(row["board"]) in held) == (name == "heldout")]
    random.Random(seed + 1).shuffle(chosen)
    return chosen


def question(board_text: str) -> str:
    board = [None if ch == "." else ch for ch in board_text]
    return f"{render(board)}\n\nYour move as X."


def first_cell(text: str) -> int | None:
    """The move a reply names: its first digit (9: no cell), or None without one."""
    digit = re.search(r"[0-9]", text)
    return int(digit.group()) if digit and digit.group() != "9" else None


def scores(text: str, row: dict) -> dict:
    cell = first_cell(text)
    return {
        "cell": cell,
        "correct": float(cell in row["answers"]),
        "legal": float(cell is not None and row["board"][cell] == "."),
    }


def load_environment(split_name: str = "train", items: int = -1, seed: int = 0):
    """A verifiers single-turn environment: reward = correct (1.0) + legal (0.2)."""
    import verifiers as vf
    from datasets import Dataset

    rows = split(puzzles(), split_name, seed)
    rows = rows if items < 0 else rows[:items]

    def reply(completion) -> str:
        return completion[-1]["content"] if completion else ""

    def correct(completion, info, **kwargs) -> float:
        return scores(reply(completion), info)["correct"]

    def legal(completion, info, **kwargs) -> float:
        return scores(reply(completion), info)["legal"]

    return vf.SingleTurnEnv(
        dataset=Dataset.from_list([{"question": question(r["board"]), "answer": "", "info": r} for r in rows]),
        system_prompt=SYSTEM_PROMPT,
        rubric=vf.Rubric(funcs=[correct, legal], weights=[1.0, 0.2]),
    )


def answer_items(model_path: str, rows: list[dict], samples: int, temperature: float) -> list[dict]:
    """`samples` replies per row; one result row per reply (reply, cell, correct, legal)."""
    from course_lib.local_model import LocalModel

    with LocalModel(model_path) as llm:
        prompts = []
        for row in rows:
            messages = [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": question(row["board"])},
            ]
            text = llm.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            prompts.append(llm.tokenizer(text, add_special_tokens=False)["input_ids"])
        todo = [(i, k) for i in range(len(rows)) for k in range(samples)]
        sampling = {"max_tokens": MAX_TOKENS, "temperature": temperature, "top_p": 1.0}
        results = []
        for start in range(0, len(todo), 64):
            batch = todo[start : start + 64]
            for (i, k), (ids, _) in zip(batch, llm.generate_batch([prompts[i] for i, _ in batch], sampling)):
                text = llm.tokenizer.decode(ids, skip_special_tokens=True)
                row = rows[i]
                results.append(
                    {
                        "item": i,
                        "board": row["board"],
                        "kind": row["kind"],
                        "sample": k,
                        "reply": text,
                        **scores(text, row),
                    }
                )
    return results


def train(args) -> None:
    from course_lib.grpo import build_grpo_trainer
    from course_lib.models import embedded_checkpoint
    from course_lib.profiles import get_profile
    from course_lib.sft import save_final
    from course_lib.train_grpo import with_settings

    profile = with_settings(get_profile("cpu"), ["grpo.max_tokens_per_turn=8", "grpo.max_episode_tokens=8", *args.set])
    start = args.model or str(embedded_checkpoint())
    env = load_environment("train", profile.grpo.max_steps * profile.grpo.prompts_per_step, args.seed)
    out = Path(args.output_dir)
    overrides = {"save_steps": 10_000}
    if args.bf16:  # weights in bfloat16 and bf16 autocast: a CPU with AVX-512 BF16 runs it 1.7x faster here
        import course_lib.grpo

        course_lib.grpo.training_dtype = lambda capability, lora: "bfloat16"
        overrides["bf16"] = True
    began = time.time()
    trainer = build_grpo_trainer(profile, env, start, out, **overrides)
    trainer.train()
    save_final(trainer, out / "final", start)
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    print(f"trained in {(time.time() - began) / 60:.1f} min; model: {out / 'final'}")


def evaluate(args) -> None:
    import pandas as pd

    from course_lib.evaluation import mcnemar_p_value
    from course_lib.models import embedded_checkpoint

    rows = split(puzzles(), args.split, args.seed)[args.offset : args.offset + args.items]
    models = {"start": args.start or str(embedded_checkpoint()), "trained": args.trained}
    tables = []
    for name, path in models.items():
        began = time.time()
        tables.append(pd.DataFrame(answer_items(path, rows, args.samples, args.temperature)).assign(model=name))
        print(f"{name}: {len(rows)} items x {args.samples} in {(time.time() - began) / 60:.1f} min")
    results = pd.concat(tables, ignore_index=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results.to_csv(out / "items.csv", index=False)
    per_item = results.pivot_table(index="item", columns="model", values="correct", aggfunc="mean")
    print(results.groupby(["model", "kind"])[["correct", "legal"]].mean().unstack("model").round(3))
    print(results.groupby("model")[["correct", "legal"]].mean().round(3))
    if args.samples == 1:
        only_start = int(((per_item.start == 1) & (per_item.trained == 0)).sum())
        only_trained = int(((per_item.start == 0) & (per_item.trained == 1)).sum())
        print(
            f"exact McNemar: right only before {only_start}, only after {only_trained}, "
            f"p = {mcnemar_p_value(only_start, only_trained):.2g}"
        )
    else:
        from scipy.stats import wilcoxon

        print(
            "Wilcoxon signed-rank on per-item correct shares: "
            f"p = {wilcoxon(per_item.trained, per_item.start).pvalue:.2g}"
        )


def transfer(args) -> None:
    """Notebook 09's test on full games: both models on the same seeded games per opponent, exact McNemar."""

    from course_lib.evaluation import EvalResult, evaluate_model, paired_comparison
    from course_lib.models import embedded_checkpoint
    from course_lib.profiles import get_profile

    profile, out = get_profile("cpu"), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    models = {"start": args.start or str(embedded_checkpoint()), "trained": args.trained}
    results = []
    for name, path in models.items():
        began = time.time()
        results.append(asyncio.run(evaluate_model(profile, path, name, args.games)))
        print(f"{name}: {args.games} games per opponent in {(time.time() - began) / 60:.1f} min")
    played = EvalResult.concat(results)
    played.games.to_csv(out / "games.csv", index=False)
    played.summary.to_csv(out / "summary.csv", index=False)
    outcomes = ("win", "loss", "non-loss", "invalid answer")
    table = paired_comparison(played.games, "start", "trained", outcomes)
    table.to_csv(out / "paired.csv", index=False)
    print(played.summary.to_string())
    print(table.to_string())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="GRPO on training puzzles")
    t.add_argument("--model", help="start checkpoint (default: the embedded model)")
    t.add_argument("--output-dir", required=True)
    t.add_argument("--seed", type=int, default=0, help="the train/held-out split")
    t.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a cpu-profile field")
    t.add_argument("--bf16", action="store_true", help="train in bfloat16 (CPUs with AVX-512 BF16 or AMX)")
    e = sub.add_parser("evaluate", help="start and trained model on the same puzzles, paired test")
    e.add_argument("--start", help="default: the embedded model")
    e.add_argument("--trained", required=True)
    e.add_argument("--split", default="heldout")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--items", type=int, default=200)
    e.add_argument("--offset", type=int, default=0, help="skip this many rows of the split (e.g. those trained on)")
    e.add_argument("--samples", type=int, default=1)
    e.add_argument("--temperature", type=float, default=1.0)
    e.add_argument("--out", required=True)
    f = sub.add_parser("transfer", help="start and trained model on full games (notebook 09's paired test)")
    f.add_argument("--start", help="default: the embedded model")
    f.add_argument("--trained", required=True)
    f.add_argument("--games", type=int, default=100, help="per opponent")
    f.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    {"train": train, "evaluate": evaluate, "transfer": transfer}[args.command](args)


if __name__ == "__main__":
    main()
