"""The workshops of notebooks 02 and 03: the learner writes the environment's parts in cells.

Every stub fails its check with its TODO (and the check then goes on with the notebook's own
solution), every solution passes, a deliberately wrong version fails with one sentence, and the
solutions written out as a package (by the notebook's own package cells) load with
vf.load_environment, pass check_environment and score like the reference. The solutions, the given
cells and the package cells are read from the notebooks, so they cannot drift.
"""

import ast
import json
import re
import subprocess
import sys

import pytest
import verifiers as vf

from course_lib import exercise_mechanism, exercises, workshop
from course_lib.profiles import PROFILES

NOTEBOOKS = sorted({notebook for notebook, _ in exercises.WORKSHOP.values()})


def parts(notebook: str) -> list[str]:
    return [name for name, (where, _) in exercises.WORKSHOP.items() if where == notebook]


def cells(notebook: str, tag: str) -> list[dict]:
    found = json.loads((exercise_mechanism.NOTEBOOKS / notebook).read_text())["cells"]
    return [cell for cell in found if tag in cell["metadata"].get("tags", [])]


def notebook_namespace(notebook: str, parts_from: str = "solutions") -> dict:
    """What the notebook defines for its package: its given cells (tagged "workshop"), the stubs
    (tagged "exercise") and, unless parts_from="stubs", each part's solution block."""
    namespace = {"__name__": f"notebook{notebook[:2]}"}
    for tag in ("workshop", "exercise"):
        for cell in cells(notebook, tag):
            exercise_mechanism.run_source("".join(cell["source"]), namespace, f"<{notebook[:2]} cell {cell['id']}>")
    if parts_from == "solutions":
        for name in parts(notebook):
            code = exercise_mechanism.solution_source(notebook, name)
            exercise_mechanism.run_source(code, namespace, f"<solution of {name}>")
    return namespace


def write_and_load(notebook: str, namespace: dict) -> dict:
    """Run the notebook's own package cells (write, load, check_environment) in `namespace`."""
    namespace.update(exercises=exercises, workshop=workshop, vf=vf, profile=PROFILES["smoke"])
    for cell in cells(notebook, "package"):
        exercise_mechanism.run_source("".join(cell["source"]), namespace, f"<{notebook[:2]} package cell {cell['id']}>")
    return namespace


def load_alone(folder, env_id: str, args: str, reference_packages: tuple, shown: str = "len(env.get_eval_dataset())"):
    """Load `env_id` with only `folder` and site-packages on the path (-I); fail if course_lib or a
    reference package was imported. Returns what `shown` printed."""
    code = (
        f"import sys; sys.path.insert(0, {str(folder)!r}); import verifiers as vf\n"
        f"env = vf.load_environment({env_id!r}, {args})\n"
        f"assert not [m for m in sys.modules if m.split('.')[0] in {('course_lib', *reference_packages)!r}]\n"
        f"print({shown})"
    )
    result = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_each_part_has_a_stub_then_its_check_then_a_collapsed_solution(notebook):
    """Catches: a solution placed above its check (then "Run All" passes every check with no input),
    or a solution that is a code cell (it would run over the learner's code)."""
    order = [
        (cell["cell_type"], tag, "".join(cell["source"]))
        for cell in json.loads((exercise_mechanism.NOTEBOOKS / notebook).read_text())["cells"]
        for tag in cell["metadata"].get("tags", [])
        if tag in ("exercise", "check", "solution")
    ]
    for name in parts(notebook):
        defines = (f"def {name}(", f"class {name}(")
        stub = next(
            i for i, (_, tag, text) in enumerate(order) if tag == "exercise" and any(d in text for d in defines)
        )
        assert 'raise NotImplementedError("TODO' in order[stub][2]
        assert order[stub + 1][1:] == ("check", f"{name} = exercises.check({name})"), name
        kind, tag, text = order[stub + 2]
        assert (kind, tag) == ("markdown", "solution") and "<details>" in text, name
        assert any(d in text for d in defines), name


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_stub_fails_its_check_with_its_todo(notebook):
    namespace = notebook_namespace(notebook, parts_from="stubs")
    for name in parts(notebook):
        _, check = exercises.WORKSHOP[name]
        with pytest.raises(NotImplementedError, match="TODO"):
            check(namespace[name])


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_run_all_without_input_goes_on_with_the_solutions(notebook, capsys):
    """The notebook's check cells, in order, on the stubs: each says "not done yet" and returns the
    solution, which the next parts then use; the package is then written from the solutions."""
    namespace = notebook_namespace(notebook, parts_from="stubs")
    for name in parts(notebook):
        namespace[name] = exercises.check(namespace[name])
        assert exercise_mechanism.STATUS[name] == "the solution"
        assert "not done yet" in capsys.readouterr().out
        assert namespace[name] is not None


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_solution_passes_its_check(notebook):
    namespace = notebook_namespace(notebook)
    for name in parts(notebook):
        _, check = exercises.WORKSHOP[name]
        assert name in check(namespace[name])


WRONG = {  # a deliberately wrong version of a part -> the words its one sentence must contain
    "keeps whitespace": (
        "def parse_reversed(text):\n"
        "    start = text.find('<reversed_text>')\n"
        "    end = text.find('</reversed_text>', start)\n"
        "    return None if -1 in (start, end) else text[start + len('<reversed_text>'):end]\n",
        "parse_reversed: for the block on lines of its own",
    ),
    "a regular expression": (
        "import re\n"
        "def parse_reversed(text):\n"
        "    match = re.search(r'<reversed_text>(.*?)</reversed_text>', text, re.DOTALL)\n"
        "    return match.group(1).strip() if match else None\n",
        "never closes it",
    ),
    "autojunk left on": (
        "def lcs_ratio(prediction, target):\n    return SequenceMatcher(None, prediction, target).ratio()\n",
        "autojunk=False",
    ),
    "a reward off by a sign": (
        "def lcs_ratio(prediction, target):\n"
        "    return -SequenceMatcher(None, prediction, target, autojunk=False).ratio()\n",
        "lcs_ratio: for an exact reversal",
    ),
    "credit without a tag": (
        "def lcs_reward(parser, completion, answer, **kwargs):\n"
        "    parsed = parser.parse_answer(completion)\n"
        "    return lcs_ratio(completion[-1]['content'] if parsed is None else parsed, answer)\n",
        "lcs_reward: for the reply",
    ),
    "a format weight of 1": (
        "def make_rubric(parser):\n"
        "    funcs = [lcs_reward, parser.get_format_reward_func()]\n"
        "    return vf.Rubric(funcs=funcs, weights=[1.0, 1.0], parser=parser)\n",
        "make_rubric: your rubric's functions and weights",
    ),
    "the seed ignored": (
        "def load_environment(num_train_examples=-1, num_eval_examples=100, seed=0, **kwargs):\n"
        "    rows = [json.loads(line) for line in DATA_FILE.read_text().splitlines()]\n"
        "    data = Dataset.from_list([{'question': r['text'], 'answer': r['text'][::-1]} for r in rows])\n"
        "    split = data.train_test_split(test_size=num_eval_examples, seed=0)\n"
        "    parser = ReversedTextParser()\n"
        "    return vf.SingleTurnEnv(dataset=split['train'], eval_dataset=split['test'], system_prompt=SYSTEM_PROMPT,\n"
        "                            parser=parser, rubric=make_rubric(parser))\n",
        "load_environment(num_eval_examples=5, seed=1): your evaluation set starts with",
    ),
    "an error inside verifiers": (
        "def load_environment(num_train_examples=-1, num_eval_examples=100, seed=0, **kwargs):\n"
        "    return vf.SingleTurnEnv(dataset=None, eval_dataset=None, parser=ReversedTextParser())\n",
        "load_environment(num_eval_examples=5, seed=1) raised ValueError",
    ),
    "no stop condition": (
        "class DoubleCheckEnv(vf.MultiTurnEnv):\n"
        "    async def setup_state(self, state):\n"
        "        state['first_answer'] = None\n"
        "        return state\n"
        "    async def env_response(self, messages, state, **kwargs):\n"
        "        state['first_answer'] = self.parser.parse_answer(messages)\n"
        "        return [vf.UserMessage(content=ARE_YOU_SURE)]\n"
        "    async def answered_twice(self, state):  # the @vf.stop forgotten: never checked\n"
        "        return len(state['trajectory']) >= 2\n",
        "answered_twice: the model answered",
    ),
    "the first answer never stored": (
        "class DoubleCheckEnv(vf.MultiTurnEnv):\n"
        "    async def setup_state(self, state):\n"
        "        state['first_answer'] = None\n"
        "        return state\n"
        "    async def env_response(self, messages, state, **kwargs):\n"
        "        return [vf.UserMessage(content=ARE_YOU_SURE)]\n"
        "    @vf.stop\n"
        "    async def answered_twice(self, state):\n"
        "        return len(state['trajectory']) >= 2\n",
        "env_response: after the first reply",
    ),
    "a reply after the end changes the state": (
        "class DoubleCheckEnv(vf.MultiTurnEnv):\n"
        "    async def setup_state(self, state):\n"
        "        state['first_answer'] = None\n"
        "        return state\n"
        "    async def env_response(self, messages, state, **kwargs):\n"
        "        state['first_answer'] = self.parser.parse_answer(messages)\n"
        "        return [vf.UserMessage(content=ARE_YOU_SURE)]\n"
        "    @vf.stop\n"
        "    async def answered_twice(self, state):\n"
        "        return len(state['trajectory']) >= 2\n",
        "env_response: a reply sent after the second answer changed state['first_answer']",
    ),
    "no fallback on the first answer": (
        "def final_answer(completion, state):\n    return PARSER.parse_answer(completion)\n",
        "final_answer: for a second reply without a number",
    ),
    "the inherited stop kept": (
        "class TripleCheckEnv(DoubleCheckEnv):\n"
        "    @vf.stop\n"
        "    async def answered_three_times(self, state):\n"
        "        return len(state['trajectory']) >= 3\n",
        "TripleCheckEnv: the model answered 2 times",
    ),
}


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_part_fails_with_one_sentence(wrong):
    code, words = WRONG[wrong]
    name = next(name for name in exercises.WORKSHOP if f"def {name}(" in code or f"class {name}(" in code)
    namespace = notebook_namespace(exercises.WORKSHOP[name][0])
    exercise_mechanism.run_source(code, namespace, f"<wrong: {wrong}>")
    with pytest.raises(exercise_mechanism.ExerciseError) as error:
        exercises.check(namespace[name])
    message = str(error.value)
    assert words in message and "\n" not in message and "Traceback" not in message, message
    assert error.value._render_traceback_() == [f"✗ {message}"]  # what Jupyter shows: one line


MUTANTS = {  # a wrong part made from its solution: part, a line of it, what replaces the line, words of the sentence
    "parse_reversed stops at the first <": (
        "parse_reversed",
        "end = text.find(closing, start)",
        'end = text.find("<", start)',
        "parse_reversed: for < and > inside the block",
    ),
    "parse_reversed refuses punctuation a text may hold": (
        "parse_reversed",
        "    return text[start:end].strip()",
        "    content = text[start:end].strip()\n"
        '    return content if all(c.isalnum() or c.isspace() or c in ".,!?\'" for c in content) else None',
        "parse_reversed: for the texts' punctuation",
    ),
    "lcs_ratio divides by the target twice": (
        "lcs_ratio",
        "total = len(prediction) + len(target)",
        "total = 2 * len(target)",
        "lcs_ratio: for a reversal with one character lost",
    ),
    "lcs_reward gives None without a block": (
        "lcs_reward",
        "        return 0.0",
        "        return None",
        "you returned None",
    ),
    "lcs_reward scores the whole reply": (
        "lcs_reward",
        "    parsed = parser.parse_answer(completion)",
        '    parsed = completion[-1]["content"]',
        "lcs_reward: for the reply",
    ),
    "make_rubric without the format reward": (
        "make_rubric",
        "funcs=[lcs_reward, format_reward], weights=[1.0, 0.2]",
        "funcs=[lcs_reward], weights=[1.0]",
        "make_rubric: your rubric's functions and weights are",
    ),
    "make_rubric with the format as a metric": (
        "make_rubric",
        "weights=[1.0, 0.2]",
        "weights=[1.0, 0.0]",
        "make_rubric: your rubric's functions and weights are",
    ),
    "load_environment drops the system prompt": (
        "load_environment",
        "system_prompt=system_prompt,",
        "",
        "the prompt starts with",
    ),
    "final_answer always keeps the first answer": (
        "final_answer",
        '    return last if last is not None else state.get("first_answer")',
        '    return state.get("first_answer")',
        "final_answer: for two answers",
    ),
    "final_answer reads the first reply": (
        "final_answer",
        "PARSER.parse_answer(completion)",
        "PARSER.parse_answer(completion[:1])",
        "final_answer: for two answers",
    ),
    "TripleCheckEnv asks its questions the wrong way round": (
        "TripleCheckEnv",
        'if len(state["trajectory"]) == 1:',
        'if len(state["trajectory"]) == 2:',
        "TripleCheckEnv: the conversation after the question was",
    ),
    "TripleCheckEnv asks the same question twice": (
        "TripleCheckEnv",
        '"Last chance: what is your final answer?"',
        "ARE_YOU_SURE",
        "TripleCheckEnv: the conversation after the question was",
    ),
    "TripleCheckEnv adds a follow-up the task never asks for": (
        "TripleCheckEnv",
        '[vf.UserMessage(content="Last chance: what is your final answer?")]',
        '[vf.UserMessage(content="Last chance: what is your final answer?"), vf.UserMessage(content="Think!")]',
        "TripleCheckEnv: the conversation after the question was",
    ),
    "view_sections pastes every section's text": (
        "view_sections",
        "f\"- {section['section_id']}: {section['title']}\"",
        "f\"- {section['section_id']}: {section['title']} {section['text']}\"",
        "view_sections('honeybee') returned the text of the sections",
    ),
    "read_section returns the whole page": (
        "read_section",
        "    return f\"{page['title']} > {section['title']}\\n{section['text']}\"",
        "    return '\\n'.join(s['text'] for s in page['sections'])",
        "also returned the text of the sections",
    ),
    "read_section raises on an unknown section": (
        "read_section",
        "section = sections.get(slug(section_id))",
        "section = sections[slug(section_id)]",
        "read_section('honeybee', 'queen') raised KeyError",
    ),
    "search_pages lists one page too many": (
        "search_pages",
        "[:TOP_K]",
        "[: TOP_K + 1]",
        "search_pages('the largest animal in the world') listed the pages",
    ),
    "search_pages without an error for an empty query": (
        "search_pages",
        "    if not tokenize(str(query)):",
        "    if False:",
        "search_pages(''), an empty query, returned",
    ),
    "correct_answer scores a rollout that ended on a tool call": (
        "correct_answer",
        ' or last.get("tool_calls"):',
        ":",
        "correct_answer: for a rollout that ended on a tool call with text",
    ),
    "load_wiki_environment drops the system prompt": (
        "load_wiki_environment",
        "system_prompt=SYSTEM_PROMPT,",
        "",
        "its system_prompt differs from the reference's",
    ),
    "load_wiki_environment ignores max_turns": (
        "load_wiki_environment",
        "max_turns=max_turns,",
        "max_turns=8,",
        "load_wiki_environment(max_turns=3, num_eval_examples=5, seed=1): its max_turns differs",
    ),
    "winner without the columns": (
        "winner",
        "(0, 3, 6), (1, 4, 7), (2, 5, 8), ",
        "",
        "winner: for three X on the line 0-3-6",
    ),
    "winner stops at the first empty line": (
        "winner",
        "if board[a] is not None and board[a] == board[b] == board[c]:",
        "if board[a] == board[b] == board[c]:",
        "winner: for a position from a game",
    ),
    "parse_move reads the first block": (
        "parse_move",
        '        position = end + len("</move>")',
        "        break",
        "parse_move: for two moves (the last one counts)",
    ),
    "judge takes a negative cell": (
        "judge",
        '(content.startswith("-") and digits != "0")',
        "False",
        "judge: for a negative cell",
    ),
    "make_game_rubric rewards any well-formed answer in full": (
        "make_game_rubric",
        'return state["well_formed_turns"] / state["model_turns"] if state["model_turns"] else 0.0',
        'return 1.0 if state["well_formed_turns"] else 0.0',
        "make_game_rubric: for the ending 'win after one answer without a tag'",
    ),
    "make_games lets the model start every game": (
        "make_games",
        "model_starts = random.Random(game_seed).random() < 0.5",
        "model_starts = True",
        "make_games(400, seed=0): the model starts 400 of 400 games",
    ),
    "make_games without strata": (
        "make_games",
        "prob = min(max(low + width * rng.random(), min_random_move_prob), max_random_move_prob)",
        "prob = min_random_move_prob + (max_random_move_prob - min_random_move_prob) * rng.random()",
        "make_games(num_examples=20, seed=0): row 0 has bucket 0 and random_move_prob 0.457; expected",
    ),
    "make_games draws the same games for train and eval": (
        "make_games",
        'random.Random(f"tictactoe:{split}:{seed}")',
        'random.Random(f"tictactoe:{seed}")',
        "make_games(200, seed=0) and make_games(200, split='eval') share the game seeds",
    ),
}


def mutant(description: str) -> tuple[str, str]:
    """The part's name and its namespace with the wrong version in place of the solution."""
    name, old, new, _ = MUTANTS[description]
    notebook = exercises.WORKSHOP[name][0]
    code = exercise_mechanism.solution_source(notebook, name)
    assert code.count(old) == 1, f"{description}: {old!r} is not once in the solution"
    namespace = notebook_namespace(notebook)
    exercise_mechanism.run_source(code.replace(old, new), namespace, f"<wrong: {description}>")
    return name, namespace


@pytest.mark.parametrize("description", MUTANTS)
def test_a_solution_with_one_line_wrong_fails_with_one_sentence(description):
    name, namespace = mutant(description)
    with pytest.raises(exercise_mechanism.ExerciseError) as error:
        exercises.check(namespace[name])
    message = str(error.value)
    assert MUTANTS[description][3] in message and "\n" not in message and "Traceback" not in message, message


def half_done(notebook: str, name: str, written: str) -> str:
    """The solution of class `name` with every method but `written` back to its TODO stub."""
    code = exercise_mechanism.solution_source(notebook, name)
    lines = code.splitlines()
    (cls,) = [node for node in ast.parse(code).body if isinstance(node, ast.ClassDef) and node.name == name]
    for node in reversed(cls.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != written:
            indent = " " * node.body[0].col_offset
            lines[node.body[0].lineno - 1 : node.end_lineno] = [f'{indent}raise NotImplementedError("TODO: {name}")']
    return "\n".join(lines) + "\n"


HALF_DONE = [  # notebook, class, the one method the learner wrote
    ("03_multi_turn_env.ipynb", "DoubleCheckEnv", "env_response"),
    ("04_tool_env.ipynb", "WikiSessionEnv", "__init__"),  # the solution's methods call super(): they must still work
    ("05_tictactoe_env.ipynb", "TicTacToeEnv", "play_turn"),
]


@pytest.mark.parametrize("notebook, name, written", HALF_DONE, ids=[name for _, name, _ in HALF_DONE])
def test_a_half_done_class_is_checked_with_the_learners_methods(notebook, name, written, capsys):
    """Catches: a class with one method left TODO replaced whole by the solution, so that the methods the
    learner did write are never run."""
    namespace = notebook_namespace(notebook)  # the parts before it done
    exercise_mechanism.run_source(half_done(notebook, name, written), namespace, f"<half done: {name}>")
    learners = vars(namespace[name])[written]
    got = exercises.check(namespace[name])
    taken = [m for m in exercise_mechanism.own_methods(got) if m != written and not m.startswith("__")]
    said = capsys.readouterr().out
    assert said.startswith("Correct so far: ") and f"with {', '.join(taken)} from the solution" in said, said
    assert vars(got)[written].__code__ is learners.__code__, "the learner's method is the one checked and kept"
    assert exercise_mechanism.STATUS[name] == f"yours, with {', '.join(taken)} from the solution"
    assert namespace[name] is got


def test_a_wrong_method_of_a_half_done_class_fails_and_names_what_came_from_the_solution():
    """Catches: a half-done class whose written method is wrong but passes because the solution's stands in."""
    notebook, name = "05_tictactoe_env.ipynb", "TicTacToeEnv"
    namespace = notebook_namespace(notebook)
    wrong = half_done(notebook, name, "setup_state").replace(
        "[[OPPONENT, cell] for cell in range(9) if board[cell] == OPPONENT]", "[]"
    )
    exercise_mechanism.run_source(wrong, namespace, "<half done, wrong>")
    with pytest.raises(exercise_mechanism.ExerciseError) as error:
        exercises.check(namespace[name])
    message = str(error.value)
    assert message.startswith("setup_state: for the row info") and "\n" not in message, message
    assert message.endswith("(with play_turn, max_turns_reached from the solution (still TODO in yours)).")


REFERENCE = {"02_single_turn_env.ipynb": "reverse-text", "03_multi_turn_env.ipynb": "double-check"}
SCRIPTS = {
    "02_single_turn_env.ipynb": exercises.CHECK_REPLIES,
    "03_multi_turn_env.ipynb": {
        "right, right": lambda answer: [f"\\boxed{{{answer}}}", f"\\boxed{{{answer}}}"],
        "right, wrong": lambda answer: [f"\\boxed{{{answer}}}", f"Sorry: {int(answer) + 1}"],
        "wrong, right": lambda answer: [f"<answer>{int(answer) - 1}</answer>", f"It is {answer}."],
        "right, no number": lambda answer: [f"So {answer}.", "Yes, I'm sure."],
        "no number at all": lambda answer: ["I don't know.", "Sorry."],
    },
}


@pytest.mark.parametrize("notebook", [n for n in NOTEBOOKS if n in REFERENCE])  # 04: tests/test_workshop_tools.py
def test_the_solutions_as_a_package_load_pass_the_check_and_score_like_the_reference(
    notebook, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    namespace = write_and_load(notebook, notebook_namespace(notebook))
    name = namespace["folder"].name
    assert namespace["folder"] == tmp_path / name
    assert sorted(p.name for p in namespace["folder"].iterdir() if p.suffix) == ["__init__.py", f"{name[3:]}.jsonl"]
    text = (namespace["folder"] / "__init__.py").read_text()
    assert "course_lib" not in text and f"import {name[3:]}" not in text
    assert sys.modules[name].__file__ == str(tmp_path / name / "__init__.py")
    report = capsys.readouterr().out  # the check_environment report the notebook prints
    for problem in ("crashes", "rewards NaN or out of range", "state changed after the end", "not deterministic"):
        assert f"{problem:<32}0\n" in report, report
    env_id = name.replace("_", "-")
    mine = vf.load_environment(env_id, num_eval_examples=20, seed=3)
    reference = vf.load_environment(REFERENCE[notebook], num_eval_examples=20, seed=3)
    table = workshop.compare(mine, reference, SCRIPTS[notebook], items=4)
    assert len(table) == 4 * len(SCRIPTS[notebook]) and table.same.all(), table
    assert table.reference.nunique() > 1, "the replies must tell the rewards apart"
    # Copied alone: loads with only its own folder and site-packages on the path (-I), no course_lib.
    assert load_alone(tmp_path, env_id, "num_eval_examples=5", ("reverse_text", "double_check")) == "5"


def test_a_wrong_part_in_the_package_is_caught_by_the_comparison(tmp_path, monkeypatch, capsys):
    """Catches: a comparison table that says "same" for environments that score differently."""
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    namespace = notebook_namespace("02_single_turn_env.ipynb")
    exercise_mechanism.run_source(WRONG["a format weight of 1"][0], namespace, "<wrong rubric>")
    write_and_load("02_single_turn_env.ipynb", namespace)
    table = workshop.compare(
        vf.load_environment("my-reverse-text"), vf.load_environment("reverse-text"), exercises.CHECK_REPLIES, 2
    )
    assert not table.same.all() and "rewards differ; the first: item" in capsys.readouterr().out


def test_a_part_that_uses_the_course_is_refused(tmp_path, monkeypatch):
    """Catches: a package that only works inside the course repository."""
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path)
    namespace = notebook_namespace("02_single_turn_env.ipynb")
    exercise_mechanism.run_source(
        "def lcs_ratio(prediction, target):\n    return reverse_text.lcs_ratio(prediction, target)\n",
        namespace,
        "<wrong: uses the course>",
    )
    with pytest.raises(exercise_mechanism.ExerciseError, match="a module of the course"):
        workshop.write_package("my_reverse_text", [namespace["lcs_ratio"]])


def test_the_experiment_answers_are_checked(capsys):
    import pandas as pd

    import reverse_text

    share = exercises.noise_floor_share(reverse_text.lcs_ratio)
    assert 0.5 < share < 0.9, "the curve must cross the noise floor well inside the plot"
    exercises.check_noise_floor(None)
    assert "Not answered yet" in capsys.readouterr().out
    exercises.check_noise_floor(round(share, 1))
    with pytest.raises(exercise_mechanism.ExerciseError):
        exercises.check_noise_floor(0.3)  # the height of the grey line, not the share where the curve crosses it
    table = pd.DataFrame({"changed_answer": [1.0, 0.0, 0.0, 1.0, 0.0]})
    exercises.check_changed_share(0.4, table)
    with pytest.raises(exercise_mechanism.ExerciseError):
        exercises.check_changed_share(2, table)  # a count, not a share


def test_the_turn_cap_experiment_of_04_is_checked(capsys):
    """Catches: a check that passes while unanswered, accepts a wrong reading, or disagrees with the notebook's
    worked answer; and a notebook whose answer is filled in above the check or whose worked answer is not
    collapsed right after it."""
    from course_lib.exercises_tools import check_turns_needed

    found = json.loads((exercise_mechanism.NOTEBOOKS / "04_tool_env.ipynb").read_text())["cells"]
    (at,) = [i for i, c in enumerate(found) if "check_turns_needed(answer)" in "".join(c["source"])]
    source, after = "".join(found[at]["source"]), found[at + 1]
    assert found[at]["cell_type"] == "code" and "check" in found[at]["metadata"].get("tags", [])
    assert re.search(r"^answer = None\b", source, re.MULTILINE), "the check cell starts unanswered"
    plot = "".join(found[at - 1]["source"])
    assert plot.startswith("caps = [1, 2, 3, 4, 5, 6]") and "04_turn_cap.png" in plot, "the plot cell comes first"
    text = "".join(after["source"])
    assert after["cell_type"] == "markdown" and text.startswith("<details>") and not after["metadata"].get("tags")
    stated = re.search(r"\*\*Answer: ([0-9]+)\.\*\*", text)
    assert stated, "the worked answer states the value as **Answer: N.**"

    check_turns_needed(None)  # the stub: not answered yet, and "Run All" goes on
    assert capsys.readouterr().out.startswith("Not answered yet")
    check_turns_needed(int(stated.group(1)))  # the worked answer passes
    assert capsys.readouterr().out.startswith("Correct: 4.")
    for wrong in (3, 1, 5, 8, "4", True, 0):  # cut off before the answer; not the fewest; the default; text; a bool
        with pytest.raises(exercise_mechanism.ExerciseError) as error:
            check_turns_needed(wrong)
        message = str(error.value)
        assert message.startswith("the turns needed: ") and "\n" not in message, message


@pytest.mark.parametrize("notebook", [n for n in NOTEBOOKS if n[:2] in ("02", "03", "04", "05")])
def test_the_workshop_notebooks_print_no_library_source(notebook):
    """The learner reads their own code in the cells; library source printouts are out."""
    sources = "".join(
        "".join(c["source"]) for c in json.loads((exercise_mechanism.NOTEBOOKS / notebook).read_text())["cells"]
    )
    assert "getsource" not in sources and "_answer_pending" not in sources
