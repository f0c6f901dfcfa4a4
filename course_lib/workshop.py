"""Turn the parts a learner wrote in a notebook into a package, and compare it with the reference.

    folder = write_package("my_reverse_text", [parse_reversed, ..., load_environment],
                           constants={"SYSTEM_PROMPT": SYSTEM_PROMPT}, data={"DATA_FILE": DATA_FILE})
    my_env = vf.load_environment("my-reverse-text")      # my_envs/my_reverse_text/__init__.py
    compare(my_env, vf.load_environment("reverse-text"), replies)   # a table: same rewards?

The package is one `__init__.py`: the imports the parts use, the constants, the data files copied
next to it, and each part's source as written in the notebook. It imports nothing of the course,
so the folder can be copied anywhere (a part that uses course_lib is refused with a sentence).
"""

import ast
import builtins
import dis
import importlib
import inspect
import linecache
import math
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pandas as pd

from course_lib.exercise_mechanism import ExerciseError, short_repr
from course_lib.offline import OfflineClient, run_coroutine
from course_lib.rewards import reward_functions

ROOT = Path(__file__).resolve().parent.parent
MY_ENVS = (ROOT if (ROOT / "notebooks").is_dir() else Path.cwd()) / "my_envs"  # git ignores it
COURSE_MODULES = {"course_lib"} | {p.name for p in (ROOT / "course_lib" / "envs").iterdir() if p.is_dir()}


def source(part) -> str:
    """The source of a function or class, also one defined in a Jupyter cell (inspect.getsource
    finds a function there, not a class: take the class from the cell of one of its methods)."""
    try:
        return textwrap.dedent(inspect.getsource(part))
    except (OSError, TypeError):
        if not isinstance(part, type):
            raise
    method = next(f for f in vars(part).values() if inspect.isfunction(f))
    cell = "".join(linecache.getlines(method.__code__.co_filename))
    node = next(n for n in ast.walk(ast.parse(cell)) if isinstance(n, ast.ClassDef) and n.name == part.__name__)
    return ast.get_source_segment(cell, node) + "\n"


def global_names(part) -> set[str]:
    """The global names a part reads: in its code (and its methods'), its defaults, decorators and bases."""
    tree = ast.parse(source(part)).body[0]
    heads = [*getattr(tree, "bases", [])]
    for node in ast.walk(tree):  # the part, or a class's methods
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            heads += node.decorator_list
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            heads += [*node.args.defaults, *[d for d in node.args.kw_defaults if d]]
    names = {n.id for head in heads for n in ast.walk(head) if isinstance(n, ast.Name)}
    codes = (
        [f.__code__ for f in vars(part).values() if inspect.isfunction(f)]
        if isinstance(part, type)
        else [part.__code__]
    )
    while codes:
        code = codes.pop()
        names |= {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        codes += [c for c in code.co_consts if inspect.iscode(c)]
    return names


def import_line(part, name: str, value) -> str:
    """The import that gives the package `name` as the notebook has it, or an ExerciseError."""
    if inspect.ismodule(value):
        module, line = value.__name__, f"import {value.__name__}" + (f" as {name}" if value.__name__ != name else "")
    elif getattr(value, "__module__", None) not in (None, "__main__") and hasattr(value, "__name__"):
        module = value.__module__
        if getattr(sys.modules.get(module.split(".")[0]), value.__name__, None) is value:
            module = module.split(".")[0]  # from datasets import Dataset, not datasets.arrow_dataset
        line = f"from {module} import {value.__name__}" + (f" as {name}" if value.__name__ != name else "")
    else:
        raise ExerciseError(
            f"{part.__name__} uses {name}, a {type(value).__name__} of the notebook that the package does not "
            "have: add it to the parts (a function or class) or to the constants, or define it inside."
        )
    if module.split(".")[0] in COURSE_MODULES:
        raise ExerciseError(
            f"{part.__name__} uses {name} from {module}, a module of the course: the package must work alone "
            "when copied, so write what you need in a part."
        )
    return line


def write_package(name: str, parts: list, constants: dict | None = None, data: dict | None = None) -> Path:
    """Write my_envs/<name>/__init__.py from the parts (functions and classes, or a line of code such as
    "PARSER = vf.Parser(extract_fn=extract_answer)", in order) after the constants (str, numbers, compiled
    regular expressions) and copy the data files beside it; then make `vf.load_environment(name)` import
    this fresh copy. Returns the folder."""
    constants, data = constants or {}, data or {}
    given = [line.split("=")[0].strip() for part in parts if isinstance(part, str) for line in part.splitlines()]
    defined = {part.__name__ for part in parts if not isinstance(part, str)} | set(given) | set(constants) | set(data)
    imports = {"from pathlib import Path"} if data else set()
    imports |= {"import re"} if any(isinstance(v, re.Pattern) for v in constants.values()) else set()
    for part in [p for p in parts if not isinstance(p, str)]:
        methods = [f for f in vars(part).values() if inspect.isfunction(f)] if isinstance(part, type) else [part]
        namespace = methods[0].__globals__  # the notebook's names, where the part was defined
        for used in sorted(global_names(part) - defined - set(vars(builtins))):
            if used not in namespace:
                raise ExerciseError(f"{part.__name__} uses {used}, which is not defined anywhere.")
            imports.add(import_line(part, used, namespace[used]))
    folder = MY_ENVS / name
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f'"""{name}: an environment written in the course\'s notebooks, part by part."""', ""]
    stdlib = sorted(line for line in imports if line.split()[1].split(".")[0] in sys.stdlib_module_names)
    others = sorted(imports - set(stdlib))
    lines += ["from __future__ import annotations", "", *stdlib, "", *others, ""]
    for key, value in constants.items():
        multiline = isinstance(value, str) and "\n" in value and '"""' not in value and not value.endswith("\\")
        if isinstance(value, re.Pattern):
            lines.append(f"{key} = re.compile({value.pattern!r})")
        else:
            lines.append(f'{key} = """{value}"""' if multiline else f"{key} = {value!r}")
    for key, path in data.items():
        shutil.copyfile(path, folder / Path(str(path)).name)
        lines.append(f'{key} = Path(__file__).parent / "{Path(str(path)).name}"')
    body = "\n\n".join(part + "\n" if isinstance(part, str) else source(part) for part in parts)
    (folder / "__init__.py").write_text("\n".join([*lines, "", "", body]))
    shutil.rmtree(folder / "__pycache__", ignore_errors=True)  # a .pyc of the same second and size would be reused
    if str(MY_ENVS) not in sys.path:
        sys.path.insert(0, str(MY_ENVS))
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]  # import the new text, not the copy loaded before
    importlib.invalidate_caches()
    return folder


class Scripted(OfflineClient):
    """A player that sends fixed replies: one for every turn, or a list of them, in order."""

    def __init__(self, reply: str | list[str]):
        super().__init__()
        self.replies, self.turn = [reply] if isinstance(reply, str) else reply, 0

    def respond(self, prompt, **kwargs):
        self.turn += 1
        return self.replies[min(self.turn, len(self.replies)) - 1]


def score(env, replies: dict, items: int) -> pd.DataFrame:
    """Play each reply (kind -> a function of the item's answer that returns the reply, or a list of
    replies, one per turn; or a client that plays every item itself, such as the scripted wiki expert)
    on the first `items` evaluation items of `env`, through env.rollout and env.rubric as in an
    evaluation; one row per item and reply."""
    rows = env.get_eval_dataset().select(range(items)).to_list()

    async def play():
        table = []
        for row in rows:
            players = [m if isinstance(m, OfflineClient) else Scripted(m(row["answer"])) for m in replies.values()]
            states = [await env.rollout(dict(row), player, "scripted", {}) for player in players]
            await env.rubric.score_group(states)
            table += [(row["example_id"], kind, state["reward"]) for kind, state in zip(replies, states)]
        return table

    return pd.DataFrame(run_coroutine(play()), columns=["item", "reply", "reward"])


def same_rewards(env, reference, players: dict, part: str, yours: str, hint: str = "", items: int = 3) -> None:
    """Raise, naming the first item and player (a reply maker, or a client) where `env` and `reference` score
    differently on their first `items` items (an exercise check's comparison; `compare` shows a table)."""
    mine, theirs = (score(e, players, items).itertuples(index=False) for e in (env, reference))
    for (item, kind, got), (_, _, want) in zip(mine, theirs):
        if not math.isclose(got, want, abs_tol=1e-9):
            raise ExerciseError(
                f"{part}: for item {item}, with '{kind}', {yours} gives {got:.4f}, the reference {want:.4f}{hint}"
            )


PARSER_SAMPLES = [  # a reply in each course environment's answer format, and none
    "The answer is drones.",
    "<reversed_text>!olleH</reversed_text>",
    "So \\boxed{42}.",
    "<move>4</move>",
    "",
]


def verifiers_arguments(env) -> dict:
    """What an environment was given, as the model and the rubric meet it: the rows of both datasets, the
    system prompt, what its parser reads, the rubric's functions and weights, max_turns, the tool-error text."""

    def rows(dataset):
        return None if dataset is None else [(r["question"], r["answer"]) for r in dataset]

    def parsed(text):
        try:
            return env.parser.parse_answer([{"role": "assistant", "content": text}])
        except Exception as error:
            return f"raised {type(error).__name__}"

    formatter = getattr(env, "error_formatter", None)  # tool environments only
    return {
        "dataset": rows(env.get_dataset() if env.dataset is not None else None),
        "eval_dataset": rows(env.get_eval_dataset() if env.eval_dataset is not None else None),
        "system_prompt": env.system_prompt,
        "parser": [parsed(text) for text in PARSER_SAMPLES],
        "rubric": [(reward.name, reward.weight) for reward in reward_functions(env)],
        "max_turns": getattr(env, "max_turns", None),
        "error_formatter": formatter and [formatter(error) for error in (KeyError("open_page"), TypeError("no x"))],
    }


def same_arguments(env, reference, call: str) -> None:
    """Raise, naming the first argument the reference passes to verifiers that `env` has otherwise."""
    mine, theirs = verifiers_arguments(env), verifiers_arguments(reference)
    for argument, want in theirs.items():
        if mine[argument] != want:
            raise ExerciseError(
                f"{call}: its {argument} differs from the reference's (yours {short_repr(mine[argument])}, the "
                f"reference's {short_repr(want)}): pass {argument}= to verifiers as the reference does."
            )


def compare(mine, reference, replies: dict, items: int = 5) -> pd.DataFrame:
    """The rewards of both environments for the same replies on the same evaluation items, side by side;
    prints one sentence: all the same, or the first that differs."""
    questions = [env.get_eval_dataset().select(range(items))["question"] for env in (mine, reference)]
    if questions[0] != questions[1]:
        raise ExerciseError(
            f"the two environments evaluate different items: yours starts with {questions[0][0][:50]!r}, the "
            f"reference with {questions[1][0][:50]!r}. Load both with the same seed and num_eval_examples."
        )
    table = score(reference, replies, items).rename(columns={"reward": "reference"})
    table["yours"] = score(mine, replies, items)["reward"]
    table["same"] = [abs(a - b) < 1e-9 for a, b in zip(table.reference, table.yours)]
    table.insert(1, "text", [questions[1][i][:40] + "..." for i in table.item])
    different = table[~table.same]
    if different.empty:
        print(f"All {len(table)} rewards are the same ({items} items × {len(replies)} replies).")
    else:
        first = different.iloc[0]
        print(
            f"{len(different)} of {len(table)} rewards differ; the first: item {first.item}, reply "
            f"'{first.reply}': the reference gives {first.reference:.4f}, yours {first.yours:.4f}."
        )
    return table
