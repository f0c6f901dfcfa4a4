"""Scripted tic-tac-toe players behind the same verifiers client interface as a model.

`ScriptedClient("expert")` answers `<think>Empty cells: ... reason</think><move>N</move>` with the
scripted expert of `tictactoe.game`; `ScriptedClient("random")` answers `<move>N</move>`
with a uniformly random empty cell. Both read the board from the last user message, exactly
what a model sees, so `env.evaluate(ScriptedClient("expert"), model="expert", ...)` runs the
real environment end to end: the harness and the environment are checked against players
whose results we know (the expert never loses). Replies are seeded by the conversation so
far, so a rerun plays the same games; the random player's also by the game (the row's seed), so
that two games reaching the same position need not get the same answer. No tokens are generated,
so no usage is reported.

`wiki_expert_client()` plays the wiki-search environment the same way, with the environment's own
scripted expert (`wiki_search.expert.wiki_expert_turn`: a fixed search-view-read plan through the
tools, no model), to test the tool mechanics and to compare models against.
"""

import hashlib
import random

import verifiers as vf

from course_lib.offline import OfflineClient
from tictactoe import message_text
from tictactoe.game import expert_move, is_over, legal_moves, read_board
from wiki_search.expert import wiki_expert_turn

PLAYERS = ("expert", "random")


def scripted_answer(board, policy: str, rng: random.Random) -> str:
    if policy == "expert":
        move, reason = expert_move(board, "X", rng)
        # The rationale first reads the board aloud: a student imitating it writes the empty cells
        # before choosing, so its move is conditioned on a list it has just copied from the board.
        empty = " ".join(str(cell) for cell in legal_moves(board))
        return f"<think>Empty cells: {empty}. {reason}</think>\n<move>{move}</move>"
    return f"<move>{rng.choice(legal_moves(board))}</move>"


def _role(message) -> str | None:
    return message.get("role") if isinstance(message, dict) else getattr(message, "role", None)


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


# ---------------------------------------------------------------- the wiki-search expert


def wiki_expert_client(policy=wiki_expert_turn) -> "vf.Client":
    """A verifiers client with no model behind it: each call returns `policy(messages, answer)`
    as the assistant's message. Pass it to env.evaluate(client=..., model="scripted-expert")."""

    class ScriptedExpert(OfflineClient):
        def respond(self, prompt, **kwargs):
            state = kwargs.get("state") or {}
            turn = policy(prompt, state.get("answer", ""))
            tool_calls = [
                vf.ToolCall(id=f"call_{len(prompt)}_{i}", **call) for i, call in enumerate(turn.get("tool_calls") or [])
            ]
            return vf.ResponseMessage(
                content=turn.get("content"),
                tool_calls=tool_calls or None,
                finish_reason="tool_calls" if tool_calls else "stop",
                is_truncated=False,
            )

    return ScriptedExpert()
