"""Tool SFT's data (notebook 08, section 9): the same recipe as tic-tac-toe's SFT, for tool use.

A teacher (the scripted wiki expert) answers questions through the wiki-search ToolEnv; `tool_trace_rows`
turns its rewarded rollouts into conversations with tool calls and tool results, which `sft.build_sft_trainer`
trains like any other conversations. `wiki_split` keeps whole pages out of that data, so a held-out question
is answered with the tools, not from memory.
"""

import json

from tictactoe import message_text

HELD_OUT_EVERY = 3  # every third wiki page, in alphabetical order, is held out of the tool SFT data


def wiki_split() -> tuple[list[dict], list[dict]]:
    """The wiki's questions, split by page: (train, held out). No training conversation reads a
    held-out page, so a model that answers a held-out question found the answer with the tools."""
    import wiki_search

    pages = sorted(wiki_search.load_pages())
    held_out = set(pages[HELD_OUT_EVERY - 1 :: HELD_OUT_EVERY])
    questions = wiki_search.load_questions()
    return [q for q in questions if q["page_id"] not in held_out], [q for q in questions if q["page_id"] in held_out]


def openai_tool(tool) -> dict:
    """A verifiers Tool as the OpenAI `tools` entry a server receives (what verifiers' client sends)."""
    tool = tool if isinstance(tool, dict) else tool.model_dump()
    function = {"name": tool["name"], "description": tool["description"], "parameters": tool["parameters"]}
    if tool.get("strict") is not None:
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


def openai_message(message) -> dict:
    """A message of a rollout (a verifiers object, or a dict whose tool calls are stored as JSON text) as
    the OpenAI-style dict a chat template renders. Arguments are written as `transformers serve` renders
    them (`json.dumps`, non-ASCII kept), so training text and serving text are the same."""
    message = message if isinstance(message, dict) else message.model_dump()
    row = {"role": message["role"], "content": message_text(message)}
    calls = [json.loads(c) if isinstance(c, str) else c for c in message.get("tool_calls") or []]
    if calls:
        row["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": json.dumps(json.loads(call["arguments"]), ensure_ascii=False),
                },
            }
            for call in calls
        ]
    if message.get("tool_call_id"):
        row["tool_call_id"] = message["tool_call_id"]
    return row


def tool_trace_rows(outputs: list[dict]) -> list[dict]:
    """SFT rows from a tool environment's rollouts that earned a reward: `messages` (the whole
    conversation) and `tools` (the schemas sent with it, as JSON text: TRL passes them to the chat
    template, which shows them in the system message as it does when serving)."""
    return [
        {
            "messages": [openai_message(m) for m in list(output["prompt"]) + list(output["completion"])],
            "tools": json.dumps([openai_tool(tool) for tool in output["tool_defs"]]),
        }
        for output in outputs
        if not output.get("error") and output["reward"] > 0
    ]
