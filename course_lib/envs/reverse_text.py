"""reverse-text: a single-turn verifiers environment.

The model gets a short English paragraph and must write it backwards, character by
character, inside <reversed_text> tags. One prompt, one answer, one score:

    reward = 1.0 * lcs_reward (how close the reversed text is, 0..1)
           + 0.2 * format_reward (verifiers' XML format check, 0..1)

The file is self-contained: copy it, change the data, the prompt or the reward.

    import verifiers as vf
    env = vf.load_environment("reverse-text")      # after `pip install -e .` of the course
    # or, without installing: from course_lib.envs.reverse_text import load_environment

Data: data/reverse_text.jsonl in the course repository, rows {"id", "text"}; the target
is text[::-1], computed here (nothing to download).
"""

import random
from difflib import SequenceMatcher
from pathlib import Path

import verifiers as vf
from datasets import Dataset

from course_lib.data_files import DataFileError, read_jsonl
from course_lib.tags import LinearXMLParser

# The repository root is the parent of course_lib/ (this file is course_lib/envs/reverse_text.py).
DATA_FILE = Path(__file__).resolve().parents[2] / "data" / "reverse_text.jsonl"

SYSTEM_PROMPT = """Reverse the user's text character by character: the last character comes first.
Write only the reversed text, inside <reversed_text> tags. Example:
user: Hello, world!
assistant: <reversed_text>
!dlrow ,olleH
</reversed_text>"""


# ---------------------------------------------------------------- data

FIX = ("This environment reads the course's data/ folder: run it from a clone of the course repository "
       "(pip install -e . there; `git checkout data/` restores the shipped file), or pass data_path= "
       'to a JSON Lines file with rows {"id": 0, "text": "Hello, world!"}.')


def load_rows(path: Path = DATA_FILE) -> list[dict]:
    return read_jsonl(path, {"id": int, "text": str}, FIX,
                      check=lambda row: None if row["text"].strip() else "field 'text' is empty: nothing to reverse")


def to_example(row: dict) -> dict:
    """A dataset row for verifiers: `question` becomes the user message, `answer` is the target."""
    return {"question": row["text"], "answer": row["text"][::-1], "info": {"id": row["id"]}}


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

    The rows are shuffled with `seed`; the first `num_eval_examples` are the evaluation set,
    the next `num_train_examples` (-1: all the rest) the training set, so the two never overlap.
    Extra keyword arguments go to vf.SingleTurnEnv (e.g. sampling_args, map_kwargs).
    """
    path = Path(data_path) if data_path else DATA_FILE
    examples = [to_example(row) for row in load_rows(path)]
    random.Random(seed).shuffle(examples)
    if not 0 < num_eval_examples < len(examples):
        raise DataFileError(str(path), f"{len(examples)} rows, so num_eval_examples must be between 1 and "
                            f"{len(examples) - 1} (the other rows are the training set), not {num_eval_examples}",
                            "Pass a num_eval_examples in that range, or add rows to the file.")
    eval_examples, train_examples = examples[:num_eval_examples], examples[num_eval_examples:]
    if num_train_examples >= 0:
        train_examples = train_examples[:num_train_examples]
    dataset, eval_dataset = Dataset.from_list(train_examples), Dataset.from_list(eval_examples)

    # The parser pulls the text between <reversed_text> and </reversed_text> out of the reply.
    # parse_answer() returns the FIRST such block of the last assistant message (None if none).
    # LinearXMLParser is vf.XMLParser with a parse() whose time cannot explode on odd replies.
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
