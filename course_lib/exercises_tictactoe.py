"""The workshop checks of notebook 05 (05_tictactoe_env.ipynb): one check per part the learner writes.

Each check runs the part on real cases (hand-written replies, boards from real games, scripted games
through the environment) and returns a one-line message naming the part, or raises ExerciseError with
one sentence naming the part, an example input and what was expected (see course_lib/exercise_mechanism.py).
The reference is the course's environment, course_lib/envs/tictactoe/ (imported as `tictactoe`).
Where the learner designs (the opponent's dice, the game rows) the checks test properties, so any order
of draws that has them passes; `compare_games` plays the reference's seeded games through the learner's
package and the reference, where matching move for move is the task, and says so when dice differ.
`yours_or_reference` is what notebook 06 plays in: the learner's finished package when it plays as
the reference (`how_it_differs`), else the reference, said in one printed line.
"""

import contextlib
import inspect
import math
import random
from pathlib import Path

import pandas as pd

from course_lib.exercise_mechanism import (
    ExerciseError,
    call_part,
    check_fast_on_unclosed_tags,
    first_function,
    short_repr,
)

NOTEBOOK = "05_tictactoe_env.ipynb"


def _ttt():
    import tictactoe  # the course's reference environment

    return tictactoe


def _text(board) -> str:
    return "".join(cell or "." for cell in board)


def _board(text: str) -> list:
    return [None if ch == "." else ch for ch in text]


def reachable_positions() -> list[tuple]:
    """Every position of a real game (X or O first), each once, the finished ones included."""
    from tictactoe.game import is_over, legal_moves

    seen, todo = set(), [((None,) * 9, "X"), ((None,) * 9, "O")]
    while todo:
        cells, to_move = todo.pop()
        if cells in seen:
            continue
        seen.add(cells)
        if not is_over(cells):
            nxt = "O" if to_move == "X" else "X"
            todo += [(cells[:m] + (to_move,) + cells[m + 1 :], nxt) for m in legal_moves(cells)]
    return sorted(seen, key=_text)


# ---------------------------------------------------------------- part 1: win detection


def check_winner(winner) -> str:
    """05, part 1: "X" or "O" for three in a row, column or diagonal, else None; a list or a tuple."""
    from tictactoe.game import WIN_LINES
    from tictactoe.game import winner as reference

    cases = []
    for a, b, c in WIN_LINES:
        for mark, other in (("X", "O"), ("O", "X")):
            board = [None] * 9
            board[a] = board[b] = board[c] = mark
            free = [i for i in range(9) if board[i] is None]
            board[free[0]], board[free[-1]] = other, other
            cases.append((board, f"three {mark} on the line {a}-{b}-{c}"))
    cases += [
        ([None] * 9, "the empty board"),
        (_board("XXO......"), "two X and an O in the top row"),
        (_board("XX.X....."), "three X that are not on one line"),
        (_board("XOXXOOOXX"), "a full board without a line (a draw)"),
    ]
    cases += [(list(cells), "a position from a game") for cells in reachable_positions()]
    for board, what in cases:
        for given in (list(board), tuple(board)):
            got, expected = call_part(winner, given), reference(board)
            if got != expected:
                raise ExerciseError(
                    f"winner: for {what}, the board {_text(board)!r} (cells 0-8 row by row, '.' empty) as a "
                    f"{type(given).__name__}, you returned {got!r}; expected {expected!r}."
                )
    values = winner.__globals__.get("VALUES")
    if isinstance(values, dict):
        values.clear()  # minimax's memo was filled with an earlier winner: solve again with this one
    return f"winner is right on the 8 lines and on all {len(cases) - 20} positions of real games."


# ---------------------------------------------------------------- part 3: the move parser


PARSE_CASES = [  # reply, what the case is
    ("<move>4</move>", "a plain move"),
    ("<think>The centre lies on four lines.</think>\n<move> 4 </move>", "a think block and spaces in the tag"),
    ("<move>1</move> no, <move>2</move>", "two moves (the last one counts)"),
    ("I will play 4.", "no tag at all"),
    ("<move>4", "a tag never closed"),
    ("<move>1</move> or <move>2", "a last tag never closed"),
    ("<move>1 <move>2</move>", "an opening tag inside a block (it runs to the next </move>)"),
    ("</move>3<move>", "the tags the wrong way round"),
    ("<move></move>", "an empty block"),
    ("<move>\n7\n</move>\n", "a move on a line of its own"),
]


def check_parse_move(parse_move) -> str:
    """05, part 3: the last complete <move>...</move> block, stripped, or None; linear time."""
    parser = _ttt().MoveParser()
    for reply, what in PARSE_CASES:
        got, expected = call_part(parse_move, reply), parser.parse(reply, last=True).move
        if got != expected:
            raise ExerciseError(f"parse_move: for {what}, {reply!r}, you returned {got!r}; expected {expected!r}.")
    check_fast_on_unclosed_tags(
        parse_move,
        "<move>",
        "A regular expression's time grows with the square of such a reply: search with str.find, and stop at "
        "the first <move> that is never closed.",
    )
    return f"parse_move reads the last complete <move> block in {len(PARSE_CASES) + 1} cases, fast on a broken reply."


# ---------------------------------------------------------------- part 4: the judge

JUDGE_BOARD = "O...X...."  # O in the corner 0, X in the centre
JUDGE_CASES = [  # reply, what the case is
    ("<move>2</move>", "a legal move"),
    ("<think>Take a corner.</think>\n<move>8</move>", "a legal move after a think block"),
    ("<move>0</move>", "a cell taken by O"),
    ("<move>4</move>", "a cell taken by X"),
    ("<move>9</move>", "a cell that does not exist"),
    ("<move>-1</move>", "a negative cell"),
    ("<move>02</move>", "a leading zero"),
    ("<move>+3</move>", "a plus sign"),
    ("<move>-0</move>", "minus zero (cell 0, taken)"),
    ("<move>four</move>", "a word"),
    ("<move>4.0</move>", "a decimal point"),
    ("<move>2, 3</move>", "two numbers"),
    ("I will play 2.", "no tag"),
    ("<move>1</move> no, <move>6</move>", "two moves (the last one counts)"),
    ("<move>" + "9" * 5_000 + "</move>", "a 5,000-digit cell"),
    ("<move>" + "0" * 5_000 + "7</move>", "cell 7 after 5,000 zeros"),
]


# One reply for each kind of invalid answer: the model must be told which mistake it made, so no two kinds may
# share one explanation (the words are the learner's; the reference's docstring: "what is wrong in words").
JUDGE_KINDS = {
    "no tag": "I will play 2.",
    "not a number": "<move>four</move>",
    "no such cell": "<move>9</move>",
    "a taken cell": "<move>0</move>",
}


def check_judge(judge) -> str:
    """05, part 4: (cell, None) for a legal move, (None, an explanation) otherwise; never raises, never changes
    the board. Behaviour, not wording: any non-empty explanation passes, as long as the four kinds of invalid
    answer (no tag, not a number, no such cell, a taken cell) get four different ones."""
    parser = _ttt().MoveParser()
    explanations = {}
    for reply, what in JUDGE_CASES + [(reply, f"an answer with {kind}") for kind, reply in JUDGE_KINDS.items()]:
        board = _board(JUDGE_BOARD)
        try:
            got = call_part(judge, reply, board)
        except ExerciseError as error:
            if "digit" not in what:
                raise
            raise ExerciseError(
                f"{error}. Compare the digits as text first: int() refuses over 4,300 digits."
            ) from None
        expected = parser.judge(reply, _board(JUDGE_BOARD))
        if board != _board(JUDGE_BOARD):
            raise ExerciseError(f"judge: for {what}, {short_repr(reply)}, you changed the board; only read it.")
        if not (isinstance(got, tuple) and len(got) == 2):
            raise ExerciseError(
                f"judge: for {what}, {short_repr(reply)}, you returned {short_repr(got)}; expected a pair."
            )
        if expected[0] is not None:
            if got != (expected[0], None):
                raise ExerciseError(
                    f"judge: for {what}, {short_repr(reply)} on the board {JUDGE_BOARD!r} (O in 0, X in 4), you "
                    f"returned {short_repr(got)}; it is a legal move, expected {(expected[0], None)!r}."
                )
            continue
        if got[0] is not None:
            raise ExerciseError(
                f"judge: for {what}, {short_repr(reply)} on the board {JUDGE_BOARD!r} (O in 0, X in 4), you returned "
                f"{short_repr(got)}; it is an invalid answer ({expected[1]}), expected (None, your explanation)."
            )
        if not (isinstance(got[1], str) and got[1].strip()):
            raise ExerciseError(
                f"judge: for {what}, {short_repr(reply)}, your explanation is {short_repr(got[1])}; expected a "
                "non-empty string that says what is wrong (the model reads it)."
            )
        explanations[what] = got[1]
    kinds = {kind: explanations[f"an answer with {kind}"] for kind in JUDGE_KINDS}
    for kind, text in kinds.items():
        same = [other for other, other_text in kinds.items() if other != kind and other_text == text]
        if same:
            raise ExerciseError(
                f"judge: an answer with {kind}, {JUDGE_KINDS[kind]!r}, and one with {same[0]}, "
                f"{JUDGE_KINDS[same[0]]!r}, get the same explanation, {short_repr(text)}; say which mistake it is, "
                "so that the model can fix it."
            )
    return (
        f"judge gives the right cell, or an explanation of the mistake, for {len(JUDGE_CASES) + len(JUDGE_KINDS)} "
        "replies, a 5,000-digit one too."
    )


# ---------------------------------------------------------------- part 2: the opponent
# Checked by properties, not against the reference's draws: any order of dice that has them passes.


OPPONENT_BOARDS = ["X...O....", "....X....", ".........", "X.O.X....", "XO..X...O", "XOX.O.X.."]
SEEDS = range(800)  # game seeds for the opponent's shares: enough to tell a share of 1/4 from 1/8
Z = 3.9  # the shares' intervals: a correct opponent falls outside one about once in 10,000


@contextlib.contextmanager
def global_random_restored():
    """The global random module's state as it was, whatever the block seeds (a check reseeds it on purpose)."""
    state = random.getstate()
    try:
        yield
    finally:
        random.setstate(state)


def within_chance(count: int, n: int, expected: float) -> bool:
    """Whether `count` of `n` is what a true share of `expected` gives, by its Wilson interval at Z."""
    from course_lib.evaluation import wilson_interval

    low, high = wilson_interval(count, n, z=Z)
    return low <= expected <= high


def check_reply(opponent_reply, text: str, prob: float, seed: int) -> None:
    """One reply: an empty cell, optimal at 0, the board untouched, the same when asked again."""
    from tictactoe.game import best_moves, legal_moves

    board = _board(text)
    got = call_part(opponent_reply, board, prob, seed)
    where = f"opponent_reply(board {text!r}, random_move_prob={prob}, game_seed={seed})"
    if board != _board(text):
        raise ExerciseError(f"{where} changed the board it was given; return a cell, play nothing.")
    if got not in legal_moves(board):
        raise ExerciseError(f"{where} returned {got!r}; expected an empty cell, one of {legal_moves(board)}.")
    if prob == 0.0 and got not in best_moves(board, "O"):
        raise ExerciseError(
            f"{where} played {got}, not an optimal move {best_moves(board, 'O')}: at random_move_prob 0 choose "
            "among best_moves(board, OPPONENT)."
        )
    random.seed(seed + 1)  # the global random module must not matter
    if (again := call_part(opponent_reply, _board(text), prob, seed)) != got:
        raise ExerciseError(
            f"{where} played {got}, then {again} when asked again: the same game and board must get the same reply "
            "(make your own random.Random from game_seed and the board)."
        )


def check_opponent_reply(opponent_reply) -> str:
    """05, part 2: O's move, a function of the game's seed and the board alone: at random_move_prob 0 every
    optimal move, about equally often over games; a random legal move with probability random_move_prob."""
    from tictactoe.game import best_moves, legal_moves

    with global_random_restored():
        for text in OPPONENT_BOARDS:
            for prob in (0.0, 0.3, 1.0):
                for seed in range(20):
                    check_reply(opponent_reply, text, prob, seed)
    centre = _board("....X....")
    optimal, legal = best_moves(centre, "O"), legal_moves(centre)
    for prob, cells, what in [(0.0, optimal, "each corner (the optimal moves)"), (1.0, legal, "each empty cell")]:
        replies = [call_part(opponent_reply, list(centre), prob, seed) for seed in SEEDS]
        for cell in cells:
            if not within_chance(replies.count(cell), len(SEEDS), 1 / len(cells)):
                raise ExerciseError(
                    f"opponent_reply: at random_move_prob {prob}, over {len(SEEDS)} game seeds, O answered X in the "
                    f"centre with cell {cell} {replies.count(cell)} times; expected {what} about equally often, "
                    f"{len(SEEDS) // len(cells)} times: choose uniformly (rng.choice), with dice that differ by game."
                )
    for prob in (0.3, 0.7):
        replies = [call_part(opponent_reply, list(centre), prob, seed) for seed in SEEDS]
        others = sum(cell not in optimal for cell in replies)
        expected = prob * (len(legal) - len(optimal)) / len(legal)  # half the random moves are edges
        if not within_chance(others, len(SEEDS), expected):
            raise ExerciseError(
                f"opponent_reply: at random_move_prob {prob}, over {len(SEEDS)} game seeds, O answered X in the centre "
                f"with an edge {others} times; expected about {expected * len(SEEDS):.0f} (a random legal move with "
                "probability random_move_prob, and half of those are edges)."
            )
    return (
        "opponent_reply: the same game and board get the same reply; at 0 every optimal move about equally often; "
        "random moves at the rate you set."
    )


# ---------------------------------------------------------------- part 6: the games (who starts, seeds, strata)
# Checked by properties, not against the reference's draws.

GAME_ARGS = [  # keyword arguments of make_games (the reference's make_rows takes the same)
    dict(num_examples=20, seed=0),
    dict(num_examples=12, seed=3, split="eval"),
    dict(num_examples=9, seed=1, min_random_move_prob=0.2, max_random_move_prob=0.6, num_groups=4),
    dict(num_examples=6, seed=2, num_groups=1),
]


def check_row(call: str, i: int, row, args: dict, notebook: dict) -> None:
    """Row i of `call`: its keys, its skill in bucket i % num_groups, O's opening move and the question."""
    keys = set(_ttt().make_rows(1, seed=0)[0]["info"])
    if not isinstance(row, dict) or set(row) != {"question", "answer", "info"} or set(row["info"]) != keys:
        raise ExerciseError(
            f"{call}: row {i} is {short_repr(row, 80)}; expected the keys question, answer, info and in info: "
            f"{', '.join(sorted(keys))}."
        )
    info, prob, groups = row["info"], row["info"]["random_move_prob"], args.get("num_groups", 10)
    low, high = args.get("min_random_move_prob", 0.0), args.get("max_random_move_prob", 1.0)
    width = (high - low) / groups
    bucket_low = low + (i % groups) * width
    if info["bucket"] != i % groups or not max(low, bucket_low - 1e-9) <= prob <= min(high, bucket_low + width):
        raise ExerciseError(
            f"{call}: row {i} has bucket {info['bucket']} and random_move_prob {prob:.3f}; expected bucket "
            f"{i % groups} (i % num_groups) and a value in [{bucket_low:.3f}, {bucket_low + width:.3f}]."
        )
    opening = None if info["model_starts"] else notebook["opponent_reply"]([None] * 9, prob, info["seed"])
    board = [None if cell != opening else "O" for cell in range(9)]
    if info["board"] != _text(board):
        raise ExerciseError(
            f"{call}: row {i} has model_starts {info['model_starts']} and the board {info['board']!r}; expected "
            f"{_text(board)!r}: when O starts, its first move opponent_reply(new_board(), random_move_prob, seed), "
            "else the empty board."
        )
    if row["question"] != notebook["first_user_message"](board, info["model_starts"]) or row["answer"] != "":
        raise ExerciseError(
            f"{call}: row {i} has question {short_repr(row['question'], 50)} and answer {short_repr(row['answer'])}; "
            "expected first_user_message(board, model_starts) and ''."
        )


def check_make_games(make_games) -> str:
    """05, part 6: the rows, a deterministic function of the arguments: stratified skills, unique game seeds,
    train and eval games apart, about half started by the model, O's opening move from opponent_reply."""
    notebook = make_games.__globals__  # the opponent_reply and first_user_message that make_games uses
    for args in GAME_ARGS:
        call = "make_games(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
        rows = call_part(make_games, **args)
        if not isinstance(rows, list) or len(rows) != args["num_examples"]:
            raise ExerciseError(f"{call} returned {short_repr(rows)}; expected a list of {args['num_examples']} rows.")
        for i, row in enumerate(rows):
            check_row(call, i, row, args, notebook)
        if len({row["info"]["seed"] for row in rows}) != len(rows):
            raise ExerciseError(f"{call}: two rows have the same game seed; draw again until the seed is new.")
        with global_random_restored():
            random.seed(len(rows))  # the global random module must not matter
            again = call_part(make_games, **args)
        if again != rows:
            raise ExerciseError(
                f"{call} returned other rows when called again: draw with your own random.Random made from split "
                "and seed, never the global random module."
            )
    train, evaluation, other = (
        {row["info"]["seed"] for row in call_part(make_games, 200, seed=seed, split=split)}
        for seed, split in [(0, "train"), (0, "eval"), (1, "train")]
    )
    for games, what in [(evaluation, "split='eval'"), (other, "seed=1")]:
        if train & games:
            raise ExerciseError(
                f"make_games(200, seed=0) and make_games(200, {what}) share the game seeds "
                f"{sorted(train & games)[:3]}: make the generator from split and seed, each draws its own."
            )
    starts = sum(row["info"]["model_starts"] for row in call_part(make_games, 400, seed=0))
    if not within_chance(starts, 400, 0.5):
        raise ExerciseError(
            f"make_games(400, seed=0): the model starts {starts} of 400 games; expected about half, decided per game."
        )
    return (
        f"make_games: stratified skills, unique seeds and the same rows every time for {len(GAME_ARGS)} settings; "
        f"train and eval games apart; the model starts {starts} of 400."
    )


# ---------------------------------------------------------------- part 5: the rewards

ENDINGS = {  # ending -> the game keys the reward functions read
    "win, 4 clean answers": dict(winner="X", model_turns=4, well_formed_turns=4, invalid_moves=0),
    "draw, 4 clean answers": dict(winner="draw", model_turns=4, well_formed_turns=4, invalid_moves=0),
    "loss, 4 clean answers": dict(winner="O", model_turns=4, well_formed_turns=4, invalid_moves=0),
    "win after one answer without a tag": dict(winner="X", model_turns=5, well_formed_turns=4, invalid_moves=1),
    "win after taking a taken cell": dict(winner="X", model_turns=5, well_formed_turns=5, invalid_moves=1),
    "unfinished: 10 answers, no tag": dict(winner=None, model_turns=10, well_formed_turns=0, invalid_moves=10),
    "unfinished: no answer judged": dict(winner=None, model_turns=0, well_formed_turns=0, invalid_moves=0),
}


def reward_parts(rubric, state: dict) -> dict:
    """Each reward function's value for a state of the game keys (called as verifiers calls it)."""
    state = {"model_starts": True, **state}
    offered = {"state": state, "prompt": [], "completion": [], "answer": "", "info": {}, "parser": rubric.parser}
    parts = {}
    for func in rubric.funcs:
        wanted = inspect.signature(func).parameters
        takes_all = any(p.kind == p.VAR_KEYWORD for p in wanted.values())
        parts[func.__name__] = float(
            call_part(func, **(offered if takes_all else {k: v for k, v in offered.items() if k in wanted}))
        )
    return parts


def reward_table(rubric, endings: dict | None = None) -> pd.DataFrame:
    """One row per ending: each weighted function's value (the weight-0 metrics left out) and the reward."""
    rows = []
    for ending, state in (endings or ENDINGS).items():
        parts = reward_parts(rubric, state)
        weighted = [(f.__name__, w) for f, w in zip(rubric.funcs, rubric.weights) if w]
        reward = sum(w * parts[name] for name, w in weighted)
        rows.append({"ending": ending, **{name: parts[name] for name, _ in weighted}, "reward": reward})
    return pd.DataFrame(rows)


def check_make_game_rubric(make_game_rubric) -> str:
    """05, part 5: win_reward, format_reward and any_invalid_move with weights 1, 0.2 and -penalty, then the metrics."""
    import verifiers as vf

    ttt = _ttt()
    reference = ttt.make_rubric(ttt.MoveParser())
    expected = [(f.__name__, w) for f, w in zip(reference.funcs, reference.weights)]
    for penalty in (None, 0.3):
        call = "make_game_rubric(parser)" if penalty is None else f"make_game_rubric(parser, penalty={penalty})"
        rubric = call_part(make_game_rubric, ttt.MoveParser(), **({} if penalty is None else {"penalty": penalty}))
        if not isinstance(rubric, vf.Rubric):
            raise ExerciseError(f"{call} returned {short_repr(rubric)}; expected a vf.Rubric.")
        got = [(f.__name__, w) for f, w in zip(rubric.funcs, rubric.weights)]
        want = expected[:2] + [("any_invalid_move", -(penalty or 0.1))]
        if got[:3] != want:
            raise ExerciseError(
                f"{call}: your first functions and weights are {got[:3]}; expected {want} "
                "(the penalty is a negative weight on a 0/1 function)."
            )
        if got[3:] != expected[3:]:
            raise ExerciseError(f"{call}: after the rewards come the METRICS with weight 0; you have {got[3:]}.")
    rubric = make_game_rubric(ttt.MoveParser())
    reference = ttt.make_rubric(ttt.MoveParser())
    for ending, state in ENDINGS.items():
        try:
            mine = reward_parts(rubric, state)
        except ExerciseError as error:
            raise ExerciseError(f"make_game_rubric: for the ending '{ending}', {error}") from None
        theirs = reward_parts(reference, state)
        for name in ("win_reward", "format_reward", "any_invalid_move"):
            if not math.isclose(mine[name], theirs[name]):
                raise ExerciseError(
                    f"make_game_rubric: for the ending '{ending}' ({state}), your {name} returned {mine[name]:g}; "
                    f"expected {theirs[name]:g}."
                )
    return "make_game_rubric: the reference's rewards for every kind of ending, and a penalty you can set."


def check_penalty_threshold(answer) -> None:
    """05, experiment: the smallest penalty at which a win with one untagged answer scores below a clean draw."""
    ttt = _ttt()

    def before_penalty(state):
        return sum(w * f(state) for f, w in ttt.REWARD_WEIGHTS.items() if f is not ttt.any_invalid_move)

    slip, draw = (before_penalty(ENDINGS[e]) for e in ("win after one answer without a tag", "draw, 4 clean answers"))
    if answer is None:
        print("Not answered yet: find the penalty where the two bars cross and set `threshold` above.")
        return
    if not (isinstance(answer, (int, float)) and math.isclose(answer, slip - draw, abs_tol=0.011)):
        raise ExerciseError(
            f"the penalty threshold: {answer!r} is not it. Without the penalty the win with a slip scores {slip:.2f} "
            f"and the clean draw {draw:.2f}: raise `penalty` until the orange bar falls below the grey one."
        )
    print(
        f"Correct: above {slip - draw:.2f} one illegal move costs more than the gap between a win and a draw. "
        "Would you want that? The course keeps 0.1: a win should stay a win."
    )


# ---------------------------------------------------------------- part 7: the environment class


SCRIPTS = {  # fixed replies, one per turn, whatever the board: legal, taken, malformed and missing moves
    "centre, then corners": ["<move>4</move>", "<move>0</move>", "<move>8</move>", "<move>2</move>", "<move>6</move>"],
    "sloppy": ["I play 4", "<move>4</move>", "<move>4</move>", "<move>09</move>", "<think>x</think><move>1</move>"]
    + ["<move>7</move>", "<move>3</move>", "<move>5</move>"],
    "stubborn": ["Let me think about it."],
}


def _players():
    from course_lib.scripted_client import ScriptedClient
    from course_lib.workshop import Scripted

    players = {name: (lambda replies=replies: Scripted(replies)) for name, replies in SCRIPTS.items()}
    return {"expert": lambda: ScriptedClient("expert"), "random": lambda: ScriptedClient("random"), **players}


GAME_KEYS = ["board", "moves", "model_turns", "well_formed_turns", "invalid_moves", "winner", "game_over"]


async def _play(env, row, make_player):
    state = await env.rollout(dict(row), make_player(), "scripted", {})
    await env.rubric.score_rollout(state)
    return state


def _texts(state, role: str) -> list[str]:
    """The texts of the completion's messages of `role`: "user" (what the environment said) or "assistant"."""
    from tictactoe import message_text

    return [message_text(m) for m in state["completion"] if (m.get("role") if isinstance(m, dict) else m.role) == role]


def check_tictactoe_env(env_class) -> str:
    """05, part 7: setup_state, play_turn and the stop condition play every game as the reference does: the same
    states and stop, and messages that show the same board (and an invalid answer's problem, in the words of the
    notebook's judge). O plays the reference's opponent in both, in place of yours (Part 2 checked it), so only the
    class is compared."""
    import datasets

    notebook = first_function(env_class).__globals__  # where play_turn finds opponent_reply
    yours = notebook.get("opponent_reply")
    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # no "Map: ..." bars in the check's output
    notebook["opponent_reply"] = reference_opponent
    judge = notebook.get("judge") if callable(notebook.get("judge")) else _ttt().MoveParser().judge
    try:
        return _check_tictactoe_env(env_class, judge)
    finally:
        notebook["opponent_reply"] = yours
        if not quiet:
            datasets.enable_progress_bars()


def reference_opponent(board, random_move_prob: float, game_seed: int) -> int:
    """The reference environment's reply, called as the notebook's opponent_reply is."""
    from tictactoe.game import opponent_move

    return opponent_move(board, "O", random_move_prob, _ttt().opponent_rng(game_seed, board))


def _check_tictactoe_env(env_class, judge) -> str:
    from datasets import Dataset

    from course_lib.offline import run_coroutine
    from tictactoe import message_text
    from tictactoe.game import read_board

    ttt = _ttt()
    rows = Dataset.from_list(ttt.make_rows(6, seed=5, split="eval"))
    settings = dict(
        eval_dataset=rows, system_prompt=ttt.SYSTEM_PROMPT, parser=ttt.MoveParser(), max_turns=ttt.MAX_TURNS
    )
    reference = ttt.TicTacToeEnv(rubric=ttt.make_rubric(ttt.MoveParser()), **settings)
    env = call_part(env_class, rubric=ttt.make_rubric(ttt.MoveParser()), **settings)
    rows = reference.get_eval_dataset()  # the rows with their prompts, as verifiers formats them
    row = next(r for r in rows if not r["info"]["model_starts"])

    def setup_state(state):
        return run_coroutine(env.setup_state(state))

    mine = call_part(setup_state, {"info": dict(row["info"])})
    theirs = run_coroutine(reference.setup_state({"info": dict(row["info"])}))
    for key in ["board", "model_starts", "random_move_prob", "game_seed", *GAME_KEYS[1:]]:  # GAME_KEYS[0]: board
        if not isinstance(mine, dict) or key not in mine or mine[key] != theirs[key]:
            got = mine.get(key, "no such key") if isinstance(mine, dict) else mine
            raise ExerciseError(
                f"setup_state: for the row info {dict(row['info'])}, your state[{key!r}] is {short_repr(got)}; "
                f"expected {short_repr(theirs[key])}."
            )
    cell = next(i for i in range(9) if mine["board"][i] is None)
    call_part(env.play_turn, f"<move>{cell}</move>", mine)  # the stub's TODO surfaces here, before any rollout

    for name, make_player in _players().items():
        for r in rows:
            got, expected = run_coroutine(_play(env, r, make_player)), run_coroutine(_play(reference, r, make_player))
            game = f"game seed {r['info']['seed']} (O {'second' if r['info']['model_starts'] else 'first'})"
            if got.get("error") is not None:
                raise ExerciseError(
                    f"play_turn: in {game}, against the player '{name}', your environment failed: {got['error']}."
                )
            replies, heard, wanted = _texts(expected, "assistant"), _texts(got, "user"), _texts(expected, "user")
            boards = [read_board(message_text(r["prompt"][-1])), *map(read_board, wanted)]  # before each answer
            for turn, (said, want) in enumerate(zip(heard, wanted)):
                _, problem = call_part(judge, replies[turn], list(boards[turn]))  # in the words play_turn shows
                if read_board(said) != read_board(want) or (problem and problem not in said):
                    shows = f"the problem, {problem!r}, and " if problem else ""
                    raise ExerciseError(
                        f"play_turn: in {game}, after the replies {short_repr(replies[: turn + 1], 120)}, your "
                        f"environment said {short_repr(said, 120)}; expected a message that shows {shows}the board "
                        f"as it is now, render(board), like the reference's {short_repr(want, 120)}."
                    )
            if len(heard) != len(wanted) or got["stop_condition"] != expected["stop_condition"]:
                raise ExerciseError(
                    f"max_turns_reached: in {game}, against '{name}', your game stopped by {got['stop_condition']!r} "
                    f"with {got.get('model_turns')} of {len(_texts(got, 'assistant'))} answers judged; the reference "
                    f"by {expected['stop_condition']!r} with {expected['model_turns']} of {len(replies)} (return True "
                    "once state['model_turns'] >= self.max_turns: verifiers' own counts answers not yet judged)."
                )
            for key in GAME_KEYS:
                if got.get(key) != expected[key]:
                    raise ExerciseError(
                        f"play_turn: in {game}, after the replies {short_repr(replies, 120)}, your state[{key!r}] is "
                        f"{short_repr(got.get(key))}; the reference's is {short_repr(expected[key])}."
                    )
    over = run_coroutine(_play(env, rows[0], _players()["expert"]))
    before = {key: repr(over[key]) for key in GAME_KEYS}
    try:
        env.play_turn("<move>0</move>", over)
    except Exception:
        pass  # refusing a reply after the end is fine; changing the state is not
    changed = [key for key in GAME_KEYS if repr(over[key]) != before[key]]
    if changed:
        raise ExerciseError(
            f"play_turn: a reply sent after the end of a game changed state{changed}; when state['game_over'] is "
            "True, return a message and change nothing."
        )
    return "TicTacToeEnv: 30 scripted games (expert, random, fixed replies) play, show and end as the reference's."


# ---------------------------------------------------------------- yours against the reference


def _moves(state) -> str:
    return " ".join(f"{player}{cell}" for player, cell in state["moves"])


def compare_games(mine, reference, games: int = 4, players: dict | None = None) -> pd.DataFrame:
    """Play the reference's first seeded evaluation games with scripted players through both environments: a
    table of rewards and moves, and one sentence: all the same, or the first difference and the part behind it.
    Matching the reference move for move is this comparison's task, not the checks': an opponent or game rows
    that draw their dice in another order pass their checks and still play other games here, and it says so."""
    from course_lib.offline import run_coroutine

    players = players or _players()
    rows = reference.get_eval_dataset().select(range(games))
    own = mine.get_eval_dataset().select(range(games))
    if own["info"] != rows["info"]:
        print(
            "Your make_games draws other games than the reference's (its check tests properties, not draws): both "
            "environments play the reference's games below."
        )
    table = []
    for row in rows:
        for name, make_player in players.items():
            theirs = run_coroutine(_play(reference, row, make_player))
            yours = run_coroutine(_play(mine, row, make_player))
            table.append(
                {
                    "game": row["example_id"],
                    "seed": row["info"]["seed"],
                    "O's skill (random_move_prob)": round(row["info"]["random_move_prob"], 2),
                    "player": name,
                    "reference moves": _moves(theirs),
                    "your moves": _moves(yours),
                    "reference reward": theirs["reward"],
                    "your reward": yours["reward"],
                    "same": _moves(theirs) == _moves(yours) and math.isclose(theirs["reward"], yours["reward"]),
                    "_states": (yours, theirs),
                }
            )
    frame = pd.DataFrame(table)
    different = frame[~frame.same]
    if different.empty:
        print(f"All {len(frame)} games are the same: the same moves (O's included) and the same rewards.")
    else:
        first = different.iloc[0]
        yours, theirs = first["_states"]
        print(
            f"{len(different)} of {len(frame)} games differ; the first: game {first.game}, player '{first.player}': "
            + _difference(yours, theirs)
        )
    return frame.drop(columns="_states")


def _difference(yours, theirs) -> str:
    """The first difference between two plays of one game, and the part that makes it."""
    for i, (a, b) in enumerate(zip(yours["moves"], theirs["moves"])):
        if a != b:
            part = (
                "opponent_reply: if its check passed, it draws its dice in another order than the reference's, "
                "which is fine; draw as the reference does to compare move for move"
                if b[0] == "O"
                else "judge or TicTacToeEnv.play_turn"
            )
            return f"move {i + 1} is {a[0]}{a[1]} in yours, {b[0]}{b[1]} in the reference's ({part})."
    if len(yours["moves"]) != len(theirs["moves"]):
        return (
            f"yours played {len(yours['moves'])} moves, the reference {len(theirs['moves'])} "
            "(TicTacToeEnv.play_turn or winner)."
        )
    return (
        f"the same moves, but the reward is {yours['reward']:.4f} in yours, {theirs['reward']:.4f} in the "
        f"reference's (make_game_rubric; yours: {yours['metrics']})."
    )


# ---------------------------------------------------------------- yours in notebooks 06 and 09

# The settings the rows are compared at: load_environment's defaults, the harness's two opponents (06, 08, 10)
# and a range of opponents like GRPO's (09), each train and eval split.
ROW_SETTINGS = [
    {},
    {"min_random_move_prob": 1.0, "max_random_move_prob": 1.0, "num_groups": 1},
    {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0, "num_groups": 1},
    {"min_random_move_prob": 0.0, "max_random_move_prob": 0.5, "num_groups": 8, "seed": 100},
]
ROWS, GAMES = 20, 6  # rows per split and setting; games per scripted player


def how_it_differs(mine) -> str | None:
    """None if the learner's tic-tac-toe module `mine` (its load_environment) plays as the reference does, else
    the first difference, in words. The same: what verifiers is given (system prompt, rows' prompts, what the
    parser reads, the rubric's functions and weights, max_turns), the rows' game seeds and opponents at
    ROW_SETTINGS, and GAMES seeded games per scripted player (expert, random, fixed legal, taken, malformed and
    missing replies): every message of the environment, every move, the reward, its parts and the game keys.
    Such a module plays the reference's games, so notebooks 06 and 09 may use it and share stored games."""
    import datasets

    from course_lib.offline import run_coroutine
    from course_lib.workshop import verifiers_arguments

    ttt = _ttt()
    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # no "Map: ..." bars in a notebook's output
    try:
        for settings in ROW_SETTINGS:
            envs = [
                m.load_environment(num_train_examples=ROWS, num_eval_examples=ROWS, **settings) for m in (mine, ttt)
            ]
            given, expected = (verifiers_arguments(env) for env in envs)
            if given["system_prompt"] != expected["system_prompt"]:
                got, want = given["system_prompt"], expected["system_prompt"]
                return f"its system prompt is {short_repr(got, 80)}, the course's {short_repr(want, 80)}"
            for split in ("get_dataset", "get_eval_dataset"):
                got, want = (getattr(env, split)() for env in envs)
                where = f"{split}() with {settings or 'the defaults'}"
                if len(got) != len(want):
                    return f"its {where} has {len(got)} rows, the course's {len(want)}"
                for i in range(len(want)):
                    for column, parts in (
                        ("info", "make_games or opponent_reply"),
                        ("question", "first_user_message or render"),
                    ):
                        a, b = got[i][column], want[i][column]
                        if a != b and isinstance(a, dict) and isinstance(b, dict):  # name the key that differs
                            key = next(k for k in {**b, **a} if a.get(k, "no such key") != b.get(k, "no such key"))
                            column, a, b = f"{column}[{key!r}]", a.get(key, "no such key"), b.get(key, "no such key")
                        if a != b:
                            return (
                                f"row {i} of its {where} has the {column} {short_repr(a, 80)}, the course's "
                                f"{short_repr(b, 80)} ({parts})"
                            )
            for argument, want in expected.items():
                if given[argument] != want:
                    return f"its {argument} is {short_repr(given[argument])}, the course's {short_repr(want)}"
        env, reference = (m.load_environment(num_train_examples=0, num_eval_examples=GAMES) for m in (mine, ttt))
        for row in reference.get_eval_dataset():
            for name, make_player in _players().items():
                got = run_coroutine(_play(env, row, make_player))
                want = run_coroutine(_play(reference, row, make_player))
                game = f"in game seed {row['info']['seed']} against the player '{name}'"
                if got.get("error") is not None:
                    return f"{game}, yours failed: {got['error']}"
                heard, wanted = _texts(got, "user"), _texts(want, "user")
                for turn, (said, want_said) in enumerate(zip(heard, wanted), 1):
                    if said != want_said:
                        said, want_said = short_repr(said, 80), short_repr(want_said, 80)
                        return f"{game}, its message {turn} is {said}, the course's {want_said}"
                keys = [*GAME_KEYS, "reward", "metrics", "stop_condition"]
                if len(heard) != len(wanted) or any(got.get(key) != want[key] for key in keys):
                    return f"{game}, " + _difference(got, want)
    finally:
        if not quiet:
            datasets.enable_progress_bars()
    return None


def load_module(folder: Path):
    """The package in `folder` (its __init__.py), imported fresh under its folder's name."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        folder.name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[folder.name] = module  # as an import would: its classes find their module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[folder.name]
        raise
    return module


def yours_or_reference(use: str, folder: Path | None = None):
    """The tic-tac-toe module (its load_environment) that notebook 06 plays in: yours, my_envs/my_tictactoe
    written in notebook 05, if it exists and plays as the course's (`how_it_differs`), else the course's
    `tictactoe`. Prints one line: which, why, and `use` (what the notebook does with it)."""
    from course_lib.workshop import MY_ENVS

    folder = Path(folder) if folder is not None else MY_ENVS / "my_tictactoe"
    yours = f"{folder.parent.name}/{folder.name}"
    if not (folder / "__init__.py").is_file():
        problem = "is absent (notebook 05 writes it)"
    else:
        try:
            mine = load_module(folder)
            difference = how_it_differs(mine)
        except Exception as error:
            problem = f"does not load or play: {type(error).__name__}: {' '.join(str(error).split())[:120]}"
        else:
            if difference is None:
                print(
                    f"Tic-tac-toe environment: yours, {yours} from notebook 05 (it plays as the course's: the same "
                    f"prompts, rows, and {GAMES * len(_players())} scripted games): {use}."
                )
                return mine
            problem = f"does not play as the course's: {difference}"
    print(f"Tic-tac-toe environment: the course's (tictactoe), as yours, {yours}, {problem}; {use}.")
    return _ttt()


WORKSHOP = {  # part -> (the notebook whose solution block defines it, its check); names unique across notebooks
    "winner": (NOTEBOOK, check_winner),
    "opponent_reply": (NOTEBOOK, check_opponent_reply),
    "parse_move": (NOTEBOOK, check_parse_move),
    "judge": (NOTEBOOK, check_judge),
    "make_game_rubric": (NOTEBOOK, check_make_game_rubric),
    "make_games": (NOTEBOOK, check_make_games),
    "TicTacToeEnv": (NOTEBOOK, check_tictactoe_env),
}
