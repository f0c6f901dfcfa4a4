"""reverse-text: a single-turn verifiers environment.

The model gets a short English paragraph and must write it backwards, character by
character, inside <reversed_text> tags. One prompt, one answer, one score:

    reward = 1.0 * lcs_reward (how close the reversed text is, 0..1)
           + 0.2 * format_reward (verifiers' XML format check, 0..1)

The folder reverse_text/ is self-contained (this file and its data; it imports only verifiers,
datasets and the standard library): copy it anywhere on sys.path, change the data, the prompt
or the reward.

    import verifiers as vf
    env = vf.load_environment("reverse-text")      # imports the package `reverse_text`

Data: reverse_text.jsonl next to this file, rows {"id", "text"}; the target is text[::-1],
computed here (nothing to download).
"""

import json
from difflib import SequenceMatcher
from importlib.resources import files
from pathlib import Path
from types import SimpleNamespace

import verifiers as vf
from datasets import Dataset

# Read as a package resource, so the file is found in a clone, a copy or an installed wheel.
DATA_FILE = files(__name__) / "reverse_text.jsonl"

SYSTEM_PROMPT = """Reverse the user's text character by character: the last character comes first.
Write only the reversed text, inside <reversed_text> tags. Example:
user: Hello, world!
assistant: <reversed_text>
!dlrow ,olleH
</reversed_text>"""


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
    "The shipped file is reverse_text/reverse_text.jsonl (`git checkout course_lib/envs/` restores it in the "
    'course repository); or pass data_path= to a JSON Lines file with rows {"id": 0, "text": "Hello, world!"}.'
)


def load_rows(path: Path = DATA_FILE) -> list[dict]:
    return read_jsonl(
        path,
        {"id": int, "text": str},
        FIX,
        check=lambda row: None if row["text"].strip() else "field 'text' is empty: nothing to reverse",
    )


def to_example(row: dict) -> dict:
    """A dataset row for verifiers: `question` becomes the user message, `answer` is the target."""
    return {"question": row["text"], "answer": row["text"][::-1], "info": {"id": row["id"]}}


# ---------------------------------------------------------------- parser


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


class LinearXMLParser(vf.XMLParser):
    """verifiers' XMLParser with the same answers from `parse`, in linear time (see tag_contents).

    Each field gets the first (or with last=True the last) <tag>...</tag> content, stripped, or None."""

    def __init__(self, fields: list[str | tuple[str, ...]], **kwargs):
        super().__init__(fields, **kwargs)
        # Every tag of every field (a tuple's alternatives too), in order: what parse reads.
        self.tags = [tag for field in fields for tag in ([field] if isinstance(field, str) else field)]

    def parse(self, text: str, strip: bool = True, last: bool = False) -> SimpleNamespace:
        results = {}
        for tag in self.tags:
            contents = tag_contents(text, tag)
            results[tag] = (contents[-1] if last else contents[0]).strip() if contents else None
        return SimpleNamespace(**results)


# ---------------------------------------------------------------- reward


def lcs_ratio(prediction: str, target: str) -> float:
    """Similarity in [0, 1]: 2*M / (len(prediction) + len(target)), where M is the number of
    characters difflib matches in order (a longest-common-subsequence style count).

    We use difflib.SequenceMatcher(...).ratio(), as verifiers' reference environment does,
    but with autojunk=False: by default, for texts of 200+ characters difflib ignores every
    character that makes up more than 1% of the text (spaces, 'e', ...), and a 300-character
    reversal missing every seventh character then scores about 0.4 instead of about 0.92.

    Only the first 10 * len(target) + 100 characters of the prediction are matched, though all
    of them count in its length: difflib's time grows with the product of the two lengths (a
    1 MB reply took minutes). Shorter replies score exactly as before, longer ones could score
    at most 2/11 anyway, and exactly as before if their matches come first.
    """
    matched = prediction[: 10 * len(target) + 100]
    blocks = SequenceMatcher(None, matched, target, autojunk=False).get_matching_blocks()
    total = len(prediction) + len(target)
    return 2 * sum(block.size for block in blocks) / total if total else 1.0


# ---------------------------------------------------------------- environment


def load_environment(
    num_train_examples: int = -1,
    num_eval_examples: int = 100,
    seed: int = 0,
    data_path: str | None = None,
    system_prompt: str = SYSTEM_PROMPT,
    **kwargs,
) -> vf.SingleTurnEnv:
    """The reverse-text environment.

    The rows are shuffled with `seed` and split: `num_eval_examples` for evaluation, the rest for
    training (the first `num_train_examples` of them; -1: all), so the two never overlap.
    Extra keyword arguments go to vf.SingleTurnEnv (e.g. sampling_args, map_kwargs).
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

    # The parser pulls the text between <reversed_text> and </reversed_text> out of the reply.
    # parse_answer() returns the FIRST such block of the last assistant message (None if none).
    # LinearXMLParser (above) is vf.XMLParser with a parse() whose time cannot explode on odd replies.
    parser = LinearXMLParser(["reversed_text"], answer_field="reversed_text")

    def lcs_reward(completion, answer, **kwargs) -> float:
        """1.0 for an exact reversal, 0.0 when the reply has no <reversed_text> block."""
        parsed = parser.parse_answer(completion)
        if parsed is None:
            return 0.0
        return lcs_ratio(parsed, answer)

    # verifiers' format check for the XML fields: 0.4 if the tag is present, +0.2 "spacing",
    # +0.2 if the reply starts with <reversed_text>, +0.2 if it ends with </reversed_text>.
    format_reward = parser.get_format_reward_func()

    rubric = vf.Rubric(funcs=[lcs_reward, format_reward], weights=[1.0, 0.2], parser=parser)

    return vf.SingleTurnEnv(
        dataset=dataset,
        eval_dataset=eval_dataset,
        system_prompt=system_prompt,
        parser=parser,
        rubric=rubric,
        **kwargs,
    )
