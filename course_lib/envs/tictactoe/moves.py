"""The same game as a second environment: one move per episode, rewarded from the game tree.

The full game (`tictactoe.load_environment`) pays once per game: win 1, draw 0.5, loss 0, after
five or six answers. Which answer lost the game, the reward cannot say. Here an episode is one
position of a real game, shown exactly as the full game shows it (the same system prompt, the
same earlier turns, the same `<move>N</move>` answer), and the reward judges that one answer
with minimax: every answer gets its own verified score, so a group of answers to one position
tells the model which cell was better. What is learned here is what the full game asks for.

Positions come from games (each a list of chat messages, as the full game's transcripts store
them): every turn of X that has a choice to make (some legal cell is worse than another) becomes a
row. Rows alternate between the kinds of position (win now, block O's line, other), so any three
consecutive rows mix them.

Rewards (weights in brackets): `move_reward` 1 for a minimax-optimal cell, 0.5 for a legal cell
that keeps the game's outcome (a slower win), 0 for a cell that throws a win or a draw away, or an
invalid answer [1.0]; `format_reward` 1 if the answer is well formed [0.2]; `invalid_move` 1 if the
answer is not a legal move [-0.1]; `false_claim` 1 if the reasoning claims a line the board does not
have ("Cell 2 completes my line 0-1-2" when it does not), or names another cell than it plays
[-false_claim_penalty, default 0: a metric]; `needed_claim` 1 if a win or block position's answer
plays the winning or blocking cell and says so truly [needed_claim_bonus, default 0: a metric].
Metrics [0]: optimal, legal.
"""

import verifiers as vf
from datasets import Dataset

from . import MODEL, SYSTEM_PROMPT, MoveParser, message_text
from .game import best_moves, legal_moves, line_problem, minimax_value, other, read_board, reason_claims, winning_cells

KINDS = ("win", "block", "other")


def kind_of(board) -> str:
    """What the position asks for: a win now, a block of O's line, or neither."""
    if winning_cells(board, MODEL):
        return "win"
    if winning_cells(board, other(MODEL)):
        return "block"
    return "other"


def cell_score(board, cell: int) -> float:
    """1 for an optimal cell, 0.5 for one that keeps the outcome (win, draw or loss), else 0."""
    if cell in best_moves(board, MODEL):
        return 1.0
    after = board[:cell] + [MODEL] + board[cell + 1 :]
    keeps = _sign(-minimax_value(after, other(MODEL))) == _sign(minimax_value(board, MODEL))
    return 0.5 if keeps else 0.0


def _sign(value: int) -> int:
    """A minimax value as its outcome: 1 win, 0 draw, -1 loss (the value also counts the moves to it)."""
    return (value > 0) - (value < 0)


def position_rows(games: list[list[dict]], kinds=KINDS) -> list[dict]:
    """One row per distinct position of X with a choice to make, over `games` (lists of messages),
    of the `kinds` asked for (default: all)."""
    by_kind, seen = {kind: [] for kind in KINDS}, set()
    for messages in games:
        messages = [{"role": m["role"], "content": message_text(m)} for m in messages]
        if not messages or messages[0]["role"] != "system":
            messages = [{"role": "system", "content": SYSTEM_PROMPT}, *messages]
        for i, message in enumerate(messages):
            if message["role"] != "assistant" or messages[i - 1]["role"] != "user":
                continue
            board = read_board(messages[i - 1]["content"])
            if board is None or set(best_moves(board, MODEL)) == set(legal_moves(board)):
                continue  # no board, or no choice: every legal cell is as good
            kind = kind_of(board)
            prompt = messages[:i]
            key = tuple(m["content"] for m in prompt)
            if kind not in kinds or key in seen:
                continue
            seen.add(key)
            info = {"board": "".join(cell or "." for cell in board), "kind": kind, "turn": i // 2}
            by_kind[kind].append({"prompt": prompt, "answer": "", "info": info})
    # Interleave the kinds, so consecutive rows (a training step) mix them.
    rows, queues = [], [rows for rows in by_kind.values() if rows]
    while queues:
        for queue in list(queues):
            rows.append(queue.pop(0))
            if not queue:
                queues.remove(queue)
    return rows


# --- Rubric --------------------------------------------------------------------------------


def _board(info) -> list:
    return [None if ch == "." else ch for ch in info["board"]]


def _answer(completion) -> str:
    replies = [m for m in completion if (m.get("role") if isinstance(m, dict) else m.role) == "assistant"]
    return message_text(replies[-1]) if replies else ""


def move_reward(completion, info, parser, **kwargs) -> float:
    board = _board(info)
    cell, problem = parser.judge(_answer(completion), board)
    return 0.0 if problem else cell_score(board, cell)


def format_reward(completion, parser, **kwargs) -> float:
    return float(parser.is_well_formed(_answer(completion)))


def invalid_move(completion, info, parser, **kwargs) -> float:
    return float(parser.judge(_answer(completion), _board(info))[1] is not None)


def false_claim(completion, info, parser, **kwargs) -> float:
    """1 if a checkable claim of the answer is false on its board, or names a cell other than the move played:
    a right cell for a wrong reason (the move reward alone pays it in full) is a false claim."""
    board, answer = _board(info), _answer(completion)
    cell, problem = parser.judge(answer, board)
    for _, player, line, claimed in reason_claims(answer, MODEL):
        if line_problem(board, player, line, claimed) is not None or (problem is None and claimed != cell):
            return 1.0
    return 0.0


def needed_claim(completion, info, parser, **kwargs) -> float:
    """1 if a legal answer states the claim its position needs, and no false one: "Cell c completes my line
    ..." where X can win, "O threatens ...; I block at cell c" where only O can (a true claim names the
    cell played: see false_claim). A penalty for false claims alone was answered by claiming nothing."""
    needed_from = {"win": MODEL, "block": other(MODEL)}.get(info["kind"])
    answer = _answer(completion)
    if parser.judge(answer, _board(info))[1] is not None or false_claim(completion, info, parser):
        return 0.0
    return float(any(player == needed_from for _, player, _, _ in reason_claims(answer, MODEL)))


def optimal(completion, info, parser, **kwargs) -> float:
    return float(move_reward(completion, info, parser) == 1.0)


def legal(completion, info, parser, **kwargs) -> float:
    return 1.0 - invalid_move(completion, info, parser)


REWARD_WEIGHTS = {move_reward: 1.0, format_reward: 0.2, invalid_move: -0.1}
METRICS = [optimal, legal]


def answer_reward(answer: str, info: dict, weights: dict = REWARD_WEIGHTS) -> float:
    """What the rubric (with these weights) pays for `answer` at the position `info`, without a rollout: a
    trainer that scores every cell at once asks this for each (course_lib/every_cell.py)."""
    completion, parser = [{"role": "assistant", "content": answer}], MoveParser()
    return sum(weight * func(completion=completion, info=info, parser=parser) for func, weight in weights.items())


def load_environment(
    games: list[list[dict]], kinds=KINDS, false_claim_penalty: float = 0.0, needed_claim_bonus: float = 0.0, **kwargs
) -> vf.SingleTurnEnv:
    """One episode per position of X in `games` (each a list of chat messages, like the full game's
    transcripts), one answer each, rewarded from the game tree. `kinds`: the kinds of position to
    train on (win, block, other; default all). `false_claim_penalty`: subtracted when the reasoning
    claims what the board does not show (0: logged only). `needed_claim_bonus`: added when a win or block
    is played for its true reason (0: logged only)."""
    rows = position_rows(games, kinds)
    if not rows:
        raise ValueError("no position with a choice to make in these games")
    parser = MoveParser()
    weights = {**REWARD_WEIGHTS, false_claim: -false_claim_penalty, needed_claim: needed_claim_bonus}
    rubric = vf.Rubric(
        funcs=[*weights, *METRICS],
        weights=[*weights.values(), *[0.0] * len(METRICS)],
        parser=parser,
    )
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), parser=parser, rubric=rubric, **kwargs)
