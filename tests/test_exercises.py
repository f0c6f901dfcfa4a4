"""The exercises of notebooks 01 and 06-10 (stub -> check -> collapsed solution, as in the workshops:
tests/test_workshop.py checks their order, stubs and solutions): a wrong answer fails with one sentence."""

import json
import re
from pathlib import Path

import pytest

from course_lib import exercise_mechanism, exercises

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"

WRONG = [  # part, a wrong version (the bug it stands for)
    ("reward_with_format", lambda reply: float("<answer>391</answer>" in reply)),  # no format credit, no whitespace
    (
        "my_wilson",
        lambda k, n, z=1.96: (
            k / n - z * (k / n * (1 - k / n) / n) ** 0.5,
            k / n + z * (k / n * (1 - k / n) / n) ** 0.5,
        ),
    ),  # the Wald interval
    ("keep_hard_win", lambda game: game["winner"] in ("X", "draw") and game["random_move_prob"] <= 0.3),  # draws
    ("sft_steps", lambda games, batch, epochs: int(epochs * games // batch)),  # drops the short last batch
    ("advantages", lambda rewards, scale: [r - sum(rewards) / len(rewards) for r in rewards]),  # never scales
    ("advantages", lambda rewards, scale: 1 / 0),  # a crash becomes a sentence
    ("expected_reward", lambda lp, r: -(lp.exp() * r).sum(-1).mean()),  # the loss's sign: minimises the reward
    ("expected_reward", lambda lp, r: (lp * r).sum(-1).mean()),  # log pi used as pi
    ("expected_reward", lambda lp, r: (lp.exp() * r).sum(-1).mean().item()),  # a float: no gradient
    ("expected_reward", lambda lp, r: r.gather(1, lp.exp().multinomial(8, replacement=True)).mean()),  # sampled
    ("expected_reward", lambda lp, r: (lp.exp() * r.flip(-1)).sum(-1).mean()),  # rewards of other cells
    ("expected_reward", lambda lp, r: (lp.exp() * r).sum()),  # summed over positions, not averaged
    ("reward_with_format", lambda reply: 1.0 if "391" in reply else 0.2 if "<answer>" in reply else 0.0),  # no tags
    ("reward_with_format", lambda reply: float("<answer>" in reply)),  # any answer in the tags earns 1
    ("my_wilson", lambda k, n, z=1.96: (max(0.0, k / n - 0.1), min(1.0, k / n + 0.1))),  # a fixed half-width
    (
        "my_wilson",
        lambda k, n, z=1.96: tuple(
            ((k / n + z * z / (2 * n)) + s * z * (k / n * (1 - k / n) / n + z * z / (4 * n * n)) ** 0.5)
            for s in (-1, 1)
        ),
    ),  # the Wilson centre and half-width without dividing by (1 + z²/n)
    ("keep_hard_win", lambda game: game["winner"] == "X"),  # the opponent's strength ignored
    ("keep_hard_win", lambda game: game["winner"] == "X" and game["random_move_prob"] < 0.3),  # 0.3 left out
    ("sft_steps", lambda games, batch, epochs: -(-games // batch) * epochs),  # not rounded up after the epochs
    ("sft_steps", lambda games, batch, epochs: -(-games * epochs // batch)),  # batches counted across epochs
    (
        "advantages",
        lambda rewards, scale: [
            (r - sum(rewards) / len(rewards))
            / ((sum((x - sum(rewards) / len(rewards)) ** 2 for x in rewards) / len(rewards)) ** 0.5 + 1e-4)
            if scale == "group"
            else r - sum(rewards) / len(rewards)
            for r in rewards
        ],
    ),  # the population std (ddof=0), not TRL's sample std
]


@pytest.mark.parametrize("name, wrong", WRONG, ids=[name for name, _ in WRONG])
def test_a_wrong_answer_fails_with_one_sentence_naming_the_part(name, wrong):
    _, check = exercises.WORKSHOP[name]
    wrong.__name__ = name  # as the learner's function is named
    with pytest.raises(exercise_mechanism.ExerciseError) as error:
        check(wrong)
    assert str(error.value).startswith(f"{name}(") and len(str(error.value)) > 40


def worked_answer(notebook: str) -> str:
    cells = json.loads((NOTEBOOKS / notebook).read_text())["cells"]
    (text,) = ["".join(c["source"]) for c in cells if c["id"] == "ex10solm"]
    return re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)


def test_games_needed_waits_for_an_answer_then_checks_it(capsys):
    namespace = {}
    exec(worked_answer("10_evaluation_and_plots.ipynb"), namespace)
    exercises.check_games_needed(namespace["games_needed"])
    assert "Correct" in capsys.readouterr().out
    exercises.check_games_needed(None)  # "Run All" with no answer goes on
    assert "Not answered yet" in capsys.readouterr().out
    with pytest.raises(exercise_mechanism.ExerciseError):
        exercises.check_games_needed(96)  # the Wald interval's answer


def test_every_notebook_from_01_to_10_has_a_checked_exercise():
    workshop = {notebook[:2] for notebook, _ in exercises.WORKSHOP.values()}
    assert sorted(workshop | {"10"}) == [f"{i:02d}" for i in range(1, 11)]
    sources = [
        "".join(c["source"]) for c in json.loads((NOTEBOOKS / "10_evaluation_and_plots.ipynb").read_text())["cells"]
    ]
    assert any("exercises.check_games_needed(games_needed)" in s for s in sources)
