"""Tic-tac-toe rules, perfect play and two scripted players, in plain Python.

A board is a list of 9 cells ("X", "O" or None) numbered 0..8 row by row, and a move is a cell
number: the same number the model writes in <move>N</move>. Memoized minimax finds every optimal
move; `opponent_move` breaks ties uniformly at random, and `expert_move` plays an optimal move
and explains it in one sentence (the <think> text of the synthetic SFT data).
"""

import functools
import random
import re
from fractions import Fraction

WIN_LINES: tuple[tuple[int, int, int], ...] = (
    (0, 1, 2),
    (3, 4, 5),
    (6, 7, 8),  # rows
    (0, 3, 6),
    (1, 4, 7),
    (2, 5, 8),  # columns
    (0, 4, 8),
    (2, 4, 6),  # diagonals
)
CENTRE = 4
CORNERS = (0, 2, 6, 8)  # the opposite of corner c is 8 - c


def new_board() -> list:
    return [None] * 9


def other(player: str) -> str:
    if player not in ("X", "O"):
        raise ValueError(f"player must be 'X' or 'O', got {player!r}")
    return "O" if player == "X" else "X"


def winner(board) -> str | None:
    for a, b, c in WIN_LINES:
        if board[a] is not None and board[a] == board[b] == board[c]:
            return board[a]
    return None


def is_full(board) -> bool:
    return None not in board


def is_over(board) -> bool:
    return winner(board) is not None or is_full(board)


def legal_moves(board) -> list[int]:
    """The empty cells, ascending (callers check `is_over` first)."""
    return [cell for cell in range(9) if board[cell] is None]


def render(board) -> str:
    """Three rows like ' X | 1 | O '; an empty cell shows its number, which is the move to type."""
    rows = []
    for start in (0, 3, 6):
        cells = [board[cell] or str(cell) for cell in range(start, start + 3)]
        rows.append(" " + " | ".join(cells) + " ")
    return "\n---+---+---\n".join(rows)


_BOARD_ROW = re.compile(r"^ ?([XO0-8]) \| ([XO0-8]) \| ([XO0-8]) ?$", re.MULTILINE)


def read_board(text: str) -> list | None:
    """The last board drawn in `text` by `render`, or None if there is none."""
    rows = _BOARD_ROW.findall(text)
    if len(rows) < 3:
        return None
    cells = [cell for row in rows[-3:] for cell in row]
    return [cell if cell in ("X", "O") else None for cell in cells]


# --- Perfect play ---------------------------------------------------------------------------


def _play(cells: tuple, move: int, player: str) -> tuple:
    return cells[:move] + (player,) + cells[move + 1 :]


@functools.lru_cache(maxsize=None)  # about 5,500 positions per starting player: solved once
def _value(cells: tuple, player: str) -> int:
    won_by = winner(cells)
    if won_by is not None:
        # A game that ends after fewer moves scores more, so the winner
        # prefers the fastest win and the loser the slowest loss.
        cells_filled = 9 - cells.count(None)
        score = 10 - cells_filled
        return score if won_by == player else -score
    if is_full(cells):
        return 0
    opponent = other(player)
    return max(-_value(_play(cells, move, player), opponent) for move in legal_moves(cells))


def minimax_value(board, player: str) -> int:
    """The game value for `player` to move, with perfect play from both sides.

    A win scores 10 - (cells filled when the game ends), a loss minus that, a draw 0.
    """
    return _value(tuple(board), player)


def best_moves(board, player: str) -> list[int]:
    """Every optimal move for `player` to move, ascending."""
    if is_over(board):
        raise ValueError("the game is over: there is no move to make")
    cells, opponent = tuple(board), other(player)
    values = {move: -_value(_play(cells, move, player), opponent) for move in legal_moves(cells)}
    best = max(values.values())
    return [move for move, value in values.items() if value == best]


# --- Scripted players -----------------------------------------------------------------------


def random_move(board, rng: random.Random) -> int:
    if is_over(board):
        raise ValueError("the game is over: there is no move to make")
    return rng.choice(legal_moves(board))


def opponent_move(board, player: str, random_move_prob: float, rng: random.Random) -> int:
    """With probability `random_move_prob` a uniformly random legal move, else a random optimal one."""
    if not 0.0 <= random_move_prob <= 1.0:
        raise ValueError(f"random_move_prob must be in [0, 1], got {random_move_prob}")
    # Draw the coin even at 0 or 1, so a seeded rng is consumed the same way for every setting.
    if rng.random() < random_move_prob:
        return random_move(board, rng)
    # Choosing uniformly matters: always taking the first optimal move makes a predictable opponent.
    return rng.choice(best_moves(board, player))


def random_player_results(random_move_prob, x_starts: bool) -> tuple[Fraction, Fraction, Fraction]:
    """Exact (win, draw, loss) probabilities of a uniformly random X against `opponent_move`'s O.

    Computed over the whole game tree with fractions, not sampled: the reference a random baseline
    measured by the harness must match. Pass `random_move_prob` as an int or Fraction to keep it exact.
    """
    p = Fraction(random_move_prob)

    @functools.lru_cache(maxsize=None)
    def results(cells: tuple, to_move: str) -> tuple[Fraction, Fraction, Fraction]:
        won_by = winner(cells)
        if won_by is not None or is_full(cells):
            return {"X": (1, 0, 0), "O": (0, 0, 1), None: (0, 1, 0)}[won_by]
        moves = legal_moves(cells)
        chance = {move: Fraction(1, len(moves)) for move in moves}
        if to_move == "O":  # a random move with probability p, else a uniformly chosen optimal one
            optimal = best_moves(cells, "O")
            chance = {move: p * chance[move] + (1 - p) * Fraction(move in optimal, len(optimal)) for move in moves}
        after = [(q, results(_play(cells, move, to_move), other(to_move))) for move, q in chance.items() if q]
        return tuple(sum(q * child[i] for q, child in after) for i in range(3))

    return results((None,) * 9, "X" if x_starts else "O")


def _line_name(line: tuple[int, int, int]) -> str:
    return "-".join(map(str, line))


def completed_lines(board, player: str, cell: int) -> list[str]:
    """The lines ("0-4-8") that `player` completes by playing `cell`."""
    lines = [line for line in WIN_LINES if cell in line]
    return [_line_name(line) for line in lines if all(board[i] == player for i in line if i != cell)]


def _completed_line(board, player: str, cell: int) -> str | None:
    """The first line that `player` completes by playing `cell`, or None."""
    return next(iter(completed_lines(board, player, cell)), None)


def winning_cells(board, player: str) -> list[int]:
    """Every empty cell where `player` completes a line with this move."""
    return [cell for cell in legal_moves(board) if _completed_line(board, player, cell)]


def _threat_lines(board, player: str, cell: int) -> list[str]:
    """Lines through `cell` that playing it turns into two of `player` and one empty cell."""
    after = _play(tuple(board), cell, player)
    threats = []
    lines_through_cell = [line for line in WIN_LINES if cell in line]
    for line in lines_through_cell:
        marks = [after[i] for i in line]
        if marks.count(player) == 2 and None in marks:
            threats.append(_line_name(line))
    return threats


def _fork_cells(board, player: str) -> list[int]:
    """Cells after which `player` threatens to win in two places, so one block cannot stop both."""
    return [cell for cell in legal_moves(board) if len(_threat_lines(board, player, cell)) >= 2]


# The two claims of `expert_move`'s reasons that the board can check (the SFT data teaches them).
COMPLETES = re.compile(r"Cell (\d+) completes my line (\d+)-(\d+)-(\d+)")  # its win sentence
BLOCKS = re.compile(r"([XO]) threatens (\d+)-(\d+)-(\d+); I block at cell (\d+)")  # its block sentence


def reason_claims(text: str, player: str) -> list[tuple[str, str, tuple[int, int, int], int]]:
    """The checkable claims in `text`, written by `player`: (the words, whose line, the line as written, the cell)."""
    claims = []
    for match in COMPLETES.finditer(text):
        cell, a, b, c = map(int, match.groups())
        claims.append((match.group(0), player, (a, b, c), cell))
    for match in BLOCKS.finditer(text):
        a, b, c, cell = map(int, match.groups()[1:])
        claims.append((match.group(0), match.group(1), (a, b, c), cell))
    return claims


def line_problem(board, player: str, cells: tuple[int, ...], cell: int) -> str | None:
    """Why `cell` does not complete the written line `cells` for `player` on `board`, or None if it does."""
    name = _line_name(cells)
    if tuple(sorted(cells)) not in {tuple(sorted(line)) for line in WIN_LINES}:
        return f"{name} is not a line of the board"
    if cell not in cells:
        return f"cell {cell} is not on {name}"
    if board[cell] is not None:
        return f"cell {cell} is already taken by {board[cell]}"
    for other_cell in cells:
        if other_cell != cell and board[other_cell] != player:
            return f"cell {other_cell} of {name} is {board[other_cell] or 'empty'}, not {player}"
    return None


def expert_move(board, player: str, rng: random.Random) -> tuple[int, str]:
    """An optimal move and a one-sentence reason, from the classic strategy's first rule that fits.

    Every rule only considers optimal moves, so the expert never gives away a result; ties within
    a rule are broken uniformly with `rng`.
    """
    optimal = best_moves(board, player)
    opponent = other(player)

    def choose(cells) -> int | None:
        candidates = [move for move in optimal if move in cells]
        return rng.choice(candidates) if candidates else None

    if (move := choose(winning_cells(board, player))) is not None:
        return move, f"Cell {move} completes my line {_completed_line(board, player, move)}, so I win now."
    if (move := choose(winning_cells(board, opponent))) is not None:
        return move, f"{opponent} threatens {_completed_line(board, opponent, move)}; I block at cell {move}."
    if (move := choose(_fork_cells(board, player))) is not None:
        first, second = _threat_lines(board, player, move)[:2]
        return move, f"Cell {move} makes two threats at once, {first} and {second}, a fork."
    opponent_forks = _fork_cells(board, opponent)
    if (move := choose(opponent_forks)) is not None:
        return move, f"{opponent} could fork at cell {move}, so I take that cell first."
    if opponent_forks:
        # Where taking the fork cell is not optimal, a threat of our own makes the opponent answer it.
        forcing = [cell for cell in legal_moves(board) if _threat_lines(board, player, cell)]
        if (move := choose(forcing)) is not None:
            threat = _threat_lines(board, player, move)[0]
            return move, f"Cell {move} threatens {threat}, so {opponent} must block instead of forking."
    if (move := choose([CENTRE])) is not None:
        return move, f"I take the centre, cell {move}, which lies on four lines."
    if (move := choose([corner for corner in CORNERS if board[8 - corner] == opponent])) is not None:
        return move, f"{opponent} holds corner {8 - move}, so I take the opposite corner, cell {move}."
    if (move := choose(CORNERS)) is not None:
        return move, f"I take corner cell {move}, which lies on three lines."
    # Centre and corners are not optimal here, so every optimal move is a side cell.
    move = rng.choice(optimal)
    return move, f"Side cell {move} keeps the game at least a draw."
