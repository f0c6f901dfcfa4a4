"""Tic-tac-toe as a verifiers multi-turn environment: the model plays X against a seeded O.

Read top to bottom: system prompt, dataset, parser, environment, rubric, `load_environment`.
The rules, the minimax opponent and the renderer come from `game.py` next to this file (pure
Python, no third-party imports; the rest of the course imports it as `tictactoe.game`); this
file only turns them into prompts, turns and rewards. The folder tictactoe/ is self-contained
(it imports only verifiers, datasets and the standard library): copy it and change the game.

One game = one dataset row. Its `info` holds everything that decides the game besides the
model: `seed` (an integer), `model_starts` (derived from the seed), `random_move_prob` (the
opponent's chance of a uniformly random move instead of a uniformly chosen optimal one) and
`board` (the opening position as nine characters, "." for empty: the opponent's first move
is already on it when the opponent starts). Each opponent reply uses a fresh
`random.Random(f"{seed}:{board}")`, so two rollouts of one row that reach the same position
get the same reply (what GRPO's group comparison needs), and the whole dataset is a
deterministic function of `load_environment`'s arguments.

Rewards (weights in brackets): `win_reward` 1 win / 0.5 draw / 0 loss or unfinished [1.0];
`format_reward` = share of the model's answers that are well formed [0.2]; `any_invalid_move`
= 1.0 if any answer was invalid, else 0.0 [-0.1], i.e. a flat -0.1 penalty. Metrics [0]:
won, drew, lost, invalid_moves, model_turns, model_started (MultiTurnEnv adds num_turns).

State: verifiers' own keys plus these game keys, all JSON-serializable (so evaluate(...,
state_columns=GAME_STATE_COLUMNS) can return them):
    board              list of 9 cells, "X" / "O" / None (the model is always X)
    model_starts       bool        random_move_prob  float      game_seed  int
    moves              [[player, cell], ...] in play order, the opponent's opening included
    model_turns        answers judged so far     well_formed_turns  answers in the right format
    invalid_moves      answers that were not a legal move
    winner             "X", "O", "draw", or None (game not finished: playing, turn cap, error)
    game_over          True once the game ended (result or turn cap)

A trainer can run whole games with `env.rollout(row, client, model)` and a vf.Client that
wraps its own generate, then `env.rubric.score_rollout(state)`. Or it can drive the game turn
by turn, outside `rollout()`:

    env = load_environment(...)
    row = env.get_dataset()[i]             # TRL hands rollout_func only prompts: key them by i
    state = await env.init_state(row, client=client, model="policy")  # any vf.Client: only stored
    state = await env.setup_state(state)   # the game keys above
    messages = list(row["prompt"])
    while not await env.is_completed(state):
        text = generate(messages)          # the policy's answer to the last user message
        messages.append({"role": "assistant", "content": text})
        new = await env.env_response(messages, state)  # judges `text`; vf.UserMessage objects
        messages += [m.model_dump() for m in new]      # plain dicts for a chat template
    state["completion"] = messages[len(row["prompt"]):]
    await env.rubric.score_rollout(state)  # sets state["reward"] and state["metrics"]

`env_response` judges every answer, including the last one (a winning move, or the answer at
the turn cap): the game ends by setting `state["final_env_response"]`, which the stop
condition `has_final_env_response` sees. The reward functions read the game keys only, never
the text, so the bridge may keep token-level bookkeeping wherever it likes. Keep the row
order when training (no dataset shuffling): difficulty is stratified by position (`make_rows`).
"""

import random
import re
from types import SimpleNamespace

import verifiers as vf
from datasets import Dataset

from .game import is_full, is_over, opponent_move, render, winner

# --- Prompt ------------------------------------------------------------------------------

MODEL, OPPONENT = "X", "O"
MAX_TURNS = 6  # answers per game: 5 moves finish any game, one or two spare for invalid answers

RULES = f"""You are playing tic-tac-toe as X against an opponent who plays O.
The cells are numbered 0 to 8, row by row:

{render([None] * 9)}

An empty cell shows its number; a taken cell shows X or O. Three in a row, column or
diagonal wins."""

# What the model writes each turn is the environment's choice too (`load_environment(answer_format=...)`):
# "think", a short reason then the move (the course's default, the original's format), or "move", the move
# alone: about 8 tokens an answer instead of about 45, and the policy over cells is the one token after <move>.
ANSWER_FORMATS = {
    "think": """On your turn, you may think briefly inside <think>...</think>, then give the
number of an empty cell inside <move>...</move>, and nothing else. For example:

<think>The centre is free and lies on four lines.</think>
<move>4</move>""",
    "move": """On your turn, give the number of an empty cell inside <move>...</move>, and
nothing else. For example:

<move>4</move>""",
}


def system_prompt(answer_format: str = "think") -> str:
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"answer_format must be one of {list(ANSWER_FORMATS)}, got {answer_format!r}")
    return f"{RULES} {ANSWER_FORMATS[answer_format]}"


SYSTEM_PROMPT = system_prompt("think")

GAME_STATE_COLUMNS = [
    "board",
    "model_starts",
    "random_move_prob",
    "game_seed",
    "moves",
    "model_turns",
    "well_formed_turns",
    "invalid_moves",
    "winner",
    "game_over",
]


def board_to_text(board) -> str:
    return "".join(cell or "." for cell in board)


def board_from_text(text: str) -> list:
    return [None if ch == "." else ch for ch in text]


def opponent_rng(seed: int, board) -> random.Random:
    """The opponent's dice for one position of one game: the same game and board, the same reply."""
    return random.Random(f"{seed}:{board_to_text(board)}")


def first_user_message(board, model_starts: bool) -> str:
    if model_starts:
        opening = "New game. You play X and move first."
    else:
        opening = f"New game. You play X; O moved first, to cell {board.index(OPPONENT)}."
    return f"{opening}\n\n{render(board)}\n\nYour move."


# --- Dataset -----------------------------------------------------------------------------


def make_rows(
    num_examples: int,
    seed: int,
    min_random_move_prob: float = 0.0,
    max_random_move_prob: float = 1.0,
    num_groups: int = 10,
    split: str = "train",
) -> list[dict]:
    """Game rows, a deterministic function of the arguments (a private random.Random, never the global one).

    Row i draws its opponent's random_move_prob from bucket i % num_groups of num_groups
    equal-width buckets over [min, max]: rows come in blocks of num_groups, one per bucket,
    so any num_groups consecutive rows (a training batch) span the whole difficulty range.
    """
    if not 0.0 <= min_random_move_prob <= max_random_move_prob <= 1.0:
        raise ValueError(
            "need 0 <= min_random_move_prob <= max_random_move_prob <= 1, got "
            f"{min_random_move_prob}, {max_random_move_prob}"
        )
    if num_groups < 1:
        raise ValueError(f"num_groups must be at least 1, got {num_groups}")
    rng = random.Random(f"tictactoe:{split}:{seed}")  # train and eval draw different games
    width = (max_random_move_prob - min_random_move_prob) / num_groups
    rows, seeds = [], set()
    for i in range(num_examples):
        bucket = i % num_groups
        low = min_random_move_prob + bucket * width
        prob = min(max(low + width * rng.random(), min_random_move_prob), max_random_move_prob)
        game_seed = rng.randrange(2**31)
        while game_seed in seeds:  # one seed, one game
            game_seed = rng.randrange(2**31)
        seeds.add(game_seed)
        model_starts = random.Random(game_seed).random() < 0.5  # about half, decided by the seed
        board = [None] * 9
        if not model_starts:
            board[opponent_move(board, OPPONENT, prob, opponent_rng(game_seed, board))] = OPPONENT
        rows.append(
            {
                "question": first_user_message(board, model_starts),
                "answer": "",
                "info": {
                    "seed": game_seed,
                    "model_starts": model_starts,
                    "random_move_prob": prob,
                    "board": board_to_text(board),
                    "bucket": bucket,
                },
            }
        )
    return rows


# --- Parser ------------------------------------------------------------------------------


def tag_contents(text: str, tag: str) -> list[str]:
    """The contents of every <tag>...</tag> in `text`, in order: what re.findall(r"<tag>(.*?)</tag>",
    text, re.DOTALL) returns, in linear time. That regex (and verifiers' XMLParser's) backtracks on
    replies that repeat an unclosed tag, and a model can write such replies: scoring must not stall."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    contents, position = [], 0
    while (start := text.find(opening, position)) != -1:
        end = text.find(closing, start + len(opening))
        if end == -1:
            break
        contents.append(text[start + len(opening) : end])
        position = end + len(closing)
    return contents


class LinearXMLParser(vf.XMLParser):
    """verifiers' XMLParser with the same answers from `parse`, in linear time (see tag_contents).

    Each field gets the first (or with last=True the last) <tag>...</tag> content, stripped, or None."""

    def __init__(self, fields: list[str | tuple[str, ...]], **kwargs):
        super().__init__(fields, **kwargs)
        # Every tag of every field (a tuple's alternatives too), in order: what parse reads.
        self.tags = [tag for field in fields for tag in ([field] if isinstance(field, str) else field)]

    def parse(self, text: str, strip: bool = True, last: bool = False) -> SimpleNamespace:
        results = {}
        for tag in self.tags:
            contents = tag_contents(text, tag)
            results[tag] = (contents[-1] if last else contents[0]).strip() if contents else None
        return SimpleNamespace(**results)


# Well formed: optional <think>...</think>, then one <move>N</move> with a plain integer, nothing else.
_TAG = r"</?(?:think|move)>"
WELL_FORMED = re.compile(rf"\s*(?:<think>(?:(?!{_TAG}).)*</think>\s*)?<move>\s*[+-]?[0-9]+\s*</move>\s*", re.DOTALL)
INTEGER = re.compile(r"[+-]?[0-9]+")


class MoveParser(LinearXMLParser):
    """Reads <move>N</move> (the last one, if several) and says what is wrong with an answer.

    Any text is judged in linear time and never raises (tag_contents says why that needs care)."""

    def __init__(self):
        super().__init__(fields=["move"], answer_field="move")

    def is_well_formed(self, text: str) -> bool:
        return WELL_FORMED.fullmatch(text) is not None

    def judge(self, text: str, board) -> tuple[int | None, str | None]:
        """(cell, None) for a legal move, else (None, what is wrong) in words for the feedback."""
        content = self.parse(text, last=True).move
        if content is None:
            return None, "no <move>N</move> tag found"
        if not INTEGER.fullmatch(content):
            return None, f"{content[:40]!r} is not a cell number"
        # Compared as text: int() refuses numbers over 4,300 digits, and one reply must not crash a run.
        digits = content.lstrip("+-").lstrip("0") or "0"
        if len(digits) > 1 or digits == "9" or (content.startswith("-") and digits != "0"):
            return None, f"cell {content[:12]} does not exist (cells are 0 to 8)"
        cell = int(digits)
        if board[cell] is not None:
            return None, f"cell {cell} is already taken by {board[cell]}"
        return cell, None


def message_text(message) -> str:
    """The text of a chat message, whether a dict or a verifiers message object."""
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    if isinstance(content, list):  # content parts
        content = " ".join(p.get("text", "") if isinstance(p, dict) else getattr(p, "text", "") or "" for p in content)
    return content if isinstance(content, str) else ""


# --- Environment -------------------------------------------------------------------------


class TicTacToeEnv(vf.MultiTurnEnv):
    """One game per rollout: the model (X) answers, env_response judges it and O replies."""

    async def setup_state(self, state: vf.State) -> vf.State:
        info = state["info"]
        board = board_from_text(info["board"])
        state["board"] = board
        state["model_starts"] = bool(info["model_starts"])
        state["random_move_prob"] = float(info["random_move_prob"])
        state["game_seed"] = int(info["seed"])
        state["moves"] = [[OPPONENT, cell] for cell in range(9) if board[cell] == OPPONENT]
        state["model_turns"] = state["well_formed_turns"] = state["invalid_moves"] = 0
        state["winner"] = None
        state["game_over"] = False
        return state

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs) -> vf.Messages:
        # verifiers records a vf.Error as this rollout's error; any other exception would abort
        # the whole evaluation (every game of it lost), so a bug here costs one game only.
        try:
            return self._judge_and_reply(messages, state)
        except Exception as error:
            raise vf.Error(f"tic-tac-toe env_response failed: {error!r}") from error

    def _judge_and_reply(self, messages: vf.Messages, state: vf.State) -> vf.Messages:
        if state["game_over"]:  # a caller driving turns by hand may ask again: the result stands
            return [vf.UserMessage(content="The game is over: no more moves are played.")]
        text = message_text(messages[-1])
        board = state["board"]
        state["model_turns"] += 1
        state["well_formed_turns"] += self.parser.is_well_formed(text)
        cell, problem = self.parser.judge(text, board)
        if problem is not None:
            state["invalid_moves"] += 1
            return self._continue_or_cap(
                state,
                f"Invalid move: {problem}. The board is unchanged:\n\n{render(board)}",
                "Answer with the number of an empty cell, like <move>4</move>.",
            )

        self._play(state, MODEL, cell)
        if is_over(board):
            return self._finish(state, f"You played {cell}.")
        reply_cell = self.opponent_cell(state)
        self._play(state, OPPONENT, reply_cell)
        if is_over(board):
            return self._finish(state, f"You played {cell}. O played {reply_cell}.")
        return self._continue_or_cap(
            state, f"You played {cell}. O played {reply_cell}.\n\n{render(board)}", "Your move."
        )

    def opponent_cell(self, state: vf.State) -> int:
        """O's reply on state["board"]: seeded, random with probability random_move_prob, else a
        uniformly chosen optimal move. Override it to seat another opponent (play.py seats a human)."""
        return opponent_move(
            state["board"], OPPONENT, state["random_move_prob"], opponent_rng(state["game_seed"], state["board"])
        )

    @vf.stop
    async def max_turns_reached(self, state: vf.State) -> bool:
        """The turn cap counts judged answers: the base version, which counts trajectory steps,
        would stop before env_response has judged the last answer (a winning move included)."""
        return self.max_turns > 0 and state.get("model_turns", 0) >= self.max_turns

    # helpers
    @staticmethod
    def _play(state: vf.State, player: str, cell: int) -> None:
        state["board"][cell] = player
        state["moves"].append([player, cell])

    def _continue_or_cap(self, state: vf.State, reply: str, ask: str) -> vf.Messages:
        if self.max_turns > 0 and state["model_turns"] >= self.max_turns:
            state["game_over"] = True
            final = [
                vf.UserMessage(
                    content=f"{reply}\n\nTurn limit ({self.max_turns} answers) reached: the game ends unfinished."
                )
            ]
            state["final_env_response"] = final
            return final
        return [vf.UserMessage(content=f"{reply}\n\n{ask}")]

    def _finish(self, state: vf.State, moves_text: str) -> vf.Messages:
        board = state["board"]
        state["winner"] = winner(board) or ("draw" if is_full(board) else None)
        state["game_over"] = True
        result = {"X": "You win!", "O": "O wins: you lose.", "draw": "The board is full: a draw."}
        final = [vf.UserMessage(content=f"{moves_text}\n\n{render(board)}\n\nGame over. {result[state['winner']]}")]
        state["final_env_response"] = final
        return final


# --- Rubric ------------------------------------------------------------------------------
# Every function reads the game keys of `state` only, so scoring needs no text parsing.


def outcome(winner: str | None) -> str:
    """A game's result from the model's side, from state["winner"]."""
    return {MODEL: "win", OPPONENT: "loss", "draw": "draw"}.get(winner, "unfinished")


def win_reward(state) -> float:
    return {MODEL: 1.0, "draw": 0.5}.get(state["winner"], 0.0)


def format_reward(state) -> float:
    return state["well_formed_turns"] / state["model_turns"] if state["model_turns"] else 0.0


def any_invalid_move(state) -> float:
    return 1.0 if state["invalid_moves"] > 0 else 0.0


def won(state) -> float:
    return float(state["winner"] == MODEL)


def drew(state) -> float:
    return float(state["winner"] == "draw")


def lost(state) -> float:
    return float(state["winner"] == OPPONENT)


def invalid_moves(state) -> float:
    return float(state["invalid_moves"])


def model_turns(state) -> float:
    return float(state["model_turns"])


def model_started(state) -> float:
    return float(state["model_starts"])


REWARD_WEIGHTS = {win_reward: 1.0, format_reward: 0.2, any_invalid_move: -0.1}
METRICS = [won, drew, lost, invalid_moves, model_turns, model_started]


def make_rubric(parser: MoveParser) -> vf.Rubric:
    funcs = [*REWARD_WEIGHTS, *METRICS]
    weights = [*REWARD_WEIGHTS.values(), *[0.0] * len(METRICS)]
    return vf.Rubric(funcs=funcs, weights=weights, parser=parser)


# --- Entry point -------------------------------------------------------------------------


def load_environment(
    num_train_examples: int = 1000,
    num_eval_examples: int = 100,
    min_random_move_prob: float = 0.0,
    max_random_move_prob: float = 1.0,
    num_groups: int = 10,
    max_turns: int = MAX_TURNS,
    seed: int = 0,
    answer_format: str = "think",
    **kwargs,
) -> TicTacToeEnv:
    """The tic-tac-toe environment. `max_turns` caps the model's answers (each answer costs up to
    max_tokens): a game needs at most 5, so MAX_TURNS leaves one or two retries after invalid answers.
    `answer_format`: what the system prompt asks for each turn, "think" (a short reason, then the move)
    or "move" (the move alone); the parser and the rewards are the same for both."""
    settings = dict(
        seed=seed,
        min_random_move_prob=min_random_move_prob,
        max_random_move_prob=max_random_move_prob,
        num_groups=num_groups,
    )
    train = make_rows(num_train_examples, split="train", **settings)
    evaluation = make_rows(num_eval_examples, split="eval", **settings)
    parser = MoveParser()
    return TicTacToeEnv(
        dataset=Dataset.from_list(train) if train else None,
        eval_dataset=Dataset.from_list(evaluation) if evaluation else None,
        system_prompt=system_prompt(answer_format),
        parser=parser,
        rubric=make_rubric(parser),
        max_turns=max_turns,
        env_args={
            "num_train_examples": num_train_examples,
            "num_eval_examples": num_eval_examples,
            "max_turns": max_turns,
            "answer_format": answer_format,
            **settings,
        },
        **kwargs,
    )
