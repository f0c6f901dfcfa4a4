"""Every exercise check passes with the solution stored in its notebook and fails on a wrong answer."""

import asyncio
import inspect
import json
from pathlib import Path

import pytest

from course_lib import exercises

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"


def solution(notebook: str) -> dict:
    """Run the notebook's cell tagged "solution" (self-contained by design) and return its names."""
    cells = json.loads((NOTEBOOKS / notebook).read_text())["cells"]
    (cell,) = [c for c in cells if "solution" in c["metadata"].get("tags", [])]
    namespace = {}
    exec("".join(cell["source"]), namespace)
    return namespace


CASES = [  # notebook, check, the solution's name, a wrong answer (the bug it stands for)
    (
        "01_rl_concepts.ipynb",
        exercises.check_format_reward,
        "reward_with_format",
        lambda reply: float("<answer>391</answer>" in reply),
    ),  # no format credit, no whitespace
    (
        "06_evaluate_models.ipynb",
        exercises.check_wilson,
        "my_wilson",
        lambda k, n, z=1.96: (
            k / n - z * (k / n * (1 - k / n) / n) ** 0.5,
            k / n + z * (k / n * (1 - k / n) / n) ** 0.5,
        ),
    ),
    (
        "07_sft_data_generation.ipynb",
        exercises.check_hard_win_filter,
        "keep_hard_win",
        lambda game: game["winner"] in ("X", "draw") and game["random_move_prob"] <= 0.3,
    ),  # keeps draws
    (
        "08_sft_warmup.ipynb",
        exercises.check_sft_steps,
        "sft_steps",
        lambda games, batch, epochs: int(epochs * games // batch),
    ),  # drops the short last batch
    (
        "09_grpo_training.ipynb",
        exercises.check_advantages,
        "advantages",
        lambda rewards, scale: [r - sum(rewards) / len(rewards) for r in rewards],
    ),  # never scales
    ("10_evaluation_and_plots.ipynb", exercises.check_games_needed, "games_needed", 96),  # the Wald answer
]


def run(check, answer):
    result = check(answer)
    return asyncio.run(result) if inspect.iscoroutine(result) else result


@pytest.mark.parametrize("notebook, check, name, wrong", CASES, ids=[c[0][:2] for c in CASES])
def test_check_passes_with_the_notebook_solution(notebook, check, name, wrong):
    run(check, solution(notebook)[name])


@pytest.mark.parametrize("notebook, check, name, wrong", CASES, ids=[c[0][:2] for c in CASES])
def test_check_fails_on_a_wrong_answer_with_a_message(notebook, check, name, wrong):
    with pytest.raises(AssertionError) as error:
        run(check, wrong)
    assert len(str(error.value)) > 30, "the learner gets a hint, not a bare assert"


def test_every_notebook_from_01_to_10_has_a_checked_exercise():
    """Notebooks with workshop exercises (02 to 05) are tested in tests/test_workshop*.py."""
    workshop = {notebook[:2] for notebook, _ in exercises.WORKSHOP.values()}
    assert sorted({c[0][:2] for c in CASES} | workshop) == [f"{i:02d}" for i in range(1, 11)]
    for notebook, check, *_ in CASES:
        sources = ["".join(c["source"]) for c in json.loads((NOTEBOOKS / notebook).read_text())["cells"]]
        assert any(f"exercises.{check.__name__}(" in s for s in sources), f"{notebook} never runs {check.__name__}"
