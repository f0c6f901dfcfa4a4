"""The workshop of notebook 02: the learner writes the environment's parts in cells.

Every stub fails its check with its TODO (and the check then goes on with the notebook's own
solution), every solution passes, a deliberately wrong version fails with one sentence, and the
solutions written out as a package load with vf.load_environment, pass check_environment and score
like the reference. The solutions and the given cells are read from the notebook, so they cannot drift.
"""

import json
import subprocess
import sys

import pytest
import verifiers as vf

from course_lib import exercises, workshop
from course_lib.check_environment import check_environment

NOTEBOOK = "02_single_turn_env.ipynb"
PARTS = [name for name, (notebook, _) in exercises.WORKSHOP.items() if notebook == NOTEBOOK]
CELLS = json.loads((exercises.NOTEBOOKS / NOTEBOOK).read_text())["cells"]


def tagged(tag: str) -> list[dict]:
    return [cell for cell in CELLS if tag in cell["metadata"].get("tags", [])]


def notebook_namespace(parts: str = "solutions") -> dict:
    """What the notebook defines for the package: its given cells (tagged "workshop") and each part,
    as the solution block or the stub (tagged "exercise")."""
    namespace = {"__name__": "notebook02"}
    for cell in tagged("workshop"):
        exercises.run_source("".join(cell["source"]), namespace, f"<notebook 02, cell {cell['id']}>")
    for i, cell in enumerate(tagged("exercise")):
        exercises.run_source("".join(cell["source"]), namespace, f"<notebook 02, stub {i}>")
    if parts == "solutions":
        for name in PARTS:
            exercises.run_source(exercises.solution_source(NOTEBOOK, name), namespace, f"<solution of {name}>")
    return namespace


def test_each_part_has_a_stub_then_its_check_then_a_collapsed_solution():
    """Catches: a solution placed above its check (then "Run All" passes every check with no input),
    or a solution that is a code cell (it would run over the learner's code)."""
    order = [
        (cell["cell_type"], tag, "".join(cell["source"]))
        for cell in CELLS
        for tag in cell["metadata"].get("tags", [])
        if tag in ("exercise", "check", "solution")
    ]
    for name in PARTS:
        stub = next(i for i, (_, tag, text) in enumerate(order) if tag == "exercise" and f"def {name}(" in text)
        assert 'raise NotImplementedError("TODO' in order[stub][2]
        assert order[stub + 1][1:] == ("check", f"{name} = exercises.check({name})"), name
        kind, tag, text = order[stub + 2]
        assert (kind, tag) == ("markdown", "solution") and "<details>" in text and f"def {name}(" in text, name


def test_every_stub_fails_its_check_with_its_todo():
    namespace = notebook_namespace(parts="stubs")
    for name in PARTS:
        _, check = exercises.WORKSHOP[name]
        with pytest.raises(NotImplementedError, match="TODO"):
            check(namespace[name])


def test_run_all_without_input_goes_on_with_the_solutions(capsys):
    """The notebook's check cells, in order, on the stubs: each says "not done yet" and returns the
    solution, which the next parts then use."""
    namespace = notebook_namespace(parts="stubs")
    for name in PARTS:
        namespace[name] = exercises.check(namespace[name])
        assert exercises.STATUS[name] == "the solution"
        assert "not done yet" in capsys.readouterr().out
    assert namespace["parse_reversed"]("<reversed_text> x </reversed_text>") == "x"


def test_every_solution_passes_its_check():
    namespace = notebook_namespace()
    for name in PARTS:
        _, check = exercises.WORKSHOP[name]
        assert name in check(namespace[name])


WRONG = {  # a deliberately wrong version of a part -> the words its sentence must contain
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
}


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_part_fails_with_one_sentence(wrong):
    code, words = WRONG[wrong]
    namespace = notebook_namespace()
    exercises.run_source(code, namespace, f"<wrong: {wrong}>")
    name = next(name for name in PARTS if f"def {name}(" in code)
    with pytest.raises(exercises.ExerciseError) as error:
        exercises.check(namespace[name])
    message = str(error.value)
    assert words in message and "\n" not in message and "Traceback" not in message, message
    assert error.value._render_traceback_() == [f"✗ {message}"]  # what Jupyter shows: one line


def test_the_solutions_as_a_package_load_pass_the_check_and_score_like_the_reference(tmp_path, monkeypatch):
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    namespace = notebook_namespace()
    folder = workshop.write_package(
        "my_reverse_text",
        [namespace[name] for name in ("parse_reversed", "ReversedTextParser", "lcs_ratio", "lcs_reward")]
        + [namespace["make_rubric"], namespace["load_environment"]],
        constants={"SYSTEM_PROMPT": namespace["SYSTEM_PROMPT"]},
        data={"DATA_FILE": namespace["DATA_FILE"]},
    )
    assert sorted(p.name for p in folder.iterdir()) == ["__init__.py", "reverse_text.jsonl"]
    text = (folder / "__init__.py").read_text()
    assert "course_lib" not in text and "import reverse_text" not in text
    mine = vf.load_environment("my-reverse-text", num_eval_examples=20, seed=3)
    assert sys.modules["my_reverse_text"].__file__ == str(folder / "__init__.py")
    report = check_environment(lambda: vf.load_environment("my-reverse-text"), replies=200)
    assert not report.problems, report
    reference = vf.load_environment("reverse-text", num_eval_examples=20, seed=3)
    table = workshop.compare(mine, reference, exercises.CHECK_REPLIES, items=4)
    assert len(table) == 4 * len(exercises.CHECK_REPLIES) and table.same.all()
    assert table.reference.nunique() > 3, "the replies must tell the rewards apart"
    # Copied alone: loads with only its own folder and site-packages on the path (-I), no course_lib.
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import verifiers as vf\n"
        "env = vf.load_environment('my-reverse-text', num_eval_examples=5)\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('course_lib', 'reverse_text')]\n"
        "print(len(env.get_eval_dataset()))"
    )
    result = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "5", result.stderr[-2000:]


def test_a_wrong_part_in_the_package_is_caught_by_the_comparison(tmp_path, monkeypatch, capsys):
    """Catches: a comparison table that says "same" for environments that score differently."""
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    namespace = notebook_namespace()
    exercises.run_source(WRONG["a format weight of 1"][0], namespace, "<wrong rubric>")
    parts = ["parse_reversed", "ReversedTextParser", "lcs_ratio", "lcs_reward", "make_rubric", "load_environment"]
    workshop.write_package(
        "my_reverse_text",
        [namespace[name] for name in parts],
        constants={"SYSTEM_PROMPT": namespace["SYSTEM_PROMPT"]},
        data={"DATA_FILE": namespace["DATA_FILE"]},
    )
    table = workshop.compare(
        vf.load_environment("my-reverse-text"), vf.load_environment("reverse-text"), exercises.CHECK_REPLIES, 2
    )
    assert not table.same.all() and "rewards differ; the first: item" in capsys.readouterr().out


def test_a_part_that_uses_the_course_is_refused(tmp_path, monkeypatch):
    """Catches: a package that only works inside the course repository."""
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path)
    namespace = notebook_namespace()
    exercises.run_source(
        "def lcs_ratio(prediction, target):\n    return reverse_text.lcs_ratio(prediction, target)\n",
        namespace,
        "<wrong: uses the course>",
    )
    with pytest.raises(exercises.ExerciseError, match="a module of the course"):
        workshop.write_package("my_reverse_text", [namespace["lcs_ratio"]])


def test_the_experiment_answer_is_checked(capsys):
    import reverse_text

    share = exercises.noise_floor_share(reverse_text.lcs_ratio)
    assert 0.5 < share < 0.9, "the curve must cross the noise floor well inside the plot"
    exercises.check_noise_floor(None)
    assert "Not answered yet" in capsys.readouterr().out
    exercises.check_noise_floor(round(share, 1))
    with pytest.raises(exercises.ExerciseError):
        exercises.check_noise_floor(0.3)  # the height of the grey line, not the share where the curve crosses it


def test_notebook_02_prints_no_library_source():
    """The learner reads their own code in the cells; library source printouts are out of 02."""
    sources = "".join("".join(cell["source"]) for cell in CELLS)
    assert "getsource" not in sources and "_answer_pending" not in sources
