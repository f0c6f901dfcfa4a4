"""Notebook 04's workshop: the learner writes the wiki tools, the reward, the ToolEnv and a hidden argument.

tests/test_workshop.py runs what every workshop shares (stub -> check -> collapsed solution, every
stub fails with its TODO, every solution passes); here: a deliberately wrong version of each part
fails with one sentence that names the bug, and the solutions written out as a package (by the
notebook's own package cells) load alone, pass check_environment and score like the reference
wiki_search for the scripted expert and fixed replies.
"""

import sys

import pytest
import verifiers as vf
from test_workshop import (  # tests/ is on sys.path (no __init__.py)
    cells,
    load_alone,
    notebook_namespace,
    write_and_load,
)

from course_lib import exercise_mechanism, exercises, exercises_tools, workshop

NOTEBOOK = "04_tool_env.ipynb"

WRONG = {  # a deliberately wrong version of a part -> the words its one sentence must contain
    "view_sections without slug": (
        "def view_sections(page_id: str) -> str:\n"
        '    """List the sections of a wiki page.\n\n    Args:\n        page_id: A page id.\n    """\n'
        "    page = PAGES.get(page_id)\n"
        "    if page is None:\n"
        "        return unknown_page_error(page_id)\n"
        "    lines = [f\"- {s['section_id']}: {s['title']}\" for s in page['sections']]\n"
        "    return f'page_id: {page_id}\\n' + '\\n'.join(lines)\n",
        "view_sections('Mount Everest') returned",
    ),
    "view_sections raises on an unknown page": (
        "def view_sections(page_id: str) -> str:\n"
        '    """List the sections of a wiki page.\n\n    Args:\n        page_id: A page id.\n    """\n'
        "    page = PAGES[slug(page_id)]\n"
        "    lines = [f\"- {s['section_id']}: {s['title']}\" for s in page['sections']]\n"
        "    return f\"page_id: {page['page_id']}\\n\" + '\\n'.join(lines)\n",
        "view_sections('honeybees') raised KeyError",
    ),
    "view_sections with an undocumented argument": (
        "def view_sections(page_id: str) -> str:\n"
        '    """List the sections of a wiki page."""\n'
        "    page = PAGES.get(slug(page_id))\n"
        "    if page is None:\n"
        "        return unknown_page_error(page_id)\n"
        "    lines = [f\"- {s['section_id']}: {s['title']}\" for s in page['sections']]\n"
        "    return f\"page_id: {page['page_id']}\\n\" + '\\n'.join(lines)\n",
        "view_sections: the schema the model sees has page_id",
    ),
    "read_section hides the section ids": (
        "def read_section(page_id: str, section_id: str) -> str:\n"
        '    """Read a section.\n\n    Args:\n        page_id: A page id.\n        section_id: A section id.\n    """\n'
        "    page = PAGES.get(slug(page_id))\n"
        "    if page is None:\n"
        "        return unknown_page_error(page_id)\n"
        "    section = {s['section_id']: s for s in page['sections']}.get(slug(section_id))\n"
        "    return 'Error: no such section.' if section is None else section['text']\n",
        "read_section('honeybee', 'queen'), an unknown section, returned",
    ),
    "search_pages lists every page": (
        "def search_pages(query: str) -> str:\n"
        '    """Search.\n\n    Args:\n        query: Keywords.\n    """\n'
        "    if not tokenize(query):\n"
        "        return 'Error: no keywords. Call search_pages with some.'\n"
        "    return '\\n'.join(f'page_id: {page_id}' for page_id, _ in bm25_scores(query))\n",
        "search_pages('the largest animal in the world') listed the pages",
    ),
    "correct_answer matches inside words": (
        "def correct_answer(completion, answer, **kwargs):\n"
        "    final = completion[-1].get('content') or '' if completion else ''\n"
        "    return float(normalize(answer) in normalize(final))\n",
        "correct_answer: for the gold number inside a longer one",
    ),
    "correct_answer rewards a pasted section": (
        "def correct_answer(completion, answer, **kwargs):\n"
        "    last = completion[-1] if completion else {}\n"
        "    if last.get('role') != 'assistant' or last.get('tool_calls'):\n"
        "        return 0.0\n"
        "    return float(f' {normalize(answer)} ' in f' {normalize(last.get(\"content\") or \"\")} ')\n",
        "correct_answer: for a 43-word reply that holds the answer",
    ),
    "load_wiki_environment ignores the seed": (
        "def load_wiki_environment(max_turns=8, num_eval_examples=-1, seed=0, **kwargs):\n"
        "    rows = [{'question': q['question'], 'answer': q['answer'],\n"
        "             'info': {'page_id': q['page_id'], 'section_id': q['section_id']}}\n"
        "            for q in read_rows(QUESTIONS_FILE)]\n"
        "    data = Dataset.from_list(rows)\n"
        "    evaluation = data.select(range(num_eval_examples)) if num_eval_examples > 0 else data\n"
        "    return vf.ToolEnv(tools=[search_pages, view_sections, read_section], max_turns=max_turns, dataset=data,\n"
        "                      eval_dataset=evaluation, system_prompt=SYSTEM_PROMPT,\n"
        "                      rubric=vf.Rubric(funcs=[correct_answer]), error_formatter=format_tool_error)\n",
        "your evaluation set starts with",
    ),
    "load_wiki_environment forgets the error formatter": (
        "def load_wiki_environment(max_turns=8, num_eval_examples=-1, seed=0, **kwargs):\n"
        "    rows = [{'question': q['question'], 'answer': q['answer'],\n"
        "             'info': {'page_id': q['page_id'], 'section_id': q['section_id']}}\n"
        "            for q in read_rows(QUESTIONS_FILE)]\n"
        "    evaluation = Dataset.from_list(rows).shuffle(seed=seed)\n"
        "    if num_eval_examples > 0:\n"
        "        evaluation = evaluation.select(range(num_eval_examples))\n"
        "    return vf.ToolEnv(tools=[search_pages, view_sections, read_section], max_turns=max_turns,\n"
        "                      dataset=Dataset.from_list(rows), eval_dataset=evaluation, system_prompt=SYSTEM_PROMPT,\n"
        "                      rubric=vf.Rubric(funcs=[correct_answer]))\n",
        "a call to a tool that does not exist is answered with",
    ),
    "the session shown to the model": (
        "class WikiSessionEnv(vf.StatefulToolEnv):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(tools=[search_pages, view_sections, read_section], **kwargs)\n"
        "        self.add_tool(take_note)\n"
        "    async def setup_state(self, state):\n"
        "        state['session'] = {'notes': []}\n"
        "        return await super().setup_state(state)\n"
        "    def update_tool_args(self, tool_name, tool_args, messages, state, **kwargs):\n"
        "        return {**tool_args, 'session': state['session']} if tool_name == 'take_note' else tool_args\n",
        "hide it with self.add_tool(take_note, args_to_skip=['session'])",
    ),
    "a session the model can forge": (
        "class WikiSessionEnv(vf.StatefulToolEnv):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(tools=[search_pages, view_sections, read_section], **kwargs)\n"
        "        self.add_tool(take_note, args_to_skip=['session'])\n"
        "    async def setup_state(self, state):\n"
        "        state['session'] = {'notes': []}\n"
        "        return await super().setup_state(state)\n"
        "    def update_tool_args(self, tool_name, tool_args, messages, state, **kwargs):\n"
        "        if tool_name == 'take_note':\n"
        "            return {'session': state['session'], **tool_args}  # the model's session wins\n"
        "        return tool_args\n",
        "WikiSessionEnv: after take_note('first') and take_note('second', session=<forged>)",
    ),
    "a session for every tool": (
        "class WikiSessionEnv(vf.StatefulToolEnv):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(tools=[search_pages, view_sections, read_section], **kwargs)\n"
        "        self.add_tool(take_note, args_to_skip=['session'])\n"
        "    async def setup_state(self, state):\n"
        "        state['session'] = {'notes': []}\n"
        "        return await super().setup_state(state)\n"
        "    def update_tool_args(self, tool_name, tool_args, messages, state, **kwargs):\n"
        "        return {**tool_args, 'session': state['session']}\n",
        "WikiSessionEnv: search_pages(query='moon') was answered",
    ),
    "one session for all rollouts": (
        "class WikiSessionEnv(vf.StatefulToolEnv):\n"
        "    def __init__(self, **kwargs):\n"
        "        super().__init__(tools=[search_pages, view_sections, read_section], **kwargs)\n"
        "        self.add_tool(take_note, args_to_skip=['session'])\n"
        "        self.session = {'notes': []}\n"
        "    async def setup_state(self, state):\n"
        "        state['session'] = self.session\n"
        "        return await super().setup_state(state)\n"
        "    def update_tool_args(self, tool_name, tool_args, messages, state, **kwargs):\n"
        "        if 'session' in self.skipped_args.get(tool_name, []):\n"
        "            tool_args = {**tool_args, 'session': state['session']}\n"
        "        return tool_args\n",
        "WikiSessionEnv: a second rollout's session holds",
    ),
}


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_part_fails_with_one_sentence(wrong):
    code, words = WRONG[wrong]
    name = next(n for n in exercises_tools.WORKSHOP if f"def {n}(" in code or f"class {n}(" in code)
    namespace = notebook_namespace(NOTEBOOK)
    exercise_mechanism.run_source(code, namespace, f"<wrong: {wrong}>")
    with pytest.raises(exercise_mechanism.ExerciseError) as error:
        exercises.check(namespace[name])
    message = str(error.value)
    assert words in message and "\n" not in message and "Traceback" not in message, message


def test_the_parts_are_notebook_04s_and_at_least_40_lines_are_the_learners():
    """Catches: a workshop that hands the learner a few lines to fill in (the issue asks for 40 or more)."""
    names = [n for n, (where, _) in exercises.WORKSHOP.items() if where == NOTEBOOK]
    assert names == list(exercises_tools.WORKSHOP)
    written = 0
    for name in names:
        solution = exercise_mechanism.solution_source(NOTEBOOK, name).splitlines()
        stub = "".join("".join(c["source"]) for c in cells(NOTEBOOK, "exercise") if f" {name}(" in "".join(c["source"]))
        stub = {line.strip() for line in stub.splitlines()}
        written += sum(1 for line in solution if line.strip() and line.strip() not in stub)
    assert written >= 40, written


def test_the_solutions_as_a_package_load_alone_pass_the_check_and_score_like_the_reference(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    namespace = write_and_load(NOTEBOOK, notebook_namespace(NOTEBOOK))
    folder = namespace["folder"]
    assert folder == tmp_path / "my_wiki_search"
    assert sorted(p.name for p in folder.iterdir() if p.suffix) == ["__init__.py", "pages.jsonl", "questions.jsonl"]
    text = (folder / "__init__.py").read_text()
    assert "course_lib" not in text and "import wiki_search" not in text
    assert sys.modules["my_wiki_search"].__file__ == str(folder / "__init__.py")
    report = capsys.readouterr().out  # the check_environment report the notebook prints
    for problem in ("crashes", "rewards NaN or out of range", "state changed after the end", "not deterministic"):
        assert f"{problem:<32}0\n" in report, report
    mine = vf.load_environment("my-wiki-search", num_eval_examples=20, seed=3)
    reference = vf.load_environment("wiki-search", num_eval_examples=20, seed=3)
    table = workshop.compare(mine, reference, exercises_tools.check_players(), items=4)
    assert len(table) == 4 * len(exercises_tools.check_players()) and table.same.all(), table
    assert table.reference.nunique() > 1, "the players must tell the rewards apart"
    expert = table[table.reply == "scripted expert"]
    assert (expert.yours == 1.0).all(), "the scripted expert finds every answer with the tools"
    # The session environment is in the package too, and hides its argument there as well.
    session_env = sys.modules["my_wiki_search"].WikiSessionEnv(eval_dataset=mine.get_eval_dataset())
    assert "session" not in str([t.parameters for t in session_env.tool_defs])
    # Copied alone: loads with only its own folder and site-packages on the path (-I), no course_lib.
    shown = "len(env.get_eval_dataset()), [t.name for t in env.tool_defs]"
    loaded = load_alone(tmp_path, "my-wiki-search", "num_eval_examples=5", ("wiki_search",), shown)
    assert loaded == "5 ['search_pages', 'view_sections', 'read_section']"


def test_a_wrong_tool_in_the_package_is_caught_by_the_comparison(tmp_path, monkeypatch, capsys):
    """Catches: a comparison that says "same" while the expert cannot find pages with the learner's search."""
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    namespace = notebook_namespace(NOTEBOOK)
    exercise_mechanism.run_source(
        "def search_pages(query: str) -> str:\n    return 'No page matches.'\n", namespace, "<wrong search>"
    )
    write_and_load(NOTEBOOK, namespace)
    table = workshop.compare(
        vf.load_environment("my-wiki-search"), vf.load_environment("wiki-search"), exercises_tools.check_players(), 2
    )
    assert not table.same.all() and "rewards differ; the first: item" in capsys.readouterr().out
