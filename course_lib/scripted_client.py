"""Scripted tic-tac-toe players behind the same verifiers client interface as a model.

`ScriptedClient("expert")` answers `<think>Empty cells: ... reason</think><move>N</move>` with the
scripted expert of `course_lib.tictactoe_game`; `ScriptedClient("random")` answers `<move>N</move>`
with a uniformly random empty cell. Both read the board from the last user message, exactly
what a model sees, so `env.evaluate(ScriptedClient("expert"), model="expert", ...)` runs the
real environment end to end: the harness and the environment are checked against players
whose results we know (the expert never loses). Replies are seeded by the conversation so
far, so a rerun plays the same games; the random player's also by the game (the row's seed), so
that two games reaching the same position need not get the same answer. No tokens are generated,
so no usage is reported.
"""

import hashlib
import random
import re
import time

import verifiers as vf

from course_lib.envs.tictactoe import message_text
from course_lib.tictactoe_game import expert_move, is_over, legal_moves

PLAYERS = ("expert", "random")
_ROW = re.compile(r"^ ?([XO0-8]) \| ([XO0-8]) \| ([XO0-8]) ?$", re.MULTILINE)


def read_board(text: str) -> list | None:
    """The last board drawn in `text` by tictactoe_game.render, or None if there is none."""
    rows = _ROW.findall(text)
    if len(rows) < 3:
        return None
    cells = [cell for row in rows[-3:] for cell in row]
    return [cell if cell in ("X", "O") else None for cell in cells]


def scripted_answer(board, policy: str, rng: random.Random, player: str = "X") -> str:
    if policy == "expert":
        move, reason = expert_move(board, player, rng)
        # The rationale first reads the board aloud: a student imitating it writes the empty cells
        # before choosing, so its move is conditioned on a list it has just copied from the board.
        empty = " ".join(str(cell) for cell in legal_moves(board))
        return f"<think>Empty cells: {empty}. {reason}</think>\n<move>{move}</move>"
    return f"<move>{rng.choice(legal_moves(board))}</move>"


def _role(message) -> str | None:
    return message.get("role") if isinstance(message, dict) else getattr(message, "role", None)


class OfflineClient(vf.Client):
    """A verifiers client with no API behind it: subclasses answer in `respond`.

    verifiers' Client converts prompts, tools and responses to and from an API's native format;
    here the native format is verifiers' own, so every conversion is the identity. `respond`
    returns the assistant's text, or a whole `vf.ResponseMessage` (e.g. with tool calls).
    """

    def __init__(self):
        super().__init__(None)  # no underlying API client

    def setup_client(self, config):
        return None

    async def to_native_tool(self, tool):
        return tool

    async def to_native_prompt(self, messages):
        return messages, {}

    def respond(self, prompt, **kwargs) -> "str | vf.ResponseMessage":
        raise NotImplementedError

    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
        message = self.respond(prompt, **kwargs)
        if isinstance(message, str):
            message = vf.ResponseMessage(content=message, finish_reason="stop", is_truncated=False)
        return vf.Response(id=f"offline-{len(prompt)}", created=int(time.time()), model=model, message=message)

    async def raise_from_native_response(self, response) -> None:
        return None

    async def from_native_response(self, response) -> vf.Response:
        return response

    async def close(self) -> None:
        return None


class ScriptedClient(OfflineClient):
    """A verifiers Client whose "model" is a scripted player: 'expert' or 'random'."""

    def __init__(self, policy: str = "expert", seed: int = 0):
        if policy not in PLAYERS:
            raise ValueError(f"policy must be one of {PLAYERS}, got {policy!r}")
        super().__init__()
        self.policy, self.seed = policy, seed

    def respond(self, prompt, state=None, **kwargs) -> str:
        last_user = next((message_text(m) for m in reversed(prompt) if _role(m) == "user"), "")
        board = read_board(last_user)
        if board is None or is_over(board):
            return "I cannot find a board to play on."
        conversation = "\n".join(message_text(m) for m in prompt)
        # Seeded on the text alone, the random player opened every game it started with one cell
        # and never drew against the optimal opponent: it also draws its dice from the game's seed
        # (verifiers passes the rollout's state). The expert stays seeded on the text only, so the
        # shipped SFT games (data/tictactoe_sft) remain what the environment produces.
        game = ((state or {}).get("info") or {}).get("seed") if self.policy == "random" else None
        key = f"{self.seed}:{conversation}" if game is None else f"{self.seed}:{game}:{conversation}"
        digest = hashlib.sha256(key.encode()).hexdigest()
        return scripted_answer(board, self.policy, random.Random(digest))
