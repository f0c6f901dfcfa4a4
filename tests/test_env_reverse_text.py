"""The reverse-text environment: data, prompt, parser and reward, with scripted replies (no model).

Every reply goes through the real path (dataset row -> env.run_rollout -> client -> parser ->
rubric), with a client that returns a scripted reply instead of calling a model. The expected
rewards are exact: total = lcs_reward + 0.2 * format_reward. Each test names the bug it catches.
"""

import asyncio
import time

import pytest
import verifiers as vf

import reverse_text
from course_lib.offline import OfflineClient

ENV = reverse_text.load_environment(num_eval_examples=20)


class ScriptedReply(OfflineClient):
    """A verifiers client that answers every request with `reply` and records the prompts."""

    def __init__(self, reply: str):
        super().__init__()
        self.reply, self.prompts = reply, []

    def respond(self, prompt, **kwargs):
        self.prompts.append(prompt)
        return self.reply


def score(reply: str, text: str = "hello") -> dict:
    """Roll out one example whose text is `text` (target: text[::-1]) with a scripted reply."""
    row = {**ENV.get_eval_dataset()[0], "question": text, "answer": text[::-1]}
    row["prompt"] = [row["prompt"][0], {"role": "user", "content": text}]
    output = asyncio.run(ENV.run_rollout(row, ScriptedReply(reply), "scripted", {}))
    assert output["error"] is None
    return {"reward": output["reward"], **output["metrics"]}


def tagged(text: str) -> str:
    return f"<reversed_text>\n{text}\n</reversed_text>"


# --- data and prompt --------------------------------------------------------------------------


def test_answer_is_the_text_reversed_character_by_character():
    """Catches: a target reversed by words, not reversed, or taken from the wrong column."""
    rows = reverse_text.load_rows()
    assert len(rows) >= 500
    for row in ENV.get_eval_dataset():
        assert row["answer"] == row["question"][::-1]
        assert row["prompt"][-1] == {"role": "user", "content": row["question"]}


def test_prompt_starts_with_the_system_prompt_that_names_the_tag():
    """Catches: a lost system prompt, or one that asks for a tag the parser does not read."""
    system = ENV.get_eval_dataset()[0]["prompt"][0]
    assert system == {"role": "system", "content": reverse_text.SYSTEM_PROMPT}
    assert "<reversed_text>" in system["content"]
    example = reverse_text.SYSTEM_PROMPT.split("assistant: ", 1)[1]
    assert ENV.parser.parse(example).reversed_text == "Hello, world!"[::-1]  # the example is right


def test_train_and_eval_splits_are_disjoint_seeded_and_sized():
    """Catches: evaluation rows leaking into training, or a split that changes between runs."""
    env = reverse_text.load_environment(num_train_examples=50, num_eval_examples=30, seed=1)
    train, evals = env.get_dataset(), env.get_eval_dataset()
    assert (len(train), len(evals)) == (50, 30)
    assert not {r["id"] for r in train["info"]} & {r["id"] for r in evals["info"]}
    again = reverse_text.load_environment(num_train_examples=50, num_eval_examples=30, seed=1)
    assert again.get_eval_dataset()["question"] == evals["question"]
    other = reverse_text.load_environment(num_train_examples=50, num_eval_examples=30, seed=2)
    assert other.get_eval_dataset()["question"] != evals["question"]
    full = reverse_text.load_environment(num_eval_examples=100)
    assert len(full.get_dataset()) + len(full.get_eval_dataset()) == len(reverse_text.load_rows())


def test_the_model_sees_system_prompt_and_text():
    """Catches: a rollout that sends the model something other than the dataset prompt."""
    client = ScriptedReply(tagged("olleh"))
    row = ENV.get_eval_dataset()[3]
    asyncio.run(ENV.run_rollout(row, client, "scripted", {}))
    [prompt] = client.prompts
    assert [(m.role, m.content) for m in prompt] == [(m["role"], m["content"]) for m in row["prompt"]]


# --- rewards (exact) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, lcs, fmt",
    [
        # well formed: the exact reversal in the tag, nothing else
        (tagged("olleh"), 1.0, 1.0),
        ("<reversed_text>olleh</reversed_text>", 1.0, 1.0),
        # exact reversal, but with words around the tag: full LCS, format loses "starts with" (0.2)
        ("Sure! <reversed_text>olleh</reversed_text>", 1.0, 0.8),
        # not reversed: difflib matches "ll" only -> 2*2/(5+5)
        (tagged("hello"), 0.4, 1.0),
        # one character missing: 2*4/(4+5)
        (tagged("olle"), 8 / 9, 1.0),
        # the right text WITHOUT tags earns no LCS credit; verifiers' format check still gives 0.2
        ("olleh", 0.0, 0.2),
        ("", 0.0, 0.2),
        # an unclosed tag is not an answer
        ("<reversed_text>olleh", 0.0, 0.2 + 0.2),
        # empty tag: an answer, and an empty one
        ("<reversed_text></reversed_text>", 0.0, 1.0),
        # nested tags: the non-greedy match keeps the inner opening tag, "<reversed_text>olleh" -> 2*5/(20+5)
        ("<reversed_text><reversed_text>olleh</reversed_text></reversed_text>", 0.4, 1.0),
        # several tags: the FIRST one counts (no credit for hedging with a second try)
        ("<reversed_text>hello</reversed_text>\n<reversed_text>olleh</reversed_text>", 0.4, 1.0),
        ("<reversed_text>olleh</reversed_text>\n<reversed_text>hello</reversed_text>", 1.0, 1.0),
    ],
)
def test_rewards_are_exact(reply, lcs, fmt):
    """Catches: partial credit for untagged text, a parser reading the wrong block, a changed
    weight, or a reward that is not 1.0 for an exact answer."""
    scores = score(reply)
    assert scores["lcs_reward"] == pytest.approx(lcs, abs=1e-12)
    assert scores["format_reward_func"] == pytest.approx(fmt, abs=1e-12)
    assert scores["reward"] == pytest.approx(lcs + 0.2 * fmt, abs=1e-12)
    assert scores["num_turns"] == 1.0


def test_unicode_is_reversed_by_character_not_by_byte():
    """Catches: byte-level handling (a reversed UTF-8 encoding is not the reversed text)."""
    text = "Zoë's café: 3 €, 🙂 ok"
    assert score(tagged(text[::-1]), text)["reward"] == pytest.approx(1.2)
    garbled = text.encode("utf-8")[::-1].decode("utf-8", errors="replace")
    assert score(tagged(garbled), text)["lcs_reward"] < 0.9


def test_long_texts_are_not_scored_with_difflib_autojunk():
    """Catches: SequenceMatcher's default autojunk, which for 200+ characters ignores frequent
    characters (spaces, 'e') and scores a reversal with a few dropped characters near 0.4."""
    text = next(r["text"] for r in reverse_text.load_rows() if len(r["text"]) >= 250)
    target = text[::-1]
    drop_every_7th = "".join(c for i, c in enumerate(target) if i % 7 != 3)
    expected = 2 * len(drop_every_7th) / (len(drop_every_7th) + len(target))  # every kept char matches
    assert reverse_text.lcs_ratio(drop_every_7th, target) == pytest.approx(expected)
    assert score(tagged(drop_every_7th), text)["lcs_reward"] == pytest.approx(expected)


def test_huge_reply_is_scored_fast_and_low():
    """Catches: a reward that is slow or crashes on a runaway reply, or that rewards length."""
    start = time.monotonic()
    scores = score(tagged("olleh" + "z" * 50_000))
    assert time.monotonic() - start < 10
    assert scores["lcs_reward"] == pytest.approx(2 * 5 / (50_005 + 5))
    assert score(tagged("x" * 50_000))["lcs_reward"] == 0.0


def test_load_environment_by_id_after_install():
    """Catches: a packaging change that breaks `vf.load_environment("reverse-text")` (and vf-eval)."""
    env = vf.load_environment("reverse-text", num_eval_examples=5)
    assert isinstance(env, vf.SingleTurnEnv)
    assert env.get_eval_dataset()["question"] == ENV.get_eval_dataset()["question"][:5]
