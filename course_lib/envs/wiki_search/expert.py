"""The wiki's scripted expert: a fixed plan through the tools, no model.

    from wiki_search.expert import wiki_expert_turn
    wiki_expert_turn(messages, answer)   # -> the expert's next assistant message, as a dict

It searches the question, views the sections of the top hit, reads every section (parallel
calls), then answers: with the gold answer if a section it read contains it, else "I could not
find the answer". So it is right exactly when the search put the right page first: it measures
the tools, and gives models a baseline to compare against. (The course plays it through a
verifiers client, `course_lib.scripted_client.wiki_expert_client()`.)
"""

import json
import re

import wiki_search as wiki


def _text(message) -> str:
    """The text of a chat message (a dict or a verifiers message), its content parts joined."""
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(p.get("text", "") if isinstance(p, dict) else getattr(p, "text", "") or "" for p in content)
    return content if isinstance(content, str) else ""


def wiki_expert_turn(messages: list, answer: str) -> dict:
    """The wiki expert's next assistant message, {"content", "tool_calls"}: search_pages(question),
    view_sections of the top hit, read_section on every section (parallel calls), then the answer."""
    last_assistant = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    last_calls = [c["name"] if isinstance(c, dict) else c.name for c in (last_assistant or {}).get("tool_calls") or []]
    results = []  # the tool results that answer the last assistant message
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, _text(message))

    def call(name: str, **arguments) -> dict:
        return {"name": name, "arguments": json.dumps(arguments)}

    if last_assistant is None:
        question = next(_text(m) for m in reversed(messages) if m.get("role") == "user")
        return {"content": None, "tool_calls": [call("search_pages", query=question)]}
    hit = re.search(r"page_id: ([a-z0-9-]+)", results[0] if results else "")
    if last_calls == ["search_pages"] and hit:
        return {"content": None, "tool_calls": [call("view_sections", page_id=hit.group(1))]}
    if last_calls == ["view_sections"] and hit:
        section_ids = re.findall(r"^- ([a-z0-9-]+):", results[0], flags=re.M)
        return {
            "content": None,
            "tool_calls": [call("read_section", page_id=hit.group(1), section_id=s) for s in section_ids],
        }
    if last_calls and all(name == "read_section" for name in last_calls):
        if any(f" {wiki.normalize(answer)} " in f" {wiki.normalize(text)} " for text in results):
            return {"content": f"The answer is {answer}.", "tool_calls": None}
    return {"content": "I could not find the answer.", "tool_calls": None}
