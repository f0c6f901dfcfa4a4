"""The workshop checks of notebook 04 (04_tool_env.ipynb): one check per part the learner writes.

Each check runs the part on real cases and returns a one-line message, or raises ExerciseError with
one sentence naming the part, an example input and what was expected (see course_lib/exercise_mechanism.py).
The parts: the three tools (view_sections, read_section, search_pages), the reward (correct_answer),
the ToolEnv (load_wiki_environment) and a hidden tool argument (WikiSessionEnv, a StatefulToolEnv).
The reference they are compared with is the course's wiki_search environment. The experiment (how many
turns the task needs) has its own check, check_turns_needed, called with the learner's reading.
"""

import json
import re
import time

from course_lib.exercise_mechanism import ExerciseError, call_part, is_number, is_todo, not_answered, short_repr

NOTEBOOK = "04_tool_env.ipynb"


def _wiki():
    import wiki_search  # the course's reference environment

    return wiki_search


def _tool_text(part, *args) -> str:
    """part(*args), which must be a str: a tool never raises and always answers in text."""
    got = call_part(part, *args)
    if not isinstance(got, str):
        shown = ", ".join(short_repr(a, 40) for a in args)
        raise ExerciseError(f"{part.__name__}({shown}) returned {short_repr(got)}; a tool must return a str.")
    return got


def _error_naming(part, args: tuple, what: str, must_name: str, hint: str) -> None:
    got = _tool_text(part, *args)
    if not (got.startswith("Error") and must_name in got):
        shown = ", ".join(repr(a) for a in args)
        raise ExerciseError(
            f"{part.__name__}({shown}), {what}, returned {short_repr(got)}; expected a text that starts with "
            f"'Error' and {hint} (the model reads it and tries again)."
        )


def _documented(tool) -> None:
    """Every argument of the tool has a type and a description in the schema verifiers builds from it."""
    from verifiers.utils.tool_utils import convert_func_to_tool_def

    try:
        schema = convert_func_to_tool_def(tool).parameters
    except Exception as error:
        raise ExerciseError(
            f"{tool.__name__}: verifiers cannot build its schema ({type(error).__name__}: {error}); give every "
            "argument a type hint."
        ) from None
    for name, field in schema.get("properties", {}).items():
        if field.get("type") != "string" or not field.get("description"):
            raise ExerciseError(
                f"{tool.__name__}: the schema the model sees has {name} = {short_repr(field, 70)}; expected a string "
                f"with a description: type the argument ({name}: str) and describe it in the docstring's Args: "
                f"section ('{name}: ...')."
            )


def check_view_sections(view_sections) -> str:
    """04, part 1: the page's sections as '- section_id: title' lines; an error naming search_pages."""
    wiki = _wiki()
    for page_id, asked in [("honeybee", "honeybee"), ("mount-everest", "Mount Everest"), ("moon", "MOON")]:
        page = wiki.load_pages()[page_id]
        got = _tool_text(view_sections, asked)
        lines = re.findall(r"^- ([a-z0-9-]+): (.*)$", got, re.MULTILINE)
        expected = [(s["section_id"], s["title"]) for s in page["sections"]]
        texts = [s["section_id"] for s in page["sections"] if s["text"] in got]
        if texts:
            raise ExerciseError(
                f"view_sections({asked!r}) returned the text of the sections {texts}; list each section's id and "
                "title only (read_section is the tool that reads one)."
            )
        if lines != expected or f"page_id: {page_id}" not in got:
            raise ExerciseError(
                f"view_sections({asked!r}) returned {short_repr(got, 90)}; expected a text with 'page_id: {page_id}' "
                f"and one line per section, in order: '- {expected[0][0]}: {expected[0][1]}', ... "
                "(look the page up with PAGES.get(slug(page_id)), so that a title or capitals work too)."
            )
    _documented(view_sections)
    _error_naming(view_sections, ("honeybees",), "an unknown page", "search_pages", "names search_pages")
    _error_naming(view_sections, ("x" * 100_000,), "a 100,000-character page id", "search_pages", "names search_pages")
    return "view_sections lists every section as '- id: title', and an unknown page gets an error naming search_pages."


def check_read_section(read_section) -> str:
    """04, part 2: the section's text; an unknown page or section gets an error that says what to call."""
    wiki = _wiki()
    for page_id, section_id, asked in [
        ("honeybee", "colony", ("honeybee", "colony")),
        ("moon", "surface", ("Moon", "Surface")),
        ("mount-everest", wiki.load_pages()["mount-everest"]["sections"][-1]["section_id"], None),
    ]:
        asked = asked or ("Mount Everest", section_id)
        section = next(s for s in wiki.load_pages()[page_id]["sections"] if s["section_id"] == section_id)
        got = _tool_text(read_section, *asked)
        if section["text"] not in got:
            raise ExerciseError(
                f"read_section{asked!r} returned {short_repr(got, 90)}; expected a text that holds the section's text "
                f"({short_repr(section['text'], 50)}); look both ids up with slug(), so that titles and capitals work."
            )
        others = [
            s["section_id"] for s in wiki.load_pages()[page_id]["sections"] if s is not section and s["text"] in got
        ]
        if others:
            raise ExerciseError(
                f"read_section{asked!r} also returned the text of the sections {others}: return one section, the one "
                "asked for (a whole page costs the model's context and gives the answer away unread)."
            )
    _documented(read_section)
    _error_naming(read_section, ("honeybees", "colony"), "an unknown page", "search_pages", "names search_pages")
    ids = ", ".join(s["section_id"] for s in wiki.load_pages()["honeybee"]["sections"])
    _error_naming(read_section, ("honeybee", "queen"), "an unknown section", ids, f"lists the sections: {ids}")
    return "read_section returns the text, and a wrong page or section gets an error that says what to do next."


def _page_ids(text: str) -> list[str]:
    return re.findall(r"page_id: ([a-z0-9-]+)", text)


def check_search_pages(search_pages) -> str:
    """04, part 3: the TOP_K best pages by bm25_scores, each with its page_id; errors for no keywords."""
    wiki = _wiki()
    for query in ["What are male honeybees called?", "the largest animal in the world", "bicycle", "river delta Egypt"]:
        got = _tool_text(search_pages, query)
        expected = [page_id for page_id, _ in wiki.bm25_scores(query)[: wiki.TOP_K]]
        if _page_ids(got) != expected:
            raise ExerciseError(
                f"search_pages({query!r}) listed the pages {_page_ids(got)}; expected the {len(expected)} best of "
                f"bm25_scores(query), best first, each written as 'page_id: ...': {expected}."
            )
    _documented(search_pages)
    _error_naming(search_pages, ("",), "an empty query", "search_pages", "asks for keywords (names search_pages)")
    _error_naming(search_pages, ("what is the",), "a query of stopwords only", "search_pages", "names search_pages")
    got = _tool_text(search_pages, "xylophone")
    if _page_ids(got):
        raise ExerciseError(
            f"search_pages('xylophone') returned {short_repr(got, 80)}; no page has that word, so list no page "
            "(bm25_scores returns [] then) and suggest other keywords."
        )
    start = time.perf_counter()
    _tool_text(search_pages, "honeybee " * 100_000)
    if (seconds := time.perf_counter() - start) > 2:
        raise ExerciseError(
            f"search_pages took {seconds:.1f} s on a 900,000-character query; call bm25_scores once (it counts "
            "each distinct word once)."
        )
    return "search_pages ranks like the reference, and a query without keywords gets an error saying what to do."


def _assistant(content, *calls) -> dict:
    tool_calls = [{"id": f"call_{i}", "name": n, "arguments": json.dumps(a)} for i, (n, a) in enumerate(calls)]
    return {"role": "assistant", "content": content, "tool_calls": tool_calls or None}


REWARD_CASES = [  # completion, gold answer, what the case is
    ([_assistant("Male honeybees are called drones.")], "drones", "the answer in a sentence"),
    ([_assistant("It was KARL VON FRÏSCH.")], "Karl von Frisch", "capitals and an accent"),
    ([_assistant("About 384,400 km.")], "384400", "a number with a comma"),
    ([_assistant("They are called workers.")], "drones", "a wrong answer"),
    ([_assistant("It has 1922 keys.")], "22", "the gold number inside a longer one"),
    ([_assistant("drones " + "and more words " * 14)], "drones", "a 43-word reply that holds the answer"),
    ([_assistant(None, ("search_pages", {"query": "drones"}))], "drones", "a rollout that ended on a tool call"),
    (
        [_assistant("They are drones.", ("read_section", {"page_id": "honeybee", "section_id": "drones"}))],
        "drones",
        "a rollout that ended on a tool call with text (the turn cap cut it before the result)",
    ),
    (
        [_assistant("The answer is drones."), {"role": "tool", "tool_call_id": "c", "content": "drones"}],
        "drones",
        "a rollout that ended on a tool result",
    ),
    ([_assistant("")], "drones", "an empty reply"),
    ([], "drones", "no reply at all"),
]


def check_correct_answer(correct_answer) -> str:
    """04, part 4: 1.0 when the normalized gold answer is a whole-word part of a short final message."""
    wiki = _wiki()
    for completion, answer, what in REWARD_CASES:
        got = call_part(correct_answer, completion=completion, answer=answer)
        expected = wiki.correct_answer(completion, answer)
        if not (isinstance(got, (int, float)) and got == expected):
            last = completion[-1] if completion else None
            raise ExerciseError(
                f"correct_answer: for {what} (last message {short_repr(last, 70)}, gold answer {answer!r}) you "
                f"returned {got!r}; expected {expected}."
            )
    return "correct_answer rewards a short final message that holds the gold answer, and nothing else."


def tool_call_reply(*calls) -> "object":
    """An assistant message that calls tools: tool_call_reply(("search_pages", {"query": "moon"}), ...)."""
    import verifiers as vf

    tool_calls = [vf.ToolCall(id=f"call_{i}", name=n, arguments=json.dumps(a)) for i, (n, a) in enumerate(calls)]
    return vf.ResponseMessage(content=None, tool_calls=tool_calls, finish_reason="tool_calls", is_truncated=False)


def check_players() -> dict:
    """Players for comparing two wiki environments: the scripted expert (a client) and fixed replies."""
    from course_lib.scripted_client import wiki_expert_client

    return {
        "scripted expert": wiki_expert_client(),
        "answers without tools": lambda answer: f"The answer is {answer}.",
        "a wrong answer": lambda answer: "I think it is 42.",
        "a bad call, then the answer": lambda answer: [
            tool_call_reply(("read_section", {"page_id": "no-such-page", "section_id": "x"})),
            f"It is {answer}.",
        ],
        "pastes a section": lambda answer: f"{answer} " + "and so on " * 20,
    }


def check_load_wiki_environment(load_wiki_environment) -> str:
    """04, part 5: a vf.ToolEnv with the three tools, the reference's questions for a seed, the same rewards."""
    import verifiers as vf

    from course_lib import workshop

    wiki = _wiki()
    call = "load_wiki_environment(num_eval_examples=5, seed=1)"
    env = call_part(load_wiki_environment, num_eval_examples=5, seed=1)
    if not isinstance(env, vf.ToolEnv):
        raise ExerciseError(f"{call} returned {short_repr(env)}; expected a vf.ToolEnv.")
    names = [tool.name for tool in env.tool_defs or []]
    if names != ["search_pages", "view_sections", "read_section"]:
        raise ExerciseError(
            f"{call}: the model is offered the tools {names}; expected search_pages, view_sections and "
            "read_section (pass tools=[search_pages, view_sections, read_section] to vf.ToolEnv)."
        )
    reference = wiki.load_environment(num_eval_examples=5, seed=1)
    mine, expected = (e.get_eval_dataset()["question"] for e in (env, reference))
    if mine != expected:
        raise ExerciseError(
            f"{call}: your evaluation set starts with {short_repr(mine[0] if mine else None, 50)}, the reference's "
            f"with {short_repr(expected[0], 50)}: shuffle the questions with Dataset.shuffle(seed=seed), then keep the "
            "first num_eval_examples."
        )
    every = call_part(load_wiki_environment)
    if len(every.get_eval_dataset()) != len(wiki.load_questions()) or env.max_turns != 8:
        raise ExerciseError(
            f"load_wiki_environment() evaluates {len(every.get_eval_dataset())} questions with max_turns "
            f"{env.max_turns}; expected all {len(wiki.load_questions())} (num_eval_examples=-1) and max_turns=8."
        )
    info = env.get_eval_dataset()[0].get("info") or {}
    if not {"page_id", "section_id"} <= set(info):
        raise ExerciseError(
            f"{call}: a row's info is {short_repr(info)}; expected the question's page_id and section_id in it "
            "(notebook 08 splits the questions by page with them)."
        )
    message = str(env.error_formatter(KeyError("open_page")))
    if "search_pages" not in message:
        raise ExerciseError(
            f"{call}: a call to a tool that does not exist is answered with {short_repr(message)}; pass "
            "error_formatter=format_tool_error, which names the tools."
        )
    workshop.same_arguments(env, reference, call)
    capped = "load_wiki_environment(max_turns=3, num_eval_examples=5, seed=1)"
    workshop.same_arguments(
        call_part(load_wiki_environment, max_turns=3, num_eval_examples=5, seed=1),
        wiki.load_environment(max_turns=3, num_eval_examples=5, seed=1),
        capped,
    )
    hint = ": is correct_answer the rubric's only function, with weight 1.0?"
    workshop.same_rewards(env, reference, check_players(), call, "your environment", hint)
    return f"{call}: the reference's questions, the three tools, and the same rewards for the same players."


def check_wiki_session_env(env_class) -> str:
    """04, part 6: take_note's `session` hidden from the model's schema and filled in from the rollout's state."""
    from course_lib.offline import run_coroutine
    from course_lib.workshop import Scripted

    wiki = _wiki()
    name = "WikiSessionEnv"
    try:
        env = env_class(max_turns=6, **wiki.environment_kwargs(num_eval_examples=2))
    except NotImplementedError as error:
        if is_todo(error):
            raise
        raise ExerciseError(f"{name}(**kwargs) raised NotImplementedError: {error}") from None
    except Exception as error:
        hint = (
            ": verifiers cannot show the model a dict argument such as session; hide it with "
            "self.add_tool(take_note, args_to_skip=['session'])"
            if "additionalProperties" in str(error)
            else ""
        )
        problem = " ".join(str(error).split())[:120]
        raise ExerciseError(f"{name}(**kwargs) raised {type(error).__name__}: {problem}{hint}.") from None
    tools = {tool.name: tool for tool in env.tool_defs or []}
    if set(tools) != {"search_pages", "view_sections", "read_section", "take_note"}:
        raise ExerciseError(
            f"{name}: the model is offered the tools {sorted(tools)}; expected the three wiki tools and take_note "
            "(super().__init__(tools=[...], **kwargs), then self.add_tool(take_note, ...))."
        )
    if "session" in json.dumps(tools["take_note"].parameters):
        raise ExerciseError(
            f"{name}: the schema of take_note shows the model a 'session' argument "
            f"({short_repr(tools['take_note'].parameters, 90)}); "
            "add it with self.add_tool(take_note, args_to_skip=['session'])."
        )
    row = env.get_eval_dataset()[0]
    forged = {"notes": ["forged by the model"]}  # what a model might send as session
    replies = [
        tool_call_reply(("take_note", {"note": "first"})),
        tool_call_reply(("take_note", {"note": "second", "session": forged}), ("search_pages", {"query": "moon"})),
        "Done.",
    ]

    async def play(turns):
        return await env.rollout(dict(row), Scripted(turns), "scripted", {})

    try:
        first = run_coroutine(play(replies))
        notes = list((first.get("session") or {}).get("notes") or [])  # before a second rollout could add to it
        second = run_coroutine(play(replies[:1] + ["Done."]))
    except NotImplementedError as error:
        if is_todo(error):
            raise
        raise ExerciseError(f"{name}: a rollout raised NotImplementedError: {error}") from None
    except ExerciseError:
        raise
    except Exception as error:
        raise ExerciseError(f"{name}: a rollout that calls take_note raised {type(error).__name__}: {error}") from None
    if not isinstance(first.get("session"), dict) or notes != ["first", "second"]:
        raise ExerciseError(
            f"{name}: after take_note('first') and take_note('second', session=<forged>) the state's session is "
            f"{short_repr(first.get('session') and {'notes': notes}, 80)}; expected {{'notes': ['first', 'second']}}: "
            "setup_state creates "
            "state['session'] = {'notes': []}, and update_tool_args puts it over any session the model sent."
        )
    results = [m["content"] for m in first["completion"] if m["role"] == "tool"]
    if len(results) != 3 or results[2].startswith("Error"):
        raise ExerciseError(
            f"{name}: search_pages(query='moon') was answered {short_repr(results[-1] if results else None, 80)}; "
            "give the session only to the tools that hide it (self.skipped_args.get(tool_name, []))."
        )
    if (second.get("session") or {}).get("notes") != ["first"]:
        raise ExerciseError(
            f"{name}: a second rollout's session holds {short_repr(second.get('session'), 80)}; expected only its own "
            "note ['first']: create a new session for each rollout in setup_state, not one in __init__."
        )
    return f"{name}: take_note's session is hidden from the model, made per rollout and never forged."


# ---------------------------------------------------------------- the experiment: how many turns does the task need?

TURN_CAPS = range(1, 7)  # the max_turns values the notebook's plot tries


def expert_reward_by_cap(items: int = 5) -> dict[int, float]:
    """The scripted expert's mean reward in the reference environment for each max_turns of TURN_CAPS, on the
    first `items` evaluation questions (through env.rollout and the rubric, as in an evaluation)."""
    from course_lib import workshop
    from course_lib.scripted_client import wiki_expert_client

    wiki, players = _wiki(), {"scripted expert": wiki_expert_client()}
    return {
        cap: float(workshop.score(wiki.load_environment(max_turns=cap), players, items)["reward"].mean())
        for cap in TURN_CAPS
    }


def check_turns_needed(answer) -> None:
    """04, experiment: the smallest max_turns at which the scripted expert gets full reward, read off the plot;
    exactly."""
    if not_answered(answer, "read the plot: the smallest max_turns whose bar reaches 1.0"):
        return
    rewards = expert_reward_by_cap()
    right = min(cap for cap, reward in rewards.items() if reward == 1.0)
    if is_number(answer) and answer == right:
        print(
            f"Correct: {right}. The expert needs one model turn per step: search_pages, view_sections, read_section "
            f"(every section in one message) and then the answer; with max_turns = {right - 1} the cap ends the "
            f"rollout on its reads, before it answers, and the reward is {rewards[right - 1]:.0f}."
        )
        return
    if is_number(answer) and answer in rewards and answer < right:
        raise ExerciseError(
            f"the turns needed: with max_turns = {answer} the expert scores {rewards[answer]:.2f}, because the cap "
            "ends the rollout before its answer; find the smallest max_turns whose bar reaches 1.0."
        )
    if is_number(answer) and answer > right:
        raise ExerciseError(
            f"the turns needed: with max_turns = {answer} the expert does get full reward, but it needs fewer turns; "
            "find the smallest max_turns whose bar reaches 1.0."
        )
    raise ExerciseError(
        f"the turns needed: {answer!r} is not it; read the x axis under the first bar that reaches 1.0 (a whole "
        f"number from {min(TURN_CAPS)} to {max(TURN_CAPS)})."
    )


WORKSHOP = {  # part -> (the notebook whose solution block defines it, its check); names unique across notebooks
    "view_sections": (NOTEBOOK, check_view_sections),
    "read_section": (NOTEBOOK, check_read_section),
    "search_pages": (NOTEBOOK, check_search_pages),
    "correct_answer": (NOTEBOOK, check_correct_answer),
    "load_wiki_environment": (NOTEBOOK, check_load_wiki_environment),
    "WikiSessionEnv": (NOTEBOOK, check_wiki_session_env),
}
