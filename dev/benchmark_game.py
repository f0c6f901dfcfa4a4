"""Speed of the pure game logic: the scripted expert (X) against a fully random opponent (O).

Usage: python dev/benchmark_game.py --games 20000

Games alternate who starts and are seeded, so the W/D/L counts are reproducible. Solving the
game tree happens once, on the first call, and is timed separately from the games.
"""

import argparse
import random
import sys
import time
from pathlib import Path

# Run from anywhere without installing: the game logic is the tictactoe environment's game.py.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "course_lib" / "envs"))

from tictactoe.game import (
    expert_move,
    is_over,
    minimax_value,
    new_board,
    opponent_move,
    other,
    winner,
)


def play_game(first_player: str, rng: random.Random) -> tuple[str | None, int]:
    """Expert as X, random opponent as O; returns (winner, number of moves)."""
    board, to_move, moves = new_board(), first_player, 0
    while not is_over(board):
        if to_move == "X":
            move, _ = expert_move(board, "X", rng)
        else:
            move = opponent_move(board, "O", 1.0, rng)
        board[move] = to_move
        to_move, moves = other(to_move), moves + 1
    return winner(board), moves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    start = time.perf_counter()
    minimax_value(new_board(), "X"), minimax_value(new_board(), "O")
    print(f"solving the game tree (both starting players): {time.perf_counter() - start:.3f} s")

    rng = random.Random(args.seed)
    results = {"X": 0, None: 0, "O": 0}
    total_moves = 0
    start = time.perf_counter()
    for game in range(args.games):
        won_by, moves = play_game("XO"[game % 2], rng)
        results[won_by] += 1
        total_moves += moves
    elapsed = time.perf_counter() - start

    print(f"{args.games} games, {total_moves} moves in {elapsed:.2f} s")
    print(f"{args.games / elapsed:,.0f} games/s, {total_moves / elapsed:,.0f} moves/s")
    print(f"expert W/D/L: {results['X']}/{results[None]}/{results['O']} (seed {args.seed})")


if __name__ == "__main__":
    main()
