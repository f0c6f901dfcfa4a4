"""Notebook 01's GRPO from scratch: the lesson's own code, taken from the notebook's cells tagged
"scratch", reaches its targets with the cpu budget, and each failure of the lab shows its symptom.

Only the definitions of those cells run here (imports, functions, classes, constants); each test
trains with its own budget, so the test does not depend on what the notebook's cells print.
"""

import ast
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from course_lib.profiles import PROFILES

NOTEBOOK = Path(__file__).parent.parent / "notebooks" / "01_rl_concepts.ipynb"
CPU = PROFILES["cpu"].scratch
LAB_STEPS = CPU.experiment_steps  # the notebook's own runs, so these are the numbers it prints


def _definitions(source: str) -> ast.Module:
    """The cell's imports, functions, classes and literal constants; not its runs and prints."""
    keep = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            keep.append(node)
        elif isinstance(node, ast.Assign):
            try:
                ast.literal_eval(node.value)
            except ValueError:
                continue
            keep.append(node)
    return ast.Module(body=keep, type_ignores=[])


@pytest.fixture(scope="module")
def lesson():
    # The notebook trains on one thread (its first cell says so); the same floating-point sums make the
    # same run, and RL amplifies any difference: on two threads the main run ends at 86% non-losses.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    tagged = ["".join(c["source"]) for c in cells if "scratch" in c["metadata"].get("tags", [])]
    assert len(tagged) >= 6, "notebook 01 lost its cells tagged 'scratch'"
    namespace = {"np": np, "profile": PROFILES["cpu"]}
    for source in tagged:
        exec(compile(_definitions(source), str(NOTEBOOK), "exec"), namespace)
    yield namespace
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def healthy(lesson):
    return lesson["train"](LAB_STEPS)


def test_the_main_run_reaches_both_targets_with_the_cpu_budget(lesson):
    """Catches: a GRPO step that no longer learns (a sign, a baseline, a loss), or a recipe that stopped working.

    The notebook aims at 90% in both columns. Without the entropy bonus the same seeded run reached 92.6% /
    91.3% on the AMD host of the published run and 89.7% / 89.8% on a 2-core Intel Xeon (2026-11-28): CPUs
    round the same sums differently and RL amplifies it. So the test asks 85%: the untrained policy wins under
    20%, and the wrong sign ends 40 points below a healthy run (the next test)."""
    untrained = lesson["scores"](lesson["TinyPolicy"](), games=CPU.eval_games)
    policy, history = lesson["train"](CPU.steps, entropy_bonus=lesson["ENTROPY_BONUS"])
    trained = lesson["scores"](policy, games=CPU.eval_games)
    assert untrained["wins vs random"] < 0.2
    assert trained["wins vs random"] >= 0.85, trained
    assert trained["non-losses vs optimal"] >= 0.85, trained
    assert history["reward"].tail(100).mean() > history["reward"].head(100).mean() + 0.3


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_recipe_reaches_both_targets_at_other_seeds(lesson, seed):
    """Catches: a recipe that meets its targets only at seed 0, by luck. Before the entropy bonus, seeds 1-3
    won 90-91% against the random opponent but held only 54-59% non-losses against the optimal one, stuck on
    a losing reply to its openings (dev/scratch_seeds.md); seed 0 met both. With the bonus (0.1) all ten seeds
    0-9 met both (91.9-93.6% / 92.7-94.7%, 42-58 CPU seconds each, dev/scratch_seeds.md)."""
    policy, _ = lesson["train"](CPU.steps, entropy_bonus=lesson["ENTROPY_BONUS"], seed=seed)
    trained = lesson["scores"](policy, games=CPU.eval_games)
    assert trained["wins vs random"] >= 0.9, trained
    assert trained["non-losses vs optimal"] >= 0.9, trained


def test_a_wrong_advantage_sign_does_not_learn(lesson, healthy):
    """The check can fail: GRPO with the advantages negated pushes the policy away from winning."""
    right = lesson["grpo_advantages"]
    lesson["grpo_advantages"] = lambda rewards, scale=True: -right(rewards, scale)
    try:
        wrong, _ = lesson["train"](LAB_STEPS)
    finally:
        lesson["grpo_advantages"] = right
    assert lesson["scores"](wrong)["wins vs random"] < lesson["scores"](healthy[0])["wins vs random"] - 0.4


def test_lab_a_the_biased_opponent_is_memorised_and_the_check_catches_it(lesson, healthy):
    biased_opponent = lesson["first_optimal_opponent"]
    biased, _ = lesson["train"](LAB_STEPS, opponent=biased_opponent)

    def non_losses(policy, opponent):
        table = lesson["evaluate"](policy, 0.0, opponent=opponent).loc["all"]
        return table["win"] + table["draw"]

    fair = lesson["opponent_move"]
    assert non_losses(biased, biased_opponent) >= 0.9  # looks perfect against its own opponent
    assert non_losses(biased, fair) <= 0.5  # and loses most games to the fair one
    assert non_losses(healthy[0], fair) >= non_losses(biased, fair) + 0.2  # the fix: train against the fair one
    assert len(lesson["first_moves"](biased_opponent)) == 1 and len(lesson["first_moves"](fair)) > 1


def test_lab_b_a_win_only_reward_gives_flat_groups_and_no_defence(lesson):
    flat, flat_history = lesson["train"](LAB_STEPS, opponents=(0.0, 0.0), reward=lesson["win_only_reward"])
    fixed, fixed_history = lesson["train"](LAB_STEPS, opponents=(0.0, 0.0))
    assert flat_history["flat groups"].tail(50).mean() >= 0.9
    assert lesson["scores"](flat)["non-losses vs optimal"] <= 0.1
    assert lesson["scores"](fixed)["non-losses vs optimal"] >= 0.3
    assert fixed_history["flat groups"].tail(50).mean() < flat_history["flat groups"].tail(50).mean()


def test_lab_c_a_per_answer_bonus_is_exploited_with_invalid_answers(lesson, healthy):
    exploit, history = lesson["train"](LAB_STEPS, reward=lesson["reward_per_answer"])
    against_random = lesson["evaluate"](exploit, 1.0).loc["all"]
    assert history["reward"].tail(50).mean() > healthy[1]["reward"].tail(50).mean()  # the reward curve looks better
    assert against_random["invalid"] >= 0.9 and against_random["win"] <= 0.1  # the evaluation shows the truth


def test_lab_d_without_the_penalty_invalid_answers_stay(lesson, healthy):
    _, history = lesson["train"](LAB_STEPS, reward=lambda game: lesson["game_reward"](game, invalid_penalty=0.0))
    assert history["invalid"].tail(50).mean() > healthy[1]["invalid"].tail(50).mean() + 0.03
