"""Where a model's games against the optimal opponent are lost: for each stored game, the first answer of X that
threw the position's outcome away, by the kind of position (win now, block O's line, other), the share of
answers of each kind that kept the outcome, the reasons the model gave where it had to block (its sentences
with the digits masked, most common first), and, in win and block positions, how often each kind of reason
came with an optimal cell. Reads stored transcripts (evaluation.save_transcripts); runs no model.

    python dev/where_the_model_loses.py outputs/cpu/evaluations/*/transcripts.jsonl
"""

import collections
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "course_lib" / "envs"))
from tictactoe import MoveParser  # noqa: E402
from tictactoe.game import read_board  # noqa: E402
from tictactoe.moves import cell_score, kind_of  # noqa: E402

REASON_KINDS = (("win now", "I win now"), ("block", "I block"), ("fork", "fork"))  # else "other"


def where_lost(path: Path):
    first_mistakes, answers, kept = collections.Counter(), collections.Counter(), collections.Counter()
    for line in path.read_text().splitlines():
        game = json.loads(line)
        board, first = [None] * 9, None
        for player, cell in game["moves"]:
            if player == "X" and board[cell] is None:
                kind = kind_of(board)
                keeps = cell_score(board, cell) >= 0.5
                answers[kind] += 1
                kept[kind] += keeps
                if not keeps and first is None:
                    first = kind
            board[cell] = player
        first_mistakes[(game["result"], first or "none")] += 1
    return first_mistakes, {kind: (kept[kind], answers[kind]) for kind in answers}


def model_answers(path: Path):
    """(board, answer text) for every answer of the model in the stored games."""
    for line in path.read_text().splitlines():
        messages = json.loads(line)["messages"]
        for before, answer in zip(messages, messages[1:]):
            board = read_board(before["content"]) if before["role"] == "user" else None
            if answer["role"] == "assistant" and board:
                yield board, answer["content"]


def reason_of(answer: str) -> str:
    """The answer's <think> text without the copied list of empty cells ("" if it has none)."""
    reason = re.search(r"<think>(.*?)</think>", answer, re.S)
    return re.sub(r"Empty cells:[\d ]*\.", "", reason.group(1)).strip() if reason else ""


def reason_kind(answer: str) -> str:
    return next((kind for kind, words in REASON_KINDS if words in reason_of(answer)), "other")


def optimal_by_reason(path: Path) -> dict:
    """(position kind, reason kind) -> (answers, answers with an optimal cell), in win and block positions:
    whether a reason that is wrong for the position still comes with the right cell (and so the full reward)."""
    parser, table = MoveParser(), collections.defaultdict(lambda: [0, 0])
    for board, answer in model_answers(path):
        if (kind := kind_of(board)) in ("win", "block"):
            cell, problem = parser.judge(answer, board)
            counts = table[(kind, reason_kind(answer))]
            counts[0] += 1
            counts[1] += problem is None and cell_score(board, cell) == 1.0
    return dict(sorted(table.items()))


def block_reasons(path: Path) -> collections.Counter:
    """The model's reasons in positions where O has two in a line, digits masked ("O threatens N-N-N; ...")."""
    reasons = collections.Counter()
    for board, answer in model_answers(path):
        if kind_of(board) == "block":
            reasons[re.sub(r"\d", "N", reason_of(answer) or "(no reason)")] += 1
    return reasons


if __name__ == "__main__":
    for name in sys.argv[1:]:
        path = Path(name)
        header = json.loads(path.read_text().splitlines()[0])
        first_mistakes, kept = where_lost(path)
        print(f"{path}: {header.get('player')} vs {header.get('opponent')}")
        for (result, kind), n in sorted(first_mistakes.items()):
            print(f"  {result:10s} first outcome-losing answer: {kind:6s} {n}")
        for kind, (k, n) in sorted(kept.items()):
            print(f"  answers that keep the outcome, {kind:6s}: {k} of {n} ({k / n:.0%})")
        for reason, n in block_reasons(path).most_common(3):
            print(f"  where it had to block, {n:3d}x: {reason}")
        for (kind, reason), (n, optimal) in optimal_by_reason(path).items():
            share = f"{optimal} ({optimal / n:.0%})"
            print(f"  {kind:5s} position, reason '{reason}': {n:3d} answers, optimal cell {share}")
