"""Wiki search: a tool-calling environment over the course's tiny wiki.

The model answers a factual question ("What are male honeybees called?") by calling three
tools on a small offline wiki (pages.jsonl next to this file, 27 pages written for the course):

    search_pages(query)                 -> the 5 best-matching pages, with their page ids
    view_sections(page_id)              -> the sections of one page
    read_section(page_id, section_id)   -> the text of one section

and then replying with a short answer. Reading top to bottom:

1. the corpus and a small BM25 index (standard library only);
2. the three tools: plain functions with type hints and docstrings, from which verifiers
   builds the JSON schemas the model sees. A bad argument never raises: the tool returns an
   error string that tells the model what to do next (a rollout should not crash because a
   model typed a wrong page id; reading the error and recovering is part of the skill);
3. the reward: is the gold answer in the model's final, short message?
4. `load_environment()`: dataset + rubric + `vf.ToolEnv`; verifiers adds the tool metrics.

The folder wiki_search/ is self-contained (it imports only verifiers, datasets and the standard
library) and holds two variants of the same environment, on the same tools, data and reward:
`wiki_search.session` (hidden per-rollout tool arguments, vf.StatefulToolEnv) and
`wiki_search.mcp` (the tools behind a local MCP server, vf.MCPEnv). The MCP server imports the
tools from this file, and starts faster because verifiers' classes load lazily.
"""

import difflib
import json
import math
import os
import re
import unicodedata
from collections import Counter
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

import verifiers as vf  # cheap: the classes load lazily on first use (the MCP server never uses them)

# The wiki is read as package resources, so it is found in a clone, a copy or an installed wheel.
DATA_DIR = Path(os.environ.get("WIKI_DATA_DIR", str(files(__name__))))
TOP_K = 5
MAX_ANSWER_WORDS = 40  # a longer final message scores 0 (section 3 says why)

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

    from datasets import Dataset  # here, not at the top: see make_dataset

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


# ---------------------------------------------------------------------------------------------
# 1. The corpus and a BM25 index
# ---------------------------------------------------------------------------------------------

STOPWORDS = set(
    "a an and are as at be by called can did do does for from has have how in is it its of on or "
    "the their them there these this to was what when where which who whom whose why with".split()
)


def fold(text: str) -> str:
    """Lowercase and strip accents: 'Río' -> 'rio'."""
    decomposed = unicodedata.normalize("NFKD", str(text))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def tokenize(text: str) -> list[str]:
    """Words for search: folded, no stopwords, a plural 's' dropped ('honeybees' -> 'honeybee')."""
    words = re.findall(r"[a-z0-9]+", fold(text))
    return [
        w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
        for w in words
        if w not in STOPWORDS and len(w) > 1
    ]


def slug(text: str) -> str:
    """'Mount Everest' -> 'mount-everest' (page ids are slugs, so a title also works as an id)."""
    return "-".join(re.findall(r"[a-z0-9]+", fold(text)))


FIX = (
    "The wiki is pages.jsonl and questions.jsonl in the wiki_search/ folder (in the course repository, "
    "`git checkout course_lib/envs/wiki_search` restores them and `python data/wiki/check_wiki.py` checks "
    "an edited copy), or in the folder named by WIKI_DATA_DIR."
)


def bad_sections(page: dict) -> str | None:
    """What is wrong with a page's sections, or None."""
    for section in page["sections"]:
        fields = ("section_id", "title", "text")
        if not (isinstance(section, dict) and all(isinstance(section.get(k), str) for k in fields)):
            return f"page {page['page_id']!r}: each section must be an object with string section_id, title and text"
    return None if page["sections"] else f"page {page['page_id']!r} has no sections"


@lru_cache(maxsize=None)
def load_pages() -> dict[str, dict]:
    """page_id -> {"page_id", "title", "sections": [{"section_id", "title", "text"}, ...]}"""
    pages = read_jsonl(DATA_DIR / "pages.jsonl", {"page_id": str, "title": str, "sections": list}, FIX, bad_sections)
    return {page["page_id"]: page for page in pages}


def load_questions(max_answer_words: int = MAX_ANSWER_WORDS) -> list[dict]:
    """[{"id", "question", "answer", "page_id", "section_id"}, ...], each pointing at an existing
    section, with an answer that a final message of at most `max_answer_words` words can match."""
    pages = load_pages()

    def unmatchable(question: dict) -> str | None:
        page = pages.get(question["page_id"])
        if page is None or question["section_id"] not in {s["section_id"] for s in page["sections"]}:
            where = f"{question['page_id']}/{question['section_id']}"
            return f"question {question['id']}: there is no section {where} in pages.jsonl"
        words = len(normalize(question["answer"]).split())
        if not 0 < words <= max_answer_words:
            return (
                f"question {question['id']}: answer {question['answer']!r:.40} can never match (it has {words} "
                f"words once normalized; a final message is judged on 1 to {max_answer_words} words)"
            )
        return None

    fields = {"id": int, "question": str, "answer": str, "page_id": str, "section_id": str}
    return read_jsonl(DATA_DIR / "questions.jsonl", fields, FIX, unmatchable)


@lru_cache(maxsize=None)
def search_index() -> tuple[dict[str, Counter], dict[str, float], float]:
    """BM25 statistics: term counts per page, inverse document frequencies, mean page length.
    A page's text is its title (three times: titles matter most), section titles and texts."""
    docs = {}
    for page_id, page in load_pages().items():
        text = " ".join([page["title"]] * 3 + [f"{s['title']} {s['text']}" for s in page["sections"]])
        docs[page_id] = Counter(tokenize(text))
    n = len(docs)
    df = Counter(term for counts in docs.values() for term in counts)
    idf = {term: math.log(1 + (n - k + 0.5) / (k + 0.5)) for term, k in df.items()}
    mean_length = sum(sum(c.values()) for c in docs.values()) / n
    return docs, idf, mean_length


def bm25_scores(query: str, k1: float = 1.2, b: float = 0.75) -> list[tuple[str, float]]:
    """(page_id, score) for every page sharing a word with the query, best first."""
    docs, idf, mean_length = search_index()
    terms = Counter(tokenize(query))  # each distinct word once, times its count: a 1 MB query stays fast
    scores = []
    for page_id, counts in docs.items():
        length = sum(counts.values())
        score = sum(
            repeats * idf[t] * counts[t] * (k1 + 1) / (counts[t] + k1 * (1 - b + b * length / mean_length))
            for t, repeats in terms.items()
            if t in counts
        )
        if score > 0:
            scores.append((page_id, score))
    return sorted(scores, key=lambda item: (-item[1], item[0]))


def find_page(page_id: str) -> dict | None:
    """The page with this id; a title or different capitalization is accepted too."""
    return load_pages().get(slug(page_id))


def shown(text: str, limit: int = 80) -> str:
    """`text` quoted for an error message, cut to `limit` characters: a 1 MB argument is not echoed back."""
    text = str(text)
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f" (and {len(text) - limit} more characters)"


def unknown_page_error(page_id: str) -> str:
    wanted, page_ids = slug(page_id), list(load_pages())
    # A page id more than 2.4 times longer than any cannot reach the 0.6 similarity cutoff: skip difflib.
    close = (
        difflib.get_close_matches(wanted, page_ids, n=3, cutoff=0.6)
        if len(wanted) <= 2.4 * max(map(len, page_ids))
        else []
    )
    hint = f" Did you mean {', '.join(repr(p) for p in close)}?" if close else ""
    return f"Error: there is no page with page_id {shown(page_id)}.{hint} Call search_pages(query) to find page ids."


# ---------------------------------------------------------------------------------------------
# 2. The tools: what the model calls. Type hints + docstrings become the JSON schema.
# ---------------------------------------------------------------------------------------------


def search_pages(query: str) -> str:
    """Search the wiki for pages about a topic.

    Returns up to five matching pages, best first, each with the page_id to pass to
    view_sections or read_section.

    Args:
        query: A few keywords naming the topic, e.g. "honeybee colony" or "Mars moons".
    """
    query = str(query).strip()
    if not tokenize(query):
        return (
            'Error: the query is empty (or only has words like "the" and "what"). '
            'Call search_pages again with a few keywords, e.g. search_pages(query="honeybee").'
        )
    hits = bm25_scores(query)[:TOP_K]
    if not hits:
        return (
            f"No page matches {shown(query)}. Try other keywords: the main subject of the question, "
            "e.g. an animal, a planet, an invention or a place."
        )
    pages = load_pages()
    lines = [f"{rank}. {pages[page_id]['title']} (page_id: {page_id})" for rank, (page_id, _) in enumerate(hits, 1)]
    return "\n".join(lines) + "\nNext: call view_sections(page_id) on the most relevant page."


def view_sections(page_id: str) -> str:
    """List the sections of a wiki page.

    Args:
        page_id: The page_id of a page, as returned by search_pages, e.g. "honeybee".
    """
    page = find_page(page_id)
    if page is None:
        return unknown_page_error(page_id)
    lines = [f"{page['title']} (page_id: {page['page_id']}) has {len(page['sections'])} sections:"]
    lines += [f"- {s['section_id']}: {s['title']}" for s in page["sections"]]
    lines.append("Next: call read_section(page_id, section_id) to read one.")
    return "\n".join(lines)


def read_section(page_id: str, section_id: str) -> str:
    """Read the text of one section of a wiki page.

    Args:
        page_id: The page_id of the page, e.g. "honeybee".
        section_id: The section_id, as listed by view_sections, e.g. "colony".
    """
    page = find_page(page_id)
    if page is None:
        return unknown_page_error(page_id)
    sections = {s["section_id"]: s for s in page["sections"]}
    section = sections.get(slug(section_id))
    if section is None:
        return (
            f"Error: page {page['page_id']!r} has no section {shown(section_id)}. "
            f"Its sections are: {', '.join(sections)}. Call read_section with one of them."
        )
    return f"{page['title']} > {section['title']}\n{section['text']}"


TOOLS = [search_pages, view_sections, read_section]


def format_tool_error(error: Exception) -> str:
    """What the model reads when verifiers could not call a tool (unknown tool name, a missing
    or extra argument). Our tools never raise; verifiers catches anything that does and sends
    this text back as the tool's result, so the rollout goes on."""
    if isinstance(error, KeyError):
        return f"Error: there is no tool named {error}. The tools are: {', '.join(t.__name__ for t in TOOLS)}."
    return f"Error: {error}. Check the tool's arguments against its schema and call it again."


# ---------------------------------------------------------------------------------------------
# 3. The reward
# ---------------------------------------------------------------------------------------------
# Choice: the gold answer must appear in the model's *final* message (the last assistant message,
# one that calls no tool), compared after normalization (case, accents, punctuation, "384,400"
# = "384400"), as whole words ("22" does not match "1922"). We do not ask for <answer> tags:
# tool-calling models answer in plain sentences, and a format rule would make the reward measure
# two skills at once. Substring rewards can be gamed by pasting a whole section, so the final
# message must be short (at most MAX_ANSWER_WORDS words).


def normalize(text: str) -> str:
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", fold(text))  # 384,400 -> 384400
    return " ".join(re.findall(r"[a-z0-9]+", text))


def final_answer(completion) -> str:
    """The text of the last message if it is an assistant message that calls no tool, else ''."""
    if not isinstance(completion, list) or not completion:
        return completion if isinstance(completion, str) else ""
    last = completion[-1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return ""
    return vf.Parser().parse_answer(completion) or ""  # the last assistant message's text


def correct_answer(completion, answer: str, max_words: int = MAX_ANSWER_WORDS, **kwargs) -> float:
    """1.0 if the gold answer appears (normalized, whole words) in a short final message, else 0.0."""
    final, gold = normalize(final_answer(completion)), normalize(answer)
    if not final or not gold or len(final.split()) > max_words:
        return 0.0
    return 1.0 if f" {gold} " in f" {final} " else 0.0


# ---------------------------------------------------------------------------------------------
# 4. The environment
# ---------------------------------------------------------------------------------------------

SYSTEM_PROMPT = """You answer questions with the help of a small wiki, using these tools:
- search_pages(query): find pages about a topic; returns page ids.
- view_sections(page_id): list the sections of a page.
- read_section(page_id, section_id): read one section.
Search for the subject of the question, read the section that contains the fact, then reply
with a short final answer (one sentence) and no tool call."""


def make_dataset(questions: list[dict]):
    from datasets import Dataset  # here, not at the top: the MCP server imports this file and must start fast

    return Dataset.from_list(
        [
            {
                "question": q["question"],
                "answer": q["answer"],
                "info": {"id": q["id"], "page_id": q["page_id"], "section_id": q["section_id"]},
            }
            for q in questions
        ]
    )


def make_rubric(max_answer_words: int = MAX_ANSWER_WORDS) -> "vf.Rubric":
    async def correct_answer_reward(completion, answer, **kwargs) -> float:
        return correct_answer(completion, answer, max_words=max_answer_words)

    correct_answer_reward.__name__ = "correct_answer"  # the metric's name in results
    return vf.Rubric(funcs=[correct_answer_reward], weights=[1.0])


def environment_kwargs(
    num_eval_examples: int = -1, seed: int = 0, max_answer_words: int = MAX_ANSWER_WORDS, questions: list | None = None
) -> dict:
    """What every wiki environment shares: data, system prompt, rubric. `questions`: a subset of
    load_questions() to use (notebook 04 trains on some pages and evaluates on the others)."""
    checked = load_questions(max_answer_words)  # loads and checks pages.jsonl too: a bad wiki fails here
    questions = checked if questions is None else questions
    eval_dataset = make_dataset(questions).shuffle(seed=seed)  # the file is ordered by page: mix topics
    if num_eval_examples > 0:
        eval_dataset = eval_dataset.select(range(min(num_eval_examples, len(eval_dataset))))
    return dict(
        dataset=make_dataset(questions),
        eval_dataset=eval_dataset,
        system_prompt=SYSTEM_PROMPT,
        rubric=make_rubric(max_answer_words),
        error_formatter=format_tool_error,
    )


def load_environment(
    max_turns: int = 8,
    num_eval_examples: int = -1,
    seed: int = 0,
    max_answer_words: int = MAX_ANSWER_WORDS,
    questions: list | None = None,
    **kwargs,
) -> "vf.ToolEnv":
    """The wiki-search ToolEnv. A rollout ends when the model replies without a tool call, or
    after `max_turns` model turns. Metrics: correct_answer (the reward), and, added by
    verifiers, num_turns, total_tool_calls and one `<tool>_calls` count per tool."""
    return vf.ToolEnv(
        tools=list(TOOLS),
        max_turns=max_turns,
        **environment_kwargs(num_eval_examples, seed, max_answer_words, questions),
        **kwargs,
    )
