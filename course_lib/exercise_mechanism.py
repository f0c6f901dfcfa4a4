"""The exercise mechanism: stub -> check -> solution, and what every exercise check shares.

The learner writes a part of an environment in a cell whose stub raises NotImplementedError("TODO ..."),
and the check below it (`parse_reversed = exercises.check(parse_reversed)`) returns what the rest of
the notebook uses (`run_check`):
- the learner's part when it passes ("Correct: ...");
- the notebook's own solution while the stub still raises TODO ("not done yet: continuing with
  the solution"), so that "Run All", CI and `make course` run the notebook without any input;
- for a class with some methods written and others still TODO, the learner's methods with only the
  missing ones taken from the solution, checked together; the message names the methods taken;
- nothing when the part is wrong: it stops with one sentence (ExerciseError) naming the part, an
  example input, what came back and what was expected; never a traceback.
The solution is a collapsed markdown block (<details>, tagged "solution") AFTER the check, so
"Run All" never runs it over the learner's code.

This module imports nothing of the course: the checks (exercises.py, exercises_tools.py,
exercises_tictactoe.py) and workshop.py import it.
"""

import inspect
import json
import linecache
import re
import time
import types
from pathlib import Path

import numpy as np

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
STATUS: dict[str, str] = {}  # part -> "yours", "the solution" or "yours, with <methods> from the solution"


class ExerciseError(AssertionError):
    """A part that does not do what it should. Jupyter shows the one sentence, not a traceback."""

    def _render_traceback_(self):
        return [f"✗ {self}"]


def is_todo(error: BaseException) -> bool:
    return isinstance(error, NotImplementedError) and "TODO" in str(error)


def solution_source(notebook: str, name: str) -> str:
    """The code of the notebook's solution block (a markdown cell tagged "solution") defining `name`."""
    for cell in json.loads((NOTEBOOKS / notebook).read_text())["cells"]:
        if "solution" in cell["metadata"].get("tags", []) and cell["cell_type"] == "markdown":
            for code in re.findall(r"```python\n(.*?)```", "".join(cell["source"]), re.DOTALL):
                if re.search(rf"^(def|class) {name}\b", code, re.MULTILINE):
                    return code
    raise LookupError(f"{notebook} has no solution block that defines {name}")


def run_source(code: str, namespace: dict, filename: str) -> None:
    """exec `code` in `namespace`, keeping its text where inspect.getsource looks (as Jupyter does)."""
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    exec(compile(code, filename, "exec"), namespace)


def first_function(part):
    """The part itself, or for a class its first method (which carries the notebook's names and file)."""
    if isinstance(part, type):
        return next(f for f in vars(part).values() if inspect.isfunction(f))
    return part


def run_check(part, notebook: str, check_part):
    """Check the learner's `part` with `check_part`; return what the notebook goes on with: the part
    when it is right, the notebook's solution while its stub raises TODO, and for a class with some
    methods written and others TODO, the learner's methods with only the missing ones from the solution,
    checked together. When it is wrong, raise ExerciseError: one sentence naming the part, an example
    input and what was expected."""
    name = part.__name__
    namespace = first_function(part).__globals__  # the notebook's names
    missing = todo_methods(part) if isinstance(part, type) else []
    if 0 < len(missing) < len(own_methods(part)):  # a class half done: the learner's methods, the rest given
        run_source(solution_source(notebook, name), namespace, f"<solution of {name}>")
        namespace[name] = completed_class(part, namespace[name], missing)
        return check_half_done(namespace[name], check_part, missing)
    from_solution = first_function(part).__code__.co_filename.startswith("<solution of")  # the cell run again
    try:
        message = check_part(part)
    except NotImplementedError as error:
        if not is_todo(error):
            raise
        run_source(solution_source(notebook, name), namespace, f"<solution of {name}>")
        check_part(namespace[name])
        STATUS[name] = "the solution"
        print(f"{name}: not done yet, so the notebook continues with the solution (expand it below).")
        return namespace[name]
    STATUS[name] = "the solution" if from_solution else "yours"
    print(f"Correct: {message}" + (" (the solution's, not yours yet)" if from_solution else ""))
    return part


def check_half_done(part: type, check_part, missing: list[str]) -> type:
    """Check a class whose methods `missing` came from the solution; the message names them."""
    taken = f"{', '.join(missing)} from the solution (still TODO in yours)"
    try:
        message = check_part(part)
    except ExerciseError as error:
        raise ExerciseError(f"{str(error).rstrip('.')} (with {taken}).") from None
    STATUS[part.__name__] = f"yours, with {', '.join(missing)} from the solution"
    print(f"Correct so far: {message} Your methods pass, with {taken}.")
    return part


def own_methods(cls: type) -> dict:
    """The functions a class defines itself (not inherited), by name."""
    return {name: value for name, value in vars(cls).items() if inspect.isfunction(value)}


def todo_methods(cls: type) -> list[str]:
    """The methods of `cls` whose body still raises NotImplementedError("TODO ...")."""
    return [
        name
        for name, method in own_methods(cls).items()
        if "NotImplementedError" in method.__code__.co_names
        and any(isinstance(c, str) and c.startswith("TODO") for c in method.__code__.co_consts)
    ]


def completed_class(part: type, solution: type, missing: list[str]) -> type:
    """The learner's class with the methods named in `missing` taken from the solution's class. Every method is
    copied so that its zero-argument super() means the new class (it meant the class it was written in)."""
    namespace = {key: value for key, value in vars(part).items() if key not in ("__dict__", "__weakref__")}
    namespace |= {name: vars(solution)[name] for name in missing if name in vars(solution)}
    completed = type(part)(part.__name__, part.__bases__, namespace)
    for name, method in own_methods(completed).items():
        setattr(completed, name, with_class_cell(method, completed))
    return completed


def with_class_cell(func, cls: type):
    """A copy of `func` whose `__class__` (what zero-argument super() reads) is `cls`."""
    if "__class__" not in func.__code__.co_freevars:
        return func
    cells = tuple(
        types.CellType(cls) if var == "__class__" else cell
        for var, cell in zip(func.__code__.co_freevars, func.__closure__)
    )
    copy = types.FunctionType(func.__code__, func.__globals__, func.__name__, func.__defaults__, cells)
    copy.__kwdefaults__, copy.__qualname__ = func.__kwdefaults__, func.__qualname__
    copy.__dict__.update(func.__dict__)  # what decorators such as @vf.stop marked
    return copy


def short_repr(value, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 5] + "...'"


def call_part(func, *args, **kwargs):
    """func(*args, **kwargs); an exception (other than TODO) becomes one sentence with the input."""
    try:
        return func(*args, **kwargs)
    except NotImplementedError as error:
        if is_todo(error):
            raise
        problem = error
    except ExerciseError:
        raise
    except Exception as error:
        problem = error
    shown = ", ".join([short_repr(a) for a in args] + [f"{k}={short_repr(v)}" for k, v in kwargs.items()])
    raise ExerciseError(f"{func.__name__}({shown}) raised {type(problem).__name__}: {problem}") from None


def is_number(answer) -> bool:
    return isinstance(answer, (int, float, np.integer, np.floating)) and not isinstance(answer, bool)


def not_answered(answer, where: str) -> bool:
    """True, after saying what to do, while an experiment's `answer` is still None."""
    if answer is None:
        print(f"Not answered yet: {where}, and set `answer` above.")
        return True
    return False


def check_fast_on_unclosed_tags(parse, tag: str, advice: str) -> None:
    """A parser must answer None, in milliseconds, to a reply that opens `tag` 3,000 times and never closes it."""
    start = time.perf_counter()
    got = call_part(parse, tag * 3_000)
    seconds = time.perf_counter() - start
    if got is not None or seconds > 0.1:
        raise ExerciseError(
            f"{parse.__name__}: a reply that opens {tag} 3,000 times and never closes it took {seconds:.2f} s and "
            f"returned {got!r} (expected None, in milliseconds). {advice}"
        )
