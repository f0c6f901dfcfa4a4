"""The wiki-search tool environment: tools, reward, schemas, hidden arguments, MCP. No model needed.

Each test names the bug it would catch.
"""

import asyncio
import inspect
import json
import time

import psutil
import pytest

import wiki_search as wiki
from course_lib.scripted_client import wiki_expert_client
from wiki_search import mcp_env as wiki_mcp
from wiki_search import session as wiki_session

QUESTIONS = wiki.load_questions()
PAGES = wiki.load_pages()


def evaluate(env, client, **kwargs):
    kwargs = {"num_examples": -1, "rollouts_per_example": 1, "max_concurrent": 16, **kwargs}
    return asyncio.run(env.evaluate(client=client, model="scripted", **kwargs))["outputs"]


def assistant(content, tool_calls=None):
    return {"role": "assistant", "content": content, "tool_calls": tool_calls}


# --- the tools on the corpus ---------------------------------------------------------------


def test_corpus_loads_with_the_documented_shape():
    """Catches: a moved/renamed data file or a changed row format."""
    assert 24 <= len(PAGES) <= 30 and len(QUESTIONS) >= 60
    assert all(page["sections"][0]["section_id"] == "overview" for page in PAGES.values())


def test_search_finds_the_page_of_every_question():
    """Catches: a tokenizer or BM25 bug that makes answers unreachable (every question must
    have its page in the top 5; top-1 is 100% today, the floor leaves room for new questions)."""
    ranks = []
    for q in QUESTIONS:
        ids = [page_id for page_id, _ in wiki.bm25_scores(q["question"])[: wiki.TOP_K]]
        assert q["page_id"] in ids, (q["question"], ids)
        ranks.append(ids.index(q["page_id"]))
        assert f"(page_id: {q['page_id']})" in wiki.search_pages(q["question"])
    assert sum(rank == 0 for rank in ranks) / len(ranks) >= 0.9


def test_every_answer_is_in_its_section_as_the_tools_show_it():
    """Catches: read_section returning the wrong text, or data whose answer the reward can't match."""
    for q in QUESTIONS:
        text = wiki.read_section(q["page_id"], q["section_id"])
        assert not text.startswith("Error")
        assert f" {wiki.normalize(q['answer'])} " in f" {wiki.normalize(text)} ", q


def test_tools_return_readable_text():
    """Catches: changed output formats that the system prompt and the scripted expert rely on."""
    assert wiki.search_pages("honeybee colony").splitlines()[0] == "1. Honeybee (page_id: honeybee)"
    sections = wiki.view_sections("honeybee")
    assert "- colony: Colony life" in sections and "read_section" in sections
    assert "drones" in wiki.read_section("honeybee", "colony")
    # titles and other capitalizations are accepted as ids
    assert wiki.view_sections("Mount Everest").startswith("Mount Everest (page_id: mount-everest)")
    assert wiki.read_section("HONEYBEE", "Colony") == wiki.read_section("honeybee", "colony")


@pytest.mark.parametrize(
    "call, hint",
    [
        (lambda: wiki.view_sections("no-such-page"), "search_pages"),
        (lambda: wiki.view_sections("honeybees"), "'honeybee'"),  # a close match is suggested
        (lambda: wiki.view_sections(None), "search_pages"),
        (lambda: wiki.read_section("no-such-page", "overview"), "search_pages"),
        (lambda: wiki.read_section("honeybee", "queen"), "overview, colony, honey-and-wax, communication"),
        (lambda: wiki.read_section("honeybee", ""), "read_section"),
        (lambda: wiki.search_pages(""), "search_pages(query="),
        (lambda: wiki.search_pages("   "), "search_pages(query="),
        (lambda: wiki.search_pages("what is the"), "search_pages(query="),
        (lambda: wiki.search_pages("xylophone quantum"), "Try other keywords"),
        (lambda: wiki.search_pages(12345), "Try other keywords"),
    ],
)
def test_bad_arguments_give_a_clear_error_string_never_an_exception(call, hint):
    """Catches: a tool raising (KeyError, AttributeError...) on a model's typo instead of telling
    it what to do next."""
    result = call()
    assert isinstance(result, str) and hint in result
    assert result.startswith(("Error:", "No page matches"))


# --- the reward ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, answer, reward",
    [
        ([assistant("Male honeybees are called drones.")], "drones", 1.0),
        ([assistant("DRONES")], "drones", 1.0),
        ([assistant("The waggle dance was decoded by karl VON frisch.")], "Karl von Frisch", 1.0),
        ([assistant("Es war «Karl von Frïsch» 🐝.")], "Karl von Frisch", 1.0),  # accents, quotes, emoji
        ([assistant("It is 384,400 km away.")], "384400", 1.0),  # thousands separator
        ([assistant("It is a penny farthing.")], "penny-farthing", 1.0),
        ([assistant("Male honeybees are called workers.")], "drones", 0.0),  # wrong
        ([assistant("It has 1922 keys.")], "22", 0.0),  # whole words only
        ([assistant("")], "drones", 0.0),  # empty
        ([assistant(None)], "drones", 0.0),
        ([], "drones", 0.0),
        ([assistant("drones")], "", 0.0),  # no gold answer: never reward
        (
            [assistant("drones", tool_calls=[{"id": "1", "name": "search_pages", "arguments": "{}"}])],
            "drones",
            0.0,
        ),  # a tool-call turn is not a final answer
        ([assistant("drones"), {"role": "tool", "tool_call_id": "1", "content": "drones"}], "drones", 0.0),
        ([assistant(" ".join(["word"] * 40) + " drones")], "drones", 0.0),  # pasted text, over 40 words
        ([assistant(" ".join(["word"] * 39) + " drones")], "drones", 1.0),  # exactly 40 words
        ([assistant([{"type": "text", "text": "They are drones."}])], "drones", 1.0),  # content parts
    ],
)
def test_reward_on_scripted_final_answers(completion, answer, reward):
    """Catches: case/unicode/punctuation handling, substring false positives, rewarding tool
    output or answer stuffing instead of the model's own final message."""
    assert wiki.correct_answer(completion, answer) == reward


def test_rubric_uses_the_reward_with_weight_one():
    """Catches: the reward function registered as a 0-weight metric (reward always 0)."""
    rubric = wiki.make_rubric()
    assert [f.__name__ for f in rubric.funcs] == ["correct_answer"] and rubric.weights == [1.0]


# --- the environments --------------------------------------------------------------------------


def test_tool_schemas_come_from_signatures_and_docstrings():
    """Catches: a tool losing its type hints or docstring (the model would see no parameters)."""
    env = wiki.load_environment()
    schemas = {tool.name: tool for tool in env.tool_defs}
    assert list(schemas) == ["search_pages", "view_sections", "read_section"]
    assert schemas["read_section"].parameters["required"] == ["page_id", "section_id"]
    assert schemas["search_pages"].parameters["properties"]["query"]["type"] == "string"
    assert all(tool.description and "Args:" not in tool.description for tool in env.tool_defs)
    assert schemas["search_pages"].parameters["properties"]["query"]["description"].startswith("A few keywords")


def test_scripted_expert_solves_every_question_through_the_tool_env():
    """Catches: broken tool-call plumbing (ids, argument parsing, stop condition) or metrics."""
    env = wiki.load_environment()
    outputs = evaluate(env, wiki_expert_client())
    assert len(outputs) == len(QUESTIONS)
    for out in outputs:
        sections = len(PAGES[out["info"]["page_id"]]["sections"])
        assert out["reward"] == 1.0 and out["error"] is None and out["stop_condition"] == "no_tools_called"
        assert out["metrics"] == {
            "correct_answer": 1.0,
            "num_turns": 4.0,
            "total_tool_calls": 2.0 + sections,
            "search_pages_calls": 1.0,
            "view_sections_calls": 1.0,
            "read_section_calls": float(sections),
        }


def test_a_bad_tool_call_does_not_end_the_rollout():
    """Catches: an exception from an unknown tool or missing argument escaping into the rollout."""

    def clumsy(messages, answer):
        if not any(m.get("role") == "tool" for m in messages):
            return {
                "content": None,
                "tool_calls": [
                    {"name": "open_page", "arguments": "{}"},  # no such tool
                    {"name": "read_section", "arguments": '{"page_id": "honeybee"}'},  # missing argument
                    {"name": "view_sections", "arguments": "not json"},
                    {"name": "view_sections", "arguments": '{"page_id": "bee"}'},
                ],
            }
        return {"content": f"It is {answer}.", "tool_calls": None}

    out = evaluate(wiki.load_environment(), wiki_expert_client(clumsy), num_examples=1)[0]
    results = [m["content"] for m in out["completion"] if m["role"] == "tool"]
    assert "no tool named 'open_page'" in results[0]
    assert "section_id" in results[1] and results[1].startswith("Error:")
    assert results[2].startswith("Error:")
    assert results[3].startswith("Error: there is no page with page_id 'bee'")
    assert out["error"] is None and out["reward"] == 1.0 and out["metrics"]["total_tool_calls"] == 4.0


def test_max_turns_stops_a_model_that_never_answers():
    """Catches: a rollout that loops forever when the model keeps calling tools."""

    def searcher(messages, answer):
        return {"content": None, "tool_calls": [{"name": "search_pages", "arguments": '{"query": "mars"}'}]}

    out = evaluate(wiki.load_environment(max_turns=3), wiki_expert_client(searcher), num_examples=1)[0]
    assert out["stop_condition"] == "max_turns_reached" and out["metrics"]["num_turns"] == 3.0
    assert out["reward"] == 0.0


# --- hidden arguments (StatefulToolEnv) ---------------------------------------------------------


def test_stateful_env_hides_the_session_argument_from_the_schema():
    """Catches: the injected argument leaking into the schema the model sees."""
    env = wiki_session.load_environment()
    schemas = {tool.name: tool for tool in env.tool_defs}
    assert set(schemas) == {"search_pages", "view_sections", "read_section", "take_note"}
    for name in ("read_section", "take_note"):
        assert "session" in inspect.signature(getattr(wiki_session, name)).parameters  # the function has it
        params = schemas[name].parameters
        assert "session" not in params["properties"] and "session" not in params.get("required", [])
        assert "session" not in json.dumps(schemas[name].model_dump())
    assert schemas["read_section"].parameters["required"] == ["page_id", "section_id"]


def test_update_tool_args_injects_the_rollout_session_and_overrides_a_forged_one():
    """Catches: the model being able to pass its own value for a hidden argument."""
    env = wiki_session.load_environment()
    state = {"session": {"opened": [], "notes": []}}
    args = env.update_tool_args(
        "read_section", {"page_id": "mars", "section_id": "moons", "session": "forged"}, [], state
    )
    assert args["session"] is state["session"]
    assert env.update_tool_args("search_pages", {"query": "mars"}, [], state) == {"query": "mars"}


def test_session_records_what_each_rollout_opened():
    """Catches: state shared between rollouts, or the session not reaching the tool."""
    env = wiki_session.load_environment(num_eval_examples=6)
    outputs = evaluate(env, wiki_expert_client(), state_columns=["session"])
    for out in outputs:
        page_id = out["info"]["page_id"]
        assert out["session"]["opened"] == [f"{page_id}/{s['section_id']}" for s in PAGES[page_id]["sections"]]
        assert out["metrics"]["read_gold_section"] == 1.0 and out["reward"] == 1.0


# --- MCP -----------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_mcp_round_trip_and_no_server_left_behind():
    """Catches: the stdio server failing to start/import, tools missing over MCP, or the server
    process surviving the environment's teardown. Takes a few seconds (one Python start)."""
    start = time.monotonic()
    env = wiki_mcp.load_environment(num_eval_examples=2)
    servers = [p for p in psutil.Process().children(recursive=True) if "wiki_search.mcp_server" in p.cmdline()]
    assert len(servers) == 1
    try:
        assert sorted(tool.name for tool in env.tool_defs) == ["read_section", "search_pages", "view_sections"]

        async def calls():
            found = await env.call_tool("search_pages", {"query": "Saturn's largest moon"}, "call_0")
            missing = await env.call_tool("read_section", {"page_id": "saturn", "section_id": "x"}, "call_1")
            return found, missing

        found, missing = asyncio.run(calls())
        assert found["content"].startswith("1. Saturn (page_id: saturn)")
        assert missing["content"].startswith("Error: page 'saturn' has no section 'x'")
        outputs = evaluate(env, wiki_expert_client())
        assert [out["reward"] for out in outputs] == [1.0, 1.0]
        assert outputs[0]["metrics"]["read_section_calls"] >= 3  # per-tool metrics were added
    finally:
        asyncio.run(env.teardown_mcp_servers())
    psutil.wait_procs(servers, timeout=5)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in servers)
    print(f"MCP round trip: {time.monotonic() - start:.1f} s")


@pytest.mark.parametrize("env_id, class_name", [("wiki-search", "ToolEnv"), ("wiki_search.session", "WikiSessionEnv")])
def test_load_environment_by_id_after_install(env_id, class_name):
    """Catches: a packaging change that breaks `vf.load_environment(<id>)` (and vf-eval)."""
    import verifiers as vf

    env = vf.load_environment(env_id)
    assert class_name in [cls.__name__ for cls in type(env).__mro__]
    assert len(env.get_eval_dataset()) > 0
