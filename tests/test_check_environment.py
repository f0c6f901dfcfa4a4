"""The environment checker: it passes every course environment and catches each kind of fault.

The full run (10,000 replies per environment) is `python -m course_lib.check_environment`;
here every course environment gets a few hundred fuzzed replies (about 2 s each).
"""

import math
import random

import pytest
import verifiers as vf
from datasets import Dataset

import double_check
import reverse_text
import tictactoe
import wiki_search
from course_lib.check_environment import check_environment
from wiki_search import session as wiki_session


@pytest.mark.parametrize(
    "module",
    [reverse_text, double_check, tictactoe, wiki_search, wiki_session],
    ids=lambda module: module.__name__.rsplit(".", 1)[-1],
)
def test_every_course_environment_passes(module):
    """Catches: a crash, a stalled scorer, NaN rewards or moves after the end in a course environment."""
    report = check_environment(module.load_environment, replies=300)
    assert report.problems == [], str(report)
    assert report.replies >= 300 and report.slowest_scoring_s < 5, str(report)


class ToyEnv(vf.MultiTurnEnv):
    """Two turns; `fault` breaks it in one way."""

    def __init__(self, fault: str = ""):
        self.fault = fault
        rows = [{"question": f"Say <word>{i}</word>.", "answer": str(i)} for i in range(5)]

        def reward(completion, answer, state) -> float:
            if fault == "nan":
                return math.nan
            if fault == "random":
                return random.random()
            if fault == "constant":
                return 1.0
            return float(
                answer
                in str(completion[-1].get("content") if isinstance(completion[-1], dict) else completion[-1].content)
            )

        super().__init__(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[reward]), max_turns=2)

    async def setup_state(self, state):
        state["turns"] = 0
        return state

    async def env_response(self, messages, state, **kwargs):
        if self.fault == "crash" and "<" in str(messages[-1]):
            raise ValueError("a reply with markup")
        if state["turns"] and self.fault != "after_end":  # after the end: nothing changes
            return [vf.UserMessage(content="Over.")]
        state["turns"] += 1
        return [vf.UserMessage(content="Again.")]


@pytest.mark.parametrize(
    "fault, expected",
    [
        ("crash", "a reply with markup"),
        ("nan", "reward nan outside [0.0, 1.0]"),
        ("random", "rewards ["),
        ("constant", "every episode got the same reward"),
        ("after_end", "a reply after the end changed the state"),
    ],
)
def test_each_fault_is_reported(fault, expected):
    report = check_environment(ToyEnv(fault), replies=100)
    assert any(expected in problem for problem in report.problems), str(report)
    assert expected in str(report)


def test_a_loader_giving_different_rows_is_not_deterministic():
    report = check_environment(lambda: reverse_text.load_environment(seed=random.randrange(10**6)), replies=20)
    assert "loading the environment twice gave different rows" in report.problems
