"""Every deliberately wrong solution in the tests, counted per notebook: each is refused with one sentence.

The wrong solutions live beside the tests of their notebook (test_exercises, test_workshop, test_workshop_tools,
test_workshop_tictactoe), each with the words its sentence must hold; here they all run once more through
`exercises.check` and one table prints caught/total per notebook (`pytest -s` shows it), with at least three
for every part.
"""

from collections import Counter

import test_exercises
import test_workshop
import test_workshop_tictactoe
import test_workshop_tools
from test_workshop import notebook_namespace

from course_lib import exercise_mechanism, exercises


def from_code(collection: dict) -> list[tuple[str, str, str, object]]:
    """(description, part, words, a function that returns the wrong part) for code written whole."""

    def wrong(code: str, name: str):
        namespace = notebook_namespace(exercises.WORKSHOP[name][0])
        exercise_mechanism.run_source(code, namespace, "<wrong>")
        return namespace[name]

    found = []
    for description, (code, words) in collection.items():
        name = next(n for n in exercises.WORKSHOP if f"def {n}(" in code or f"class {n}(" in code)
        found.append((description, name, words, lambda code=code, name=name: wrong(code, name)))
    return found


def every_wrong_solution() -> list[tuple[str, str, str, object]]:
    found = [*from_code(test_workshop.WRONG), *from_code(test_workshop_tools.WRONG)]
    found += from_code(test_workshop_tictactoe.WRONG)
    for description, (name, _, _, words) in test_workshop.MUTANTS.items():

        def one_line_wrong(description=description):
            name, namespace = test_workshop.mutant(description)
            return namespace[name]

        found.append((description, name, words, one_line_wrong))
    for description, (old, new, words) in test_workshop_tictactoe.CLASS_WRONG.items():

        def wrong_class(old=old, new=new):
            namespace = notebook_namespace(test_workshop_tictactoe.NOTEBOOK)
            test_workshop_tictactoe.wrong_class(namespace, old, new)
            return namespace["TicTacToeEnv"]

        found.append((description, "TicTacToeEnv", words, wrong_class))
    for name, wrong in test_exercises.WRONG:
        wrong.__name__ = name
        found.append((f"{name}: {wrong}", name, f"{name}(", lambda wrong=wrong: wrong))
    return found


def refused_with_one_sentence(part, words: str) -> bool:
    try:
        exercises.check(part)
    except exercise_mechanism.ExerciseError as error:
        message = str(error)
        return words in message and "\n" not in message
    return False


def test_every_wrong_solution_is_refused_and_every_part_has_three(capsys):
    """Catches: a check that lets a known wrong solution through, or a part tested against fewer than three."""
    caught, total, per_part, missed = Counter(), Counter(), Counter(), []
    for description, name, words, make in every_wrong_solution():
        notebook = exercises.WORKSHOP[name][0][:2]
        total[notebook] += 1
        per_part[name] += 1
        if refused_with_one_sentence(make(), words):
            caught[notebook] += 1
        else:
            missed.append(description)
    with capsys.disabled():
        print("\nwrong solutions refused with one sentence, per notebook:")
        for notebook in sorted(total):
            print(f"  {notebook}: {caught[notebook]}/{total[notebook]}")
    assert missed == []
    assert {name: per_part[name] for name in exercises.WORKSHOP if per_part[name] < 3} == {}
