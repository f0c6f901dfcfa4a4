"""double-check: a multi-turn verifiers environment.

The model answers a short math question; the environment then asks "Are you sure?" once,
and the model answers again. The rollout ends after that second answer, and only the FINAL
answer is scored:

    turn 1  system + user: question        -> model: first answer
    turn 2  user: "Are you sure?"          -> model: final answer  (then a @vf.stop ends it)

    reward  = 1.0 if the final answer equals the integer answer, else 0.0
    metrics = first_answer_correct, changed_answer, used_boxed (weight 0: logged, not rewarded)

Does being asked to double-check help, or does the model talk itself out of right answers?
The metrics answer that. The file is self-contained: copy it and change the data, the
follow-up question or the reward. The folder double_check/ is self-contained (this file and its
data; it imports only verifiers, datasets and the standard library).

    import verifiers as vf
    env = vf.load_environment("double-check")      # imports the package `double_check`

Data: double_check.jsonl next to this file, rows {"id", "question", "answer"} (the answer is an
integer written as a string).
"""

import json
import re
from importlib.resources import files
from pathlib import Path

import verifiers as vf
from datasets import Dataset

# Read as a package resource, so the file is found in a clone, a copy or an installed wheel.
DATA_FILE = files(__name__) / "double_check.jsonl"

SYSTEM_PROMPT = (
    "Solve the math problem. Think step by step in a few short sentences, then give the final "
    "answer as a whole number in \\boxed{}, for example: The answer is \\boxed{42}."
)
ARE_YOU_SURE = "Are you sure?"


# ---------------------------------------------------------------- reading the data file
# `datasets` reads the file; a short field check stops load_environment() with a message naming the
# file, the line and the fix, not a bare KeyError in a reward function later. (The same reader is in
# each course environment, so that each one can be copied alone.)


class DataFileError(ValueError):
    """A data file cannot be used; the message names the file (and line) and says what to do."""

    def __init__(self, where: str, problem: str, fix: str):
        super().__init__(f"{where}: {problem}. {fix}")


def read_jsonl(path: Path, fields: dict, fix: str, check=lambda row: None) -> list[dict]:
    """The rows of the JSON Lines file `path`, read by `datasets`, each an object with `fields`
    (name -> type) that `check(row)` accepts (it returns what is wrong, or None). Raises DataFileError."""

    def problem(row) -> str | None:
        if not isinstance(row, dict):
            return f"a JSON {type(row).__name__}, not an object with {', '.join(fields)}"
        for name, kind in fields.items():
            if (value := row.get(name)) is None:
                return f"field {name!r} is missing (every row needs {', '.join(fields)})"
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
                return f"field {name!r} is {value!r:.60}, a {type(value).__name__}; it must be a {kind.__name__}"
        return check(row)

    path = Path(path)
    if not path.is_file():
        raise DataFileError(str(path), "file not found", fix)
    try:  # on_mixed_types=None: a field of two types fails here instead of being re-encoded as JSON
        rows = Dataset.from_json(str(path), on_mixed_types=None).to_list()
        if rows and not any(map(problem, rows)):
            return rows
        error = "the file has no rows"
    except Exception as failure:
        error = f"datasets cannot read it ({failure.__cause__ or failure})"
    for number, line in enumerate(path.read_bytes().splitlines(), 1):  # datasets names no line: find it
        try:
            reason = problem(json.loads(line)) if line.strip() else None
        except ValueError as failure:  # bad bytes or a truncated line
            reason = f"not valid JSON in UTF-8 ({failure}); each line must be one complete JSON object"
        if reason:
            raise DataFileError(f"{path}, line {number}", reason, fix)
    raise DataFileError(str(path), error if path.read_bytes().strip() else "the file has no rows", fix)


FIX = (
    "The shipped file is double_check/double_check.jsonl (`git checkout course_lib/envs/` restores it in "
    'the course repository); or pass data_path= to a JSON Lines file with rows {"id": 0, "question": '
    '"What is 2 + 3?", "answer": "5"}.'
)


def unmatchable(row: dict) -> str | None:
    """Why no reply can ever match this row's answer, or None: replies are read as canonical
    numbers ("05" -> "5"), so the answer must be an integer written that way."""
    if not re.fullmatch(r"-?[0-9]+", row["answer"]) or canonical_number(row["answer"]) != row["answer"]:
        return (
            f"answer {row['answer']!r:.40} can never match: answers must be whole numbers written "
            f'plainly, e.g. "42" or "-7" (no spaces, leading zeros, + sign or decimals)'
        )
    return None


def load_rows(path: Path = DATA_FILE) -> list[dict]:
    return read_jsonl(path, {"id": int, "question": str, "answer": str}, FIX, check=unmatchable)


def to_example(row: dict) -> dict:
    return {"question": row["question"], "answer": str(row["answer"]), "info": {"id": row["id"]}}


# ---------------------------------------------------------------- parsing the answer
# Small models rarely follow the format, so we look in three places, in this order:
#   1. the last \boxed{...}          (what the prompt asks for; what math-tuned models write)
#   2. the last <answer>...</answer>  (the other common convention)
#   3. the last number in the reply   ("... so the answer is 26.")
# and read the last number inside the chosen span. "1,200" -> "1200", "-7" -> "-7",
# "26.0" -> "26"; a minus sign glued to a previous number is subtraction ("70-22" -> 70, 22).

BOXED = re.compile(r"\\boxed\s*\{([^{}]*)\}")
NUMBER = re.compile(r"(?<![\w.,])[-\u2212]?\d[\d,]*(?:\.\d+)?")


def canonical_number(token: str) -> str:
    """Write a number one way: 1,200 -> 1200, −7 -> -7, 026.50 -> 26.5, -0 -> 0.
    Only string operations (no int() or float()), so a 10,000-digit number cannot raise or round.
    """
    token = token.replace("\u2212", "-").replace(",", "")
    sign, digits = ("-", token[1:]) if token.startswith("-") else ("", token)
    whole, _, fraction = digits.partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    if whole == "0" and not fraction:
        sign = ""
    return sign + whole + ("." + fraction if fraction else "")


def last_number(text: str) -> str | None:
    """The last number in `text`, written canonically, or None."""
    numbers = NUMBER.findall(text)
    return canonical_number(numbers[-1]) if numbers else None


def tag_contents(text: str, tag: str) -> list[str]:
    """The contents of every <tag>...</tag> in `text`, in order: what re.findall(r"<tag>(.*?)</tag>",
    text, re.DOTALL) returns, in linear time. That regex (and verifiers' XMLParser's) backtracks on
    replies that repeat an unclosed tag, and a model can write such replies: scoring must not stall."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    contents, position = [], 0
    while (start := text.find(opening, position)) != -1:
        end = text.find(closing, start + len(opening))
        if end == -1:
            break
        contents.append(text[start + len(opening) : end])
        position = end + len(closing)
    return contents


def extract_answer(text: str) -> str | None:
    """The model's answer in one reply (see the rules above), or None if it gave no number."""
    # <answer> spans by tag_contents: re.findall(r"<answer>(.*?)</answer>") takes quadratic time on a
    # reply that repeats an unclosed <answer> (100,000 characters: 7.8 s).
    for spans in (BOXED.findall(text), tag_contents(text, "answer")):
        if spans:
            number = last_number(spans[-1])
            if number is not None:
                return number
    return last_number(text)


# ---------------------------------------------------------------- rewards
# The parser applies extract_answer to the LAST assistant message of a conversation.
PARSER = vf.Parser(extract_fn=extract_answer)


def replies(completion: vf.Messages) -> list[str]:
    """The text of each model reply in a conversation."""
    return [
        str((m["content"] if isinstance(m, dict) else m.content) or "")
        for m in PARSER.get_assistant_messages(completion)
    ]


def final_answer(completion: vf.Messages, state: vf.State) -> str | None:
    """The answer after "Are you sure?"; a second reply without any number keeps the first."""
    last = PARSER.parse_answer(completion)
    return last if last is not None else state.get("first_answer")


# Reward functions name the arguments they need (completion, answer, state, prompt, info, ...);
# the rubric passes exactly those.


def correct_answer(completion, answer, state) -> float:
    return float(final_answer(completion, state) == answer)


def first_answer_correct(answer, state) -> float:
    return float(state.get("first_answer") == answer)


def changed_answer(completion, state) -> float:
    return float(final_answer(completion, state) != state.get("first_answer"))


def used_boxed(completion) -> float:
    """Share of the model's replies with a \\boxed{} answer (format compliance)."""
    texts = replies(completion)
    return sum(bool(BOXED.search(text)) for text in texts) / len(texts) if texts else 0.0


# ---------------------------------------------------------------- environment


class DoubleCheckEnv(vf.MultiTurnEnv):
    """Ask the question, reply "Are you sure?" once, stop after the second answer.

    `state` is one rollout's dictionary. verifiers fills it before the first turn (the dataset
    row: prompt, answer, info; the client and model; an empty `trajectory`, where each model
    turn is appended) and passes it to every hook below and to the rubric. Anything we store in
    it travels with the rollout; `evaluate(..., state_columns=["first_answer"])` copies a key
    into the results.
    """

    async def setup_state(self, state: vf.State) -> vf.State:
        # Runs once per rollout, before the model is called: our own bookkeeping goes here.
        state["first_answer"] = None  # filled in by env_response after the first reply
        return state

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs) -> vf.Messages:
        # Runs after each model turn that does not end the rollout: here, only after the first.
        # `messages` is the conversation so far; its last message is the model's first reply.
        if len(state["trajectory"]) > 1:  # a caller driving turns by hand after the end: nothing changes
            return [vf.UserMessage(content="The conversation is over.")]
        state["first_answer"] = self.parser.parse_answer(messages)
        return [vf.UserMessage(content=ARE_YOU_SURE)]

    @vf.stop
    async def answered_twice(self, state: vf.State) -> bool:
        # Checked before every model turn; True ends the rollout (and names its stop_condition).
        return len(state["trajectory"]) >= 2


def load_environment(
    num_train_examples: int = -1,
    num_eval_examples: int = 100,
    seed: int = 0,
    data_path: str | None = None,
    system_prompt: str = SYSTEM_PROMPT,
    **kwargs,
) -> vf.MultiTurnEnv:
    """The double-check environment.

    The rows are shuffled with `seed` and split: `num_eval_examples` for evaluation, the rest for
    training (the first `num_train_examples` of them; -1: all), so the two never overlap.
    Extra keyword arguments go to DoubleCheckEnv (vf.MultiTurnEnv), e.g. timeout_seconds.
    """
    path = Path(data_path) if data_path else DATA_FILE
    examples = Dataset.from_list([to_example(row) for row in load_rows(path)])
    if not 0 < num_eval_examples < len(examples):
        raise DataFileError(
            str(path),
            f"{len(examples)} rows, so num_eval_examples must be between 1 and "
            f"{len(examples) - 1} (the other rows are the training set), not {num_eval_examples}",
            "Pass a num_eval_examples in that range, or add rows to the file.",
        )
    split = examples.train_test_split(test_size=num_eval_examples, seed=seed)
    dataset, eval_dataset = split["train"], split["test"]
    if num_train_examples >= 0:
        dataset = dataset.select(range(min(num_train_examples, len(dataset))))

    rubric = vf.Rubric(
        funcs=[correct_answer, first_answer_correct, changed_answer, used_boxed],
        weights=[1.0, 0.0, 0.0, 0.0],  # only the final answer is rewarded; the rest are metrics
        parser=PARSER,
    )

    return DoubleCheckEnv(
        dataset=dataset,
        eval_dataset=eval_dataset,
        system_prompt=system_prompt,
        parser=PARSER,
        rubric=rubric,
        **kwargs,
    )
