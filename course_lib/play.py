"""Play tic-tac-toe against a model: the tic-tac-toe environment with a human as the opponent.

The model plays X, exactly as in training and evaluation; you play O, the seat of the
environment's scripted opponent. Nothing here writes a prompt or judges an answer: a `Game`
drives a real `TicTacToeEnv` (`course_lib/envs/tictactoe/__init__.py`) turn by turn, the way its module
docstring describes, so the model sees the same system prompt, the same boards and the same
feedback ("Invalid move: ...", "You played 4. O played 0.", "Game over. ...") as during training.
The only change is who picks O's cell: the environment asks its `opponent_cell(state)` method,
and here that method answers with the cell you clicked (see `_human_seat`).

    game = Game(model_starts=True)
    game.model_move(answer)      # answer(messages) -> str, e.g. lambda m: llm.chat(m, max_tokens=...)
    game.human_move(4)           # your O; refused with IllegalMove if not allowed
    game.messages, game.think, game.result_text()

`max_turns` caps the model's answers per game as in the environment (None: its default).

`play_widget(answer)` puts a clickable board around a `Game` (Jupyter, ipywidgets);
`play_scripted(answer, human_policy)` plays a whole game with no human, through the same `Game`
(what a notebook runs under CI). `expert_answer()` is a model stand-in that needs no server.

A game already played needs no model: `game_turns(messages)` reads each answer's board, reason and move,
`check_reason` checks the reason's line claims on that board, `plot_game(messages)` draws the game board by
board, and `recorded_games_page(recorded_games())` is the same as a static HTML page (written to
assets/play_recorded_games.html by dev/make_play_page.py).
"""

import functools
import html
import json
import random
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import datasets

from course_lib.offline import run_coroutine
from course_lib.scripted_client import ScriptedClient, scripted_answer
from tictactoe import (
    MODEL,
    OPPONENT,
    MoveParser,
    board_to_text,
    first_user_message,
    load_environment,
    system_prompt,
    tag_contents,
)
from tictactoe.game import completed_lines, is_over, line_problem, new_board, read_board, reason_claims

Answer = Callable[[list[dict]], str]  # the model: messages so far -> its next answer


class IllegalMove(ValueError):
    """A human move the game refuses (taken cell, not your turn, game over); the message says why."""


def _human_seat(state) -> int:
    """O's reply: the cell the human clicked, which `Game` puts in the state just before asking."""
    if "human_cell" not in state:
        raise RuntimeError("the environment asked for O's move when none was expected")
    return state.pop("human_cell")


@functools.cache
def _environment(max_turns: int | None, answer_format: str = "think"):
    """One environment per turn cap (None: the environment's default) and answer format, reused for every
    game, with the human in O's seat; its one-row dataset is never used."""
    was_disabled = datasets.utils.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # no stray "Map: 100%" bar above the board
    try:
        turn_cap = {} if max_turns is None else {"max_turns": max_turns}
        env = load_environment(num_train_examples=1, num_eval_examples=0, answer_format=answer_format, **turn_cap)
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()
    env.opponent_cell = _human_seat
    return env


class Game:
    """One game between a model (X) and a human (O), played through the tic-tac-toe environment."""

    def __init__(
        self, model_starts: bool = True, max_turns: int | None = None, seed: int | None = None, answer_format="think"
    ):
        self.env = _environment(max_turns, answer_format)
        self.answer_format = answer_format  # the system prompt asks for it, as the environment's own rows do
        self.model_starts = model_starts
        # Stored in the state like a dataset row's seed; with a human opponent it decides nothing.
        self.seed = random.randrange(2**31) if seed is None else seed
        self.messages: list[dict] = []  # the model's conversation, exactly as the environment builds it
        self.state = None  # the environment's state; None until the first move of a human-started game
        self.pending: int | None = None  # the model's legal move, played once the human answers it
        self.think = ""  # the <think> text of the model's last answer
        if model_starts:
            self._start(new_board())

    # --- what the board shows and whose turn it is ---
    @property
    def board(self) -> list:
        board = list(self.state["board"]) if self.state else new_board()
        if self.pending is not None:
            board[self.pending] = MODEL
        return board

    @property
    def over(self) -> bool:
        return bool(self.state and self.state["game_over"])

    @property
    def to_move(self) -> str | None:
        """'human', 'model', or None once the game is over."""
        if self.over:
            return None
        return "human" if self.state is None or self.pending is not None else "model"

    def result_text(self) -> str:
        if not self.over:
            return {"human": "Your move (you are O).", "model": "The model's move (it is X)."}[self.to_move]
        return {
            MODEL: "The model (X) wins.",
            OPPONENT: "You (O) win!",
            "draw": "Draw.",
            None: "Turn limit reached: the game ends unfinished.",
        }[self.state["winner"]]

    # --- moves ---
    def human_move(self, cell: int) -> None:
        if self.over:
            raise IllegalMove("The game is over: start a new game to play again.")
        if self.to_move != "human":
            raise IllegalMove("Wait: it is the model's turn.")
        if type(cell) is not int or not 0 <= cell <= 8:  # not isinstance: True would play cell 1
            raise IllegalMove(f"There is no cell {cell!r}: cells are 0 to 8.")
        if self.board[cell] is not None:
            raise IllegalMove(f"Cell {cell} is already taken by {self.board[cell]}: pick an empty cell.")
        if self.state is None:  # the human opens: the model's first board already shows O
            board = new_board()
            board[cell] = OPPONENT
            self._start(board)
        else:  # the environment now plays the model's pending move, then the human's, and replies
            self.pending = None
            self._environment_reply(human_cell=cell)

    def model_move(self, answer: Answer) -> str:
        """Ask the model for one answer and let the environment judge it; returns the answer."""
        if self.to_move != "model":
            raise IllegalMove("It is not the model's turn." if not self.over else "The game is over.")
        text = answer(list(self.messages)) or ""
        self.messages.append({"role": "assistant", "content": text})
        thoughts = tag_contents(text, "think")  # linear in the answer's length, whatever the model wrote
        self.think = thoughts[0].strip() if thoughts else ""
        cell, problem = self.env.parser.judge(text, self.board)  # the environment's own judge
        after = self.board
        if problem is None:
            after[cell] = MODEL
        if problem is None and not is_over(after):
            self.pending = cell  # the environment replies once O has moved, i.e. after the human's click
        else:  # an invalid answer or a game-ending move: the environment replies now
            self._environment_reply(human_cell=None)
        return text

    # --- the environment ---
    def _start(self, board: list) -> None:
        row = {
            "example_id": 0,
            "prompt": [
                {"role": "system", "content": system_prompt(self.answer_format)},
                {"role": "user", "content": first_user_message(board, self.model_starts)},
            ],
            "info": {
                "seed": self.seed,
                "model_starts": self.model_starts,
                "random_move_prob": 0.0,
                "board": board_to_text(board),
            },
        }

        async def start():
            # init_state only stores the client (it is used by rollout(), which a Game never calls)
            state = await self.env.init_state(row, client=ScriptedClient(), model="play")
            return await self.env.setup_state(state)

        self.state = run_coroutine(start())
        self.messages = list(row["prompt"])

    def _environment_reply(self, human_cell: int | None) -> None:
        if human_cell is not None:
            self.state["human_cell"] = human_cell
        reply = run_coroutine(self.env.env_response(self.messages, self.state))
        self.messages += [message.model_dump() for message in reply]


# --- players without a human or a server -------------------------------------------------------


def expert_answer(seed: int = 0) -> Answer:
    """A model stand-in: the scripted expert answering as X from the last board it was shown."""
    rng = random.Random(seed)

    def answer(messages: list[dict]) -> str:
        board = read_board(messages[-1]["content"])
        return scripted_answer(board, "expert", rng) if board else "I cannot see a board."

    return answer


def random_human(seed: int = 0) -> Callable[[list], int]:
    """A human stand-in: a uniformly random empty cell."""
    rng = random.Random(seed)
    return lambda board: rng.choice([cell for cell in range(9) if board[cell] is None])


def play_scripted(answer: Answer, human_policy: Callable[[list], int], model_starts: bool = True) -> Game:
    """A whole game with no one clicking: `human_policy(board) -> cell` plays O."""
    game = Game(model_starts=model_starts)
    while not game.over:
        if game.to_move == "human":
            game.human_move(human_policy(game.board))
        else:
            game.model_move(answer)
    return game


def transcript(game: Game) -> str:
    """The conversation after the system prompt, as the model saw it and answered."""
    speaker = {"user": "environment, to the model", "assistant": "model"}
    return "\n\n".join(
        f"[{speaker.get(m['role'], m['role'])}]\n{m['content']}" for m in game.messages if m["role"] != "system"
    )


# --- the clickable board --------------------------------------------------------------------------

YOU_START, MODEL_STARTS = "You start", "Model starts"


class PlayWidget:
    """A 3x3 board of buttons, a 'new game' button, who starts, the model's thinking and the conversation.

    Every button runs the same `Game` methods as `play_scripted`; tests press buttons with `.click()`.
    """

    def __init__(self, answer: Answer, max_turns: int | None = None, answer_format: str = "think"):
        import ipywidgets as w

        self.answer, self.max_turns, self.answer_format = answer, max_turns, answer_format
        self.cells = [w.Button(layout=w.Layout(width="56px", height="56px")) for _ in range(9)]
        for cell, button in enumerate(self.cells):
            button.on_click(lambda _, cell=cell: self.click(cell))
        self.new_game = w.Button(description="New game", button_style="primary")
        self.new_game.on_click(lambda _: self.start())
        self.starter = w.ToggleButtons(options=[YOU_START, MODEL_STARTS], value=YOU_START)
        self.status = w.HTML()
        self.think = w.Textarea(description="<think>", disabled=True, layout=w.Layout(width="100%", height="70px"))
        self.log = w.Textarea(description="messages", disabled=True, layout=w.Layout(width="100%", height="260px"))
        grid = w.GridBox(self.cells, layout=w.Layout(grid_template_columns="repeat(3, 60px)"))
        self.widget = w.VBox([w.HBox([self.new_game, self.starter]), w.HBox([grid, self.status]), self.think, self.log])
        self.start()

    def _repr_mimebundle_(self, **kwargs):  # shows the widget when the object is a cell's last value
        return self.widget._repr_mimebundle_(**kwargs)

    def start(self) -> None:
        self.game = Game(self.starter.value == MODEL_STARTS, self.max_turns, answer_format=self.answer_format)
        self._model_plays()

    def click(self, cell: int) -> None:
        try:
            self.game.human_move(cell)
        except IllegalMove as refused:
            self.status.value = f"<b>{html.escape(str(refused))}</b>"
            return
        self._model_plays()

    def _model_plays(self) -> None:
        while self.game.to_move == "model":  # invalid answers are retried by the environment's rules
            self._show("The model is thinking...")
            try:
                self.game.model_move(self.answer)
            except Exception as error:  # a server error must not leave a silent, dead board
                self._show(f"The model could not answer ({error!r}): press New game to try again.")
                return
        self._show(self.game.result_text())

    def _show(self, status: str) -> None:
        board = self.game.board
        for cell, button in enumerate(self.cells):
            # An empty cell shows its number, as on the model's board. Never an empty description:
            # ipywidgets' front end skips redrawing a button whose description and icon are both
            # empty, so the last game's X and O would stay on screen after "New game".
            button.description = board[cell] or str(cell)
            button.style.font_weight = "normal" if board[cell] is None else "bold"
            button.style.text_color = "#9e9e9e" if board[cell] is None else "black"
            button.tooltip = f"cell {cell}"
            button.disabled = board[cell] is not None or self.game.to_move != "human"
        self.status.value = f"<b>{html.escape(status)}</b>"
        self.think.value = self.game.think
        self.log.value = transcript(self.game)


def play_widget(answer: Answer, max_turns: int | None = None, answer_format: str = "think") -> PlayWidget:
    """An interactive board against `answer`, e.g.
    `lambda m: llm.chat(m, max_tokens=profile.eval.max_tokens_per_turn)` (notebook 10); `answer_format`: the
    one the model was trained in (the environment's system prompt asks for it)."""
    return PlayWidget(answer, max_turns, answer_format)


# --- recorded games, seen without running anything ----------------------------------------------
# A game is its chat messages (the model's conversation: a `Game`'s `messages`, a stored transcript's
# "messages"). `game_turns` reads back, for each model answer, the board it was shown, its <think>
# text, its move, and checks the two claims the course's SFT data teaches it to make.

ASSETS = Path(__file__).resolve().parent.parent / "assets"
COURSE_GAMES = [  # the course model's, rewritten after each recorded run: JSON with "about", "model", "messages", ...
    ASSETS / "course_model_game.json",  # notebook 00's game (dev/make_game_asset.py)
    ASSETS / "play_widget_game.json",  # notebook 10's play widget, cpu run (dev/make_play_page.py --from-executed)
]
REASONING_GAMES = [  # the same two of the course run of 2026-11-28, whose model reasoned before its move
    ASSETS / "reasoning_games" / "course_model_game.json",
    ASSETS / "reasoning_games" / "play_widget_game.json",
]


@dataclass
class Turn:
    board: list  # the board the model was shown before this answer
    reason: str  # its <think> text ("" if none)
    move: int | None  # the cell it named, 0-8, legal or not; None if it named no cell
    invalid: str | None  # why the environment refused the answer, None for a legal move
    wrong: list[str]  # what is wrong in the reason's checkable claims, [] if nothing is
    answer: str  # the whole answer
    reason_asked: bool = True  # False where the system prompt asked for the move alone

    @property
    def said(self) -> str:
        """The reason, or when there is none, the start of what the model wrote instead."""
        if self.reason:
            return f"Reason: {self.reason}"
        written = textwrap.shorten(self.answer, 90, placeholder=" ...")
        return f'No <think> reason; it wrote: "{written}"' if self.reason_asked else f'Answer: "{written}"'


def check_reason(reason: str, board, move: int | None = None) -> list[str]:
    """What is wrong in `reason`'s claims "Cell N completes my line a-b-c" (the model is X) and
    "O threatens a-b-c; I block at cell N", checked on `board`, the board the model saw; [] if nothing.
    Other sentences (forks, corners, the centre) are not checked."""
    wrong = []
    for words, player, cells, cell in reason_claims(reason, MODEL):
        if (problem := line_problem(board, player, cells, cell)) is not None:
            truth = " and ".join(completed_lines(board, player, cell)) if cell <= 8 and board[cell] is None else ""
            fact = (
                f"{player} completes {truth} at cell {cell}" if truth else f"{player} completes no line at cell {cell}"
            )
            wrong.append(f'"{words}": {problem} ({fact})')
        elif move is not None and move != cell:
            wrong.append(f'"{words}": true, but the move is cell {move}')
    return wrong


def game_turns(messages: list[dict]) -> list[Turn]:
    """One `Turn` per model answer of a game's messages (a system prompt, if there, is skipped)."""
    parser, turns, board = MoveParser(), [], new_board()
    reason_asked = not (messages and messages[0]["content"] == system_prompt("move"))
    for message in messages:
        if message["role"] == "user":
            board = read_board(message["content"]) or board
        elif message["role"] == "assistant":
            text = message["content"] or ""
            thoughts = tag_contents(text, "think")
            reason = thoughts[0].strip() if thoughts else ""
            cell, invalid = parser.judge(text, board)
            named = parser.parse(text, last=True).move
            move = cell if cell is not None else (int(named) if named in list("012345678") else None)
            wrong = check_reason(reason, board, move)
            turns.append(Turn(list(board), reason, move, invalid, wrong, text, reason_asked))
    return turns


def game_result(messages: list[dict]) -> str:
    """The environment's last words on the game ("Game over. You win!", "Turn limit ... reached: ..."),
    or "Not over." if it has not ended."""
    last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    for ending in ("Game over.", "Turn limit"):
        if ending in last:
            return last[last.index(ending) :].strip()
    return "Not over."


def recorded_games(paths=REASONING_GAMES) -> list[dict]:
    """Stored games (JSON files like assets/course_model_game.json), each with a "title"; by default the
    earlier model's, whose reasons notebook 10 checks."""
    games = []
    for path in paths:
        game = json.loads(Path(path).read_text())
        if game.get("answer_format", "think") != "think":  # stored without the system prompt, which says the format
            game["messages"] = [{"role": "system", "content": system_prompt(game["answer_format"])}, *game["messages"]]
        opponent = {"random": "the random opponent", "optimal": "the optimal opponent"}.get(game["opponent"])
        game["title"] = f"X: {game['model']}; O: {opponent or game['opponent']}; result: {game['result']}"
        games.append(game)
    return games


def plot_game(messages: list[dict], title: str = ""):
    """A recorded game as a figure: one board per model answer (the board it saw, its move highlighted:
    yellow if legal, red if refused), its reason below, and in red what is wrong in the reason."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    turns = game_turns(messages)
    if not turns:
        raise ValueError("no model answer in these messages: nothing to draw")
    fig, axes = plt.subplots(1, len(turns), figsize=(2.7 * len(turns), 4.4), squeeze=False)
    fig.subplots_adjust(left=0.03, right=0.97, top=0.8, bottom=0.42, wspace=0.3)
    for number, (ax, turn) in enumerate(zip(axes[0], turns), start=1):
        ax.set(xlim=(0, 3), ylim=(3, 0), xticks=[], yticks=[], aspect="equal")
        for k in (1, 2):
            ax.axhline(k, color="black", lw=1)
            ax.axvline(k, color="black", lw=1)
        if turn.move is not None:
            color = "#fff176" if turn.invalid is None else "#ef9a9a"
            ax.add_patch(Rectangle((turn.move % 3, turn.move // 3), 1, 1, color=color, zorder=0))
        for cell, mark in enumerate(turn.board):
            shown = mark or (MODEL if cell == turn.move else str(cell))
            style = {"fontsize": 22, "color": "#1a237e" if shown == MODEL else "#b71c1c"}
            if shown not in (MODEL, OPPONENT):
                style = {"fontsize": 9, "color": "#9e9e9e"}
            ax.text(cell % 3 + 0.5, cell // 3 + 0.5, shown, ha="center", va="center", **style)
        played = f"cell {turn.move}" if turn.move is not None else "no cell"
        ax.set_title(f"X's answer {number}: {played}" + (" (invalid)" if turn.invalid else ""), fontsize=9)
        for spine in ax.spines.values():
            spine.set(color="#c62828" if turn.wrong else "black", linewidth=2.5 if turn.wrong else 1)
        lines = textwrap.wrap(turn.said, 34)
        lines += textwrap.wrap(f"Invalid move: {turn.invalid}." if turn.invalid else "", 34)
        reason = ax.text(0, -0.05, "\n".join(lines), transform=ax.transAxes, ha="left", va="top", fontsize=8)
        if turn.wrong:  # just under the reason, in red
            note = "\n".join(textwrap.wrap("The reason is wrong: " + "; ".join(turn.wrong), 34))
            ax.annotate(note, xy=(0, 0), xycoords=reason, xytext=(0, -6), textcoords="offset points",
                        va="top", fontsize=8, color="#c62828")  # fmt: skip
    fig.suptitle(f"{title}\n{game_result(messages)}" if title else game_result(messages), fontsize=10)
    return fig


# --- the same games as a page that opens in any browser, with no server and no network ------------

PAGE_STYLE = """
body { font-family: sans-serif; max-width: 70em; margin: 2em auto; color: #212121; }
.turns { display: flex; flex-wrap: wrap; gap: 1.5em; }
.turn { width: 13em; margin: 0; }
.board { display: grid; grid-template-columns: repeat(3, 3em); grid-template-rows: repeat(3, 3em);
         gap: 2px; background: #212121; width: max-content; border: 3px solid #212121; }
.turn.wrong .board { border-color: #c62828; background: #c62828; }
.cell { background: white; display: flex; align-items: center; justify-content: center;
        font-size: 1.6em; font-weight: bold; }
.cell.x { color: #1a237e; } .cell.o { color: #b71c1c; }
.cell.empty { color: #9e9e9e; font-size: 0.8em; font-weight: normal; }
.cell.move { background: #fff176; } .cell.move.refused { background: #ef9a9a; }
.wrong-reason { color: #c62828; font-weight: bold; }
.result { font-weight: bold; }
"""


def page_games() -> list[dict]:
    """The games of the static page: the course model's, then the earlier reasoning model's."""
    return recorded_games(COURSE_GAMES) + recorded_games(REASONING_GAMES)


def recorded_games_page(games: list[dict]) -> str:
    """A self-contained HTML page of recorded games (`recorded_games()`): per model answer, the board it
    saw with its move highlighted, its reason and, in red, what is wrong in the reason."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8"><title>Recorded games of the course\'s model</title>',
        f"<style>{PAGE_STYLE}</style></head>",
        "<body>",
        "<h1>Recorded tic-tac-toe games of the course's model</h1>",
        "<p>The model plays X. Each board is the position the model was shown, with the cell it then named "
        "highlighted (yellow: played; red: refused by the environment). Under it: its &lt;think&gt; text, "
        "the reason it gave. Claims of the forms &quot;Cell N completes my line a-b-c&quot; and &quot;O "
        "threatens a-b-c; I block at cell N&quot; are checked against the board; a wrong one is marked in red. "
        "Written by <code>dev/make_play_page.py</code> from the stored games "
        f"({', '.join(f'<code>{Path(p).relative_to(ASSETS.parent)}</code>' for p in COURSE_GAMES + REASONING_GAMES)})"
        ": first the course's model, which answers with the move alone, then an earlier one that reasoned; "
        "notebook 10 draws the earlier one's.</p>",
    ]
    for game in games:
        parts += ['<section class="game">', f"<h2>{esc(game['title'])}</h2>", f"<p>{esc(game['about'])}</p>"]
        parts.append('<div class="turns">')
        for number, turn in enumerate(game_turns(game["messages"]), start=1):
            cells = []
            for cell, mark in enumerate(turn.board):
                mark = mark or (MODEL if cell == turn.move else None)  # the move, drawn as played
                classes = ["cell", (mark or "empty").lower()]
                if cell == turn.move:
                    classes += ["move"] + (["refused"] if turn.invalid else [])
                cells.append(f'<div class="{" ".join(classes)}">{mark or cell}</div>')
            played = f"cell {turn.move}" if turn.move is not None else "no cell"
            parts += [
                f'<figure class="turn{" wrong" if turn.wrong else ""}">',
                f'<div class="board" aria-label="the board X saw before answer {number}">{"".join(cells)}</div>',
                f"<figcaption><p><b>X's answer {number}: {played}</b></p>",
                f'<p class="reason">{esc(turn.said)}</p>',
            ]
            if turn.invalid:
                parts.append(f'<p class="invalid">Invalid move: {esc(turn.invalid)}.</p>')
            if turn.wrong:
                parts.append(f'<p class="wrong-reason">The reason is wrong: {esc("; ".join(turn.wrong))}</p>')
            parts.append("</figcaption></figure>")
        parts += ["</div>", f'<p class="result">{esc(game_result(game["messages"]))}</p>', "</section>"]
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)
