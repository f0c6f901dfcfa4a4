"""The workshop checks of notebook 05 (05_tictactoe_env.ipynb): one check per part the learner writes.

Each check runs the part on real cases (hand-written replies, boards from real games, scripted games
through the environment) and returns a one-line message naming the part, or raises ExerciseError with
one sentence naming the part, an example input and what was expected (see course_lib/exercise_mechanism.py).
The reference is the course's environment, course_lib/envs/tictactoe/ (imported as `tictactoe`).
`compare_games` plays the same seeded games through the learner's package and the reference.
"""

import inspect
import math
import random

import pandas as pd

from course_lib.exercise_mechanism import ExerciseError, call_part, check_fast_on_unclosed_tags, short_repr

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


# ---------------------------------------------------------------- part 2: the move parser


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
    """05, part 2: the last complete <move>...</move> block, stripped, or None; linear time."""
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


# ---------------------------------------------------------------- part 3: the judge

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


def check_judge(judge) -> str:
    """05, part 3: (cell, None) for a legal move, (None, the problem in words) otherwise; never raises."""
    parser = _ttt().MoveParser()
    for reply, what in JUDGE_CASES:
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
        if (got[0] is None) != (expected[0] is None) or got[0] != expected[0]:
            explain = "a legal move" if expected[0] is not None else "an invalid answer"
            raise ExerciseError(
                f"judge: for {what}, {short_repr(reply)} on the board {JUDGE_BOARD!r} (O in 0, X in 4), you returned "
                f"{short_repr(got)}; it is {explain}, expected {short_repr(expected)}."
            )
        if got[1] != expected[1]:
            raise ExerciseError(
                f"judge: for {what}, {short_repr(reply)}, your problem text is {short_repr(got[1], 70)}; expected "
                f"{expected[1]!r} (the model reads it: the environment's message must say exactly this)."
            )
    return f"judge gives the right cell or the right problem for {len(JUDGE_CASES)} replies, a 5,000-digit one too."


# ---------------------------------------------------------------- part 4: the opponent


OPPONENT_BOARDS = ["X...O....", "....X....", ".........", "X.O.X....", "XO..X...O", "XOX.O.X.."]


def check_opponent_reply(opponent_reply) -> str:
    """05, part 4: O's move, random with probability random_move_prob, else a uniformly chosen optimal
    move, with dice random.Random(f"{game_seed}:{board}") drawn in the reference's order."""
    from tictactoe.game import best_moves, legal_moves, opponent_move

    centre = _board("....X....")
    for prob in (0.0, 0.5, 1.0):
        for seed in range(40):
            board = list(centre)
            got = call_part(opponent_reply, board, prob, seed)
            if board != centre:
                raise ExerciseError("opponent_reply: it changed the board it was given; return a cell, play nothing.")
            if got not in legal_moves(centre):
                raise ExerciseError(
                    f"opponent_reply(board, {prob}, {seed}) with X in the centre returned {got!r}; "
                    "expected an empty cell."
                )
            if prob == 0.0 and got not in best_moves(centre, "O"):
                raise ExerciseError(
                    f"opponent_reply(board, 0.0, {seed}) with X in the centre played {got}, not an optimal move "
                    f"{best_moves(centre, 'O')}: at random_move_prob 0 play rng.choice(best_moves(board, 'O'))."
                )
            again = call_part(opponent_reply, list(centre), prob, seed)
            if again != got:
                raise ExerciseError(
                    f"opponent_reply(board, {prob}, {seed}) with X in the centre played {got}, then {again} when "
                    "asked again: the same game and board must get the same reply (make the dice from game_seed "
                    "and the board)."
                )
    optimal = {call_part(opponent_reply, list(centre), 0.0, seed) for seed in range(40)}
    if len(optimal) < 4:
        raise ExerciseError(
            f"opponent_reply: at random_move_prob 0, over 40 game seeds, O answered X in the centre only with "
            f"{sorted(optimal)}; the four corners are optimal: choose among best_moves(board, 'O') uniformly."
        )
    anywhere = {call_part(opponent_reply, list(centre), 1.0, seed) for seed in range(40)}
    if not anywhere - set(best_moves(centre, "O")):
        raise ExerciseError(
            "opponent_reply: at random_move_prob 1, over 40 game seeds, O always played an optimal move; with "
            "probability random_move_prob play rng.choice(legal_moves(board)) instead."
        )
    for text in OPPONENT_BOARDS:
        for prob in (0.0, 0.3, 0.7, 1.0):
            for seed in (0, 7, 123456789):
                got = call_part(opponent_reply, _board(text), prob, seed)
                expected = opponent_move(_board(text), "O", prob, _ttt().opponent_rng(seed, _board(text)))
                if got != expected:
                    raise ExerciseError(
                        f"opponent_reply(board {text!r}, random_move_prob={prob}, game_seed={seed}) played {got}; the "
                        f"reference plays {expected}. Make "
                        "rng = random.Random(f'{game_seed}:{board_to_text(board)}'), "
                        "draw rng.random() first (always), then rng.choice(legal_moves(board)) if it is below "
                        "random_move_prob, else rng.choice(best_moves(board, 'O'))."
                    )
    return "opponent_reply: seeded by game and board, optimal and unpredictable at 0, random at 1, as the reference."


# ---------------------------------------------------------------- part 5: the games (who starts, seeds, strata)

GAME_ARGS = [  # keyword arguments of make_games / the reference's make_rows
    dict(num_examples=20, seed=0),
    dict(num_examples=12, seed=3, split="eval"),
    dict(num_examples=9, seed=1, min_random_move_prob=0.2, max_random_move_prob=0.6, num_groups=4),
    dict(num_examples=6, seed=2, num_groups=1),
]


def check_make_games(make_games) -> str:
    """05, part 5: the dataset rows, the same as the reference's make_rows for the same arguments."""
    make_rows = _ttt().make_rows
    for args in GAME_ARGS:
        call = "make_games(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
        rows, expected = call_part(make_games, **args), make_rows(**args)
        if not isinstance(rows, list) or len(rows) != len(expected):
            raise ExerciseError(f"{call} returned {short_repr(rows)}; expected a list of {len(expected)} rows.")
        groups = args.get("num_groups", 10)
        low, high = args.get("min_random_move_prob", 0.0), args.get("max_random_move_prob", 1.0)
        for i, (row, want) in enumerate(zip(rows, expected)):
            if not isinstance(row, dict) or set(row) != set(want) or set(row.get("info") or {}) != set(want["info"]):
                raise ExerciseError(
                    f"{call}: row {i} is {short_repr(row, 80)}; expected the keys question, answer, info and in info: "
                    f"{', '.join(want['info'])}."
                )
            info, prob = row["info"], row["info"]["random_move_prob"]
            width = (high - low) / groups
            bucket_low = low + (i % groups) * width
            if info["bucket"] != i % groups or not bucket_low - 1e-9 <= prob <= bucket_low + width + 1e-9:
                raise ExerciseError(
                    f"{call}: row {i} has bucket {info['bucket']} and random_move_prob {prob:.3f}; expected bucket "
                    f"{i % groups} (i % num_groups) and a value in [{bucket_low:.3f}, {bucket_low + width:.3f}]."
                )
            board = _board(info["board"])
            if info["model_starts"] != (random.Random(info["seed"]).random() < 0.5):
                raise ExerciseError(
                    f"{call}: row {i} (game seed {info['seed']}) has model_starts {info['model_starts']}; expected "
                    "random.Random(game_seed).random() < 0.5: the game's seed decides who starts."
                )
            if board.count("O") != (not info["model_starts"]) or "X" in board:
                raise ExerciseError(
                    f"{call}: row {i} has model_starts {info['model_starts']} and the board {info['board']!r}; when O "
                    "starts, its first move is on the board, else the board is empty."
                )
        if call_part(make_games, **args) != rows:
            raise ExerciseError(
                f"{call} returned other rows when called again: draw with your own random.Random(f'tictactoe:"
                "{split}:{seed}'), never the global random module."
            )
        seeds = [row["info"]["seed"] for row in rows]
        if len(set(seeds)) != len(seeds):
            raise ExerciseError(f"{call}: two rows have the same game seed; draw again until the seed is new.")
        for i, (row, want) in enumerate(zip(rows, expected)):
            for key in ["seed", "random_move_prob", "model_starts", "board"]:
                if row["info"][key] != want["info"][key]:
                    raise ExerciseError(
                        f"{call}: row {i} has {key} {row['info'][key]!r}, the reference {want['info'][key]!r}: draw in "
                        "this order for each row: rng.random() for the random_move_prob, then rng.randrange(2**31) for "
                        "the game seed; the opening move with opponent_reply(board, random_move_prob, game_seed)."
                    )
            if row != want:
                key = next(k for k in want if row[k] != want[k])
                raise ExerciseError(
                    f"{call}: row {i} has {key} {short_repr(row[key], 70)}; expected {short_repr(want[key], 70)} "
                    "(question: first_user_message(board, model_starts); answer: '')."
                )
    return f"make_games gives the reference's rows for {len(GAME_ARGS)} settings: who starts, seeds and strata."


# ---------------------------------------------------------------- part 6: the rewards

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
    """05, part 6: win_reward, format_reward and any_invalid_move with weights 1, 0.2 and -penalty, then the metrics."""
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
    """05, part 7: setup_state, play_turn and the stop condition play every game as the reference does."""
    import datasets

    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # no "Map: ..." bars in the check's output
    try:
        return _check_tictactoe_env(env_class)
    finally:
        if not quiet:
            datasets.enable_progress_bars()


def _check_tictactoe_env(env_class) -> str:
    from datasets import Dataset

    from course_lib.offline import run_coroutine

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
            for turn, (said, want) in enumerate(zip(heard, wanted)):
                if said != want:
                    raise ExerciseError(
                        f"play_turn: in {game}, after the replies {short_repr(replies[: turn + 1], 120)}, your "
                        f"environment said {short_repr(said, 120)}; the reference said {short_repr(want, 120)}."
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
    return "TicTacToeEnv: 30 scripted games (expert, random, fixed replies) play and end exactly as the reference's."


# ---------------------------------------------------------------- yours against the reference


def _moves(state) -> str:
    return " ".join(f"{player}{cell}" for player, cell in state["moves"])


def compare_games(mine, reference, games: int = 4, players: dict | None = None) -> pd.DataFrame:
    """Play the same seeded evaluation games with scripted players through both environments: a table of
    rewards and moves, and one sentence: all the same, or the first difference and the part behind it."""
    from course_lib.offline import run_coroutine

    players = players or _players()
    rows = [env.get_eval_dataset().select(range(games)) for env in (mine, reference)]
    for i, (a, b) in enumerate(zip(*rows)):
        if a["info"] != b["info"] or a["prompt"] != b["prompt"]:
            key = next((k for k in b["info"] if a["info"].get(k) != b["info"][k]), "prompt")
            yours, theirs = (row["info"][key] if key != "prompt" else row["prompt"][-1]["content"] for row in (a, b))
            part = "opponent_reply, which make_games calls for O's opening move" if key == "board" else "make_games"
            raise ExerciseError(
                f"evaluation game {i} differs before anyone plays: its {key} is {short_repr(yours)} in yours, "
                f"{short_repr(theirs)} in the reference's ({part}; load both with the same arguments)."
            )
    table = []
    for row in rows[1]:
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
            part = "opponent_reply" if b[0] == "O" else "judge or TicTacToeEnv.play_turn"
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


WORKSHOP = {  # part -> (the notebook whose solution block defines it, its check); names unique across notebooks
    "winner": (NOTEBOOK, check_winner),
    "opponent_reply": (NOTEBOOK, check_opponent_reply),
    "parse_move": (NOTEBOOK, check_parse_move),
    "judge": (NOTEBOOK, check_judge),
    "make_game_rubric": (NOTEBOOK, check_make_game_rubric),
    "make_games": (NOTEBOOK, check_make_games),
    "TicTacToeEnv": (NOTEBOOK, check_tictactoe_env),
}
