"""The double-check environment: answer parsing, the two-turn rollout, stop condition and reward.

Rollouts run through the real MultiTurnEnv loop (setup_state -> model -> env_response ->
model -> @vf.stop -> rubric) with a client that returns scripted replies in order instead of
calling a model, and records every prompt it was sent. Each test names the bug it catches.
"""

import asyncio

import pytest
import verifiers as vf

import double_check
from course_lib.offline import OfflineClient

ENV = double_check.load_environment(num_eval_examples=20)
ROW = ENV.get_eval_dataset()[0]
RIGHT = ROW["answer"]
WRONG = str(int(RIGHT) + 1)


class ScriptedReplies(OfflineClient):
    """A verifiers client that answers with `replies` in order and records every prompt."""

    def __init__(self, *replies: str):
        super().__init__()
        self.replies, self.prompts = list(replies), []

    def respond(self, prompt, **kwargs):
        self.prompts.append(prompt)
        return self.replies.pop(0)  # IndexError (-> a rollout error) if asked once too often


def rollout(*replies: str, row=ROW):
    client = ScriptedReplies(*replies, "a third reply that must never be requested")
    output = asyncio.run(ENV.run_rollout(row, client, "scripted", {}, state_columns=["first_answer"]))
    assert output["error"] is None
    return output, client


def metrics(output) -> dict:
    return {key: output["metrics"][key] for key in ("correct_answer", "first_answer_correct", "changed_answer")}


# --- parsing an answer ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is \\boxed{42}.", "42"),
        ("\\boxed{ 1,200 }", "1200"),
        ("\\boxed{x = -7}", "-7"),
        ("<answer>26</answer>", "26"),
        ("<answer>\n 26.0 \n</answer>", "26"),
        ("70 - 22 - 16 = 32", "32"),  # no format: the last number
        ("So 83 - 57 is 26.", "26"),  # a full stop is not a decimal point
        ("The temperature is now -4 degrees.", "-4"),
        ("It drops to \u22124.", "-4"),  # unicode minus
        ("70-22", "22"),  # a minus glued to a number is subtraction, not a sign
        ("007", "7"),
        ("-0", "0"),
        ("2.50", "2.5"),
        ("\\boxed{12} ... wait, 13", "12"),  # the boxed answer wins over a later number
        ("\\boxed{1} then \\boxed{2}", "2"),  # the last box wins
        ("\\boxed{} and then 5", "5"),  # an empty box is no answer: fall back
        ("<answer>7</answer> and \\boxed{8}", "8"),  # \boxed before <answer>
        ("I am not sure.", None),
        ("", None),
        ("x2 and v3", None),  # digits inside words are not numbers
    ],
)
def test_extract_answer(text, expected):
    """Catches: a parser that misses the boxed answer, mangles signs or thousands separators,
    reads a full stop as a decimal point, or invents a number."""
    assert double_check.extract_answer(text) == expected


def test_extract_answer_survives_huge_numbers_and_text():
    """Catches: int()/float() conversions that raise (Python limits int->str to 4300 digits)
    or round, which would crash env_response and end the rollout with an error."""
    assert double_check.extract_answer("9" * 10_000) == "9" * 10_000
    assert double_check.extract_answer("blah " * 100_000 + "\\boxed{3}") == "3"


def test_every_dataset_answer_is_a_canonical_integer():
    """Catches: data whose answers could never equal a parsed answer (e.g. "07" or "5.0")."""
    for row in double_check.load_rows():
        assert double_check.extract_answer(row["answer"]) == row["answer"], row
        int(row["answer"])


# --- the rollout ------------------------------------------------------------------------------


def test_rollout_is_question_answer_are_you_sure_answer_then_stop():
    """Catches: a stop condition that fires too early (one turn) or never (a third model call),
    or an environment reply other than "Are you sure?" with the conversation so far."""
    output, client = rollout(f"It is \\boxed{{{RIGHT}}}.", f"Yes. \\boxed{{{RIGHT}}}")
    assert output["stop_condition"] == "answered_twice"
    assert output["metrics"]["num_turns"] == 2.0
    assert len(client.prompts) == 2 and len(client.replies) == 1  # the third reply was never used
    first, second = client.prompts
    assert [m.role for m in first] == ["system", "user"] and first[1].content == ROW["question"]
    assert [(m.role, m.content) for m in second[2:]] == [
        ("assistant", f"It is \\boxed{{{RIGHT}}}."),
        ("user", double_check.ARE_YOU_SURE),
    ]
    assert [(m.role, m.content) for m in output["completion"]] == [
        ("assistant", f"It is \\boxed{{{RIGHT}}}."),
        ("user", "Are you sure?"),
        ("assistant", f"Yes. \\boxed{{{RIGHT}}}"),
    ]


@pytest.mark.parametrize(
    "first, second, expected",
    [
        # right, and stays right
        (f"\\boxed{{{RIGHT}}}", f"Yes, \\boxed{{{RIGHT}}}.", (1.0, 1.0, 0.0)),
        # wrong, then corrected: the FINAL answer is scored
        (f"\\boxed{{{WRONG}}}", f"Sorry, it is \\boxed{{{RIGHT}}}.", (1.0, 0.0, 1.0)),
        # right, then talked out of it: reward 0 although the first answer was right
        (f"\\boxed{{{RIGHT}}}", f"Oops, \\boxed{{{WRONG}}}.", (0.0, 1.0, 1.0)),
        # wrong and stays wrong
        (f"\\boxed{{{WRONG}}}", f"I am sure: {WRONG}", (0.0, 0.0, 0.0)),
        # a second reply without a number keeps the first answer
        (f"The answer is {RIGHT}.", "Yes, I am sure.", (1.0, 1.0, 0.0)),
        (f"The answer is {WRONG}.", "Yes!", (0.0, 0.0, 0.0)),
        # no number at first, a right one after "Are you sure?"
        ("I don't know.", f"Then \\boxed{{{RIGHT}}}.", (1.0, 0.0, 1.0)),
        # no number at all
        ("I don't know.", "Still no idea.", (0.0, 0.0, 0.0)),
        # empty replies
        ("", "", (0.0, 0.0, 0.0)),
        # unformatted, with the right number last, both times
        (f"Let me see... {ROW['question']} gives {RIGHT}", f"yes {RIGHT}", (1.0, 1.0, 0.0)),
    ],
)
def test_reward_is_the_final_answer_and_metrics_track_the_change(first, second, expected):
    """Catches: scoring the first answer instead of the final one, a wrong changed flag, or
    a "no number" reply counted as a (wrong) new answer."""
    output, _ = rollout(first, second)
    assert tuple(metrics(output).values()) == expected
    assert output["reward"] == expected[0]  # weights: only correct_answer counts


def test_first_answer_is_kept_in_state():
    """Catches: setup_state/env_response not recording the first answer in the rollout's state."""
    output, _ = rollout(f"\\boxed{{{WRONG}}}", f"\\boxed{{{RIGHT}}}")
    assert output["first_answer"] == WRONG
    output, _ = rollout("no idea", "none")
    assert output["first_answer"] is None


def test_used_boxed_is_the_share_of_replies_with_a_box():
    """Catches: a format metric that reads only one reply, or leaks into the reward."""
    assert rollout(f"\\boxed{{{RIGHT}}}", f"\\boxed{{{RIGHT}}}")[0]["metrics"]["used_boxed"] == 1.0
    output, _ = rollout(f"\\boxed{{{RIGHT}}}", "yes")
    assert output["metrics"]["used_boxed"] == 0.5 and output["reward"] == 1.0
    assert rollout(RIGHT, RIGHT)[0]["metrics"]["used_boxed"] == 0.0


def test_negative_answers_are_matched():
    """Catches: a parser that drops the minus sign (19 rows have negative answers)."""
    row = next(r for r in ENV.get_eval_dataset().to_list() + ENV.get_dataset().to_list() if r["answer"].startswith("-"))
    output, _ = rollout(f"\\boxed{{{row['answer']}}}", "sure", row=row)
    assert output["reward"] == 1.0
    output, _ = rollout(f"\\boxed{{{row['answer'][1:]}}}", "sure", row=row)
    assert output["reward"] == 0.0


def test_splits_are_disjoint_and_seeded():
    """Catches: evaluation questions leaking into training, or a split that changes between runs."""
    env = double_check.load_environment(num_train_examples=40, num_eval_examples=25, seed=3)
    train, evals = env.get_dataset(), env.get_eval_dataset()
    assert (len(train), len(evals)) == (40, 25)
    assert not set(train["question"]) & set(evals["question"])
    again = double_check.load_environment(num_eval_examples=25, seed=3)
    assert again.get_eval_dataset()["question"] == evals["question"]
    assert evals[0]["prompt"][0] == {"role": "system", "content": double_check.SYSTEM_PROMPT}


def test_load_environment_by_id_after_install():
    """Catches: a packaging change that breaks `vf.load_environment("double-check")` (and vf-eval)."""
    env = vf.load_environment("double-check", num_eval_examples=5)
    assert isinstance(env, vf.MultiTurnEnv)
    assert env.get_eval_dataset()["question"] == ENV.get_eval_dataset()["question"][:5]
