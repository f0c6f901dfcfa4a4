"""Data-file faults fail when the environment loads, naming the file, the line and what to do.

Catches: a bare JSONDecodeError / KeyError / UnicodeDecodeError without the file or line, a
wiki without pages.jsonl that loads and scores every episode 0, answers no reply can match,
and "num_eval_examples must be between 1 and -1" for a file with too few rows.
"""

import re
import shutil
from pathlib import Path

import pytest

import double_check
import reverse_text
import wiki_search as wiki
from course_lib import sft

DataFileError = ValueError  # each environment has its own subclass; sft raises ValueError itself


def edit_line(path: Path, number: int, edit) -> None:
    """Replace line `number` (1-based) of `path` by edit(line), all in bytes."""
    lines = path.read_bytes().splitlines(keepends=True)
    lines[number - 1] = edit(lines[number - 1])
    path.write_bytes(b"".join(lines))


FAULTS = {  # name -> (edit of line 3 given a field name, what the message must say after "line 3: ")
    "truncated JSON line": (lambda line, key: line[: len(line) // 2] + b"\n", "not valid JSON"),
    "bad bytes": (
        lambda line, key: line.replace(b'"', b'"\xff', 1),
        "not valid JSON in UTF-8 ('utf-8' codec can't decode byte 0xff",
    ),
    "not an object": (lambda line, key: b"[1, 2]\n", "a JSON list"),
    "missing field": (lambda line, key: line.replace(b'"%s"' % key, b'"X"', 1), "field '{key}' is missing"),
    "wrong type": (
        lambda line, key: line.replace(b'"%s": ' % key, b'"%s": {"x": 1}, "was": ' % key, 1),
        "field '{key}' is {{'x': 1}}, a dict; it must be a",
    ),
    "a number among other types": (  # datasets alone would turn the whole column into floats or JSON text
        lambda line, key: line.replace(b'"%s": ' % key, b'"%s": 7.5, "was": ' % key, 1),
        "field '{key}' is 7.5, a float; it must be a",
    ),
}


def load_double_check(path):
    return double_check.load_environment(data_path=str(path), num_eval_examples=2)


def load_reverse_text(path):
    return reverse_text.load_environment(data_path=str(path), num_eval_examples=2)


def load_wiki(path, monkeypatch):
    monkeypatch.setattr(wiki, "DATA_DIR", path.parent)
    wiki.load_pages.cache_clear()
    return wiki.load_environment()


@pytest.fixture
def wiki_copy(tmp_path, monkeypatch):
    """A copy of the wiki in tmp_path; the cached corpus is cleared before and after."""
    shutil.copytree(wiki.DATA_DIR, tmp_path / "wiki", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    yield tmp_path / "wiki"
    wiki.load_pages.cache_clear()


LOADERS = {  # name -> (shipped file, a field of each row, load(path, monkeypatch))
    "double_check": (double_check.DATA_FILE, "question", lambda path, mp: load_double_check(path)),
    "reverse_text": (reverse_text.DATA_FILE, "text", lambda path, mp: load_reverse_text(path)),
    "wiki pages": (wiki.DATA_DIR / "pages.jsonl", "sections", load_wiki),
    "wiki questions": (wiki.DATA_DIR / "questions.jsonl", "id", load_wiki),
    "sft games": (sft.DATA_DIR / sft.GAMES_FILE, "messages", lambda path, mp: sft.load_dataset(path.parent)),
}


def broken_copy(loader: str, tmp_path: Path, wiki_copy: Path) -> Path:
    """Where the loader's file is copied (the wiki's folder for a wiki file)."""
    original = LOADERS[loader][0]
    path = (wiki_copy if original.parent == wiki.DATA_DIR else tmp_path) / original.name
    if not path.exists():
        shutil.copy(original, path)
    return path


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("loader", LOADERS)
def test_a_broken_line_is_named_with_its_file_and_fix(loader, fault, tmp_path, monkeypatch, wiki_copy):
    _, key, load = LOADERS[loader]
    path = broken_copy(loader, tmp_path, wiki_copy)
    edit, expected = FAULTS[fault]
    edit_line(path, 3, lambda line: edit(line, key.encode()))
    with pytest.raises(DataFileError) as error:
        load(path, monkeypatch)
    message = str(error.value)
    assert f"{path}, line 3: {expected.format(key=key)}" in message, message
    assert "git checkout " in message  # what to do


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize(
    "content, expected", [(None, "file not found"), (b"", "the file has no rows"), (b"\n \n", "the file has no rows")]
)
def test_a_missing_or_empty_file_fails_at_load(loader, content, expected, tmp_path, monkeypatch, wiki_copy):
    path = broken_copy(loader, tmp_path, wiki_copy)
    path.unlink()
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DataFileError, match=expected) as error:
        LOADERS[loader][2](path, monkeypatch)
    assert str(error.value).startswith(f"{path}: ")


@pytest.mark.parametrize("load, env", [(load_double_check, double_check), (load_reverse_text, reverse_text)])
def test_a_file_too_short_for_the_split_says_how_many_rows_it_has(load, env, tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(env.DATA_FILE.read_bytes().splitlines(keepends=True)[0])
    with pytest.raises(DataFileError, match=r"1 rows, so num_eval_examples must be between 1 and 0 .*not 2"):
        load(path)


@pytest.mark.parametrize("answer", ["abc", "04", "+4", "4.0", " 4", "", "1,000"])
def test_double_check_refuses_answers_no_reply_can_match(answer, tmp_path):
    path = tmp_path / "double_check.jsonl"
    shutil.copy(double_check.DATA_FILE, path)
    edit_line(path, 2, lambda line: line.rsplit(b'"answer"', 1)[0] + b'"answer": "' + answer.encode() + b'"}\n')
    with pytest.raises(DataFileError, match=rf"line 2: answer '{re.escape(answer)}' can never match"):
        load_double_check(path)


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda line: line.replace(b'"answer": "drones"', b'"answer": "?!"'), "answer '?!' can never match"),
        (lambda line: line.replace(b'"answer": "drones"', b'"answer": "' + b"drone " * 41 + b'"'), "it has 41 words"),
        (lambda line: line.replace(b'"section_id": "colony"', b'"section_id": "hive"'), "no section honeybee/hive"),
    ],
)
def test_wiki_refuses_questions_that_cannot_be_answered(edit, expected, wiki_copy, monkeypatch):
    edit_line(wiki_copy / "questions.jsonl", 1, edit)
    with pytest.raises(DataFileError) as error:
        load_wiki(wiki_copy / "questions.jsonl", monkeypatch)
    assert "questions.jsonl, line 1: question 0: " in str(error.value) and expected in str(error.value)


def test_the_shipped_files_load():
    assert len(double_check.load_rows()) == 500 and len(reverse_text.load_rows()) == 1000
    assert len(wiki.load_questions()) == 79 and len(sft.load_dataset()) == 196
