"""Validate the tiny wiki used by the tool-calling (wiki search) environment.

Checks pages.jsonl and questions.jsonl in course_lib/envs/wiki_search/: field names and types, unique
ids, slug-shaped ids, 3-5 sections per page starting with "overview", 2-5 sentences per
section, and that every question points at an existing page and section whose text
contains the answer (case-insensitive). Standard library only. Run with:

    python data/wiki/check_wiki.py
"""

import json
import re
import sys
from pathlib import Path

# The wiki ships with its environment.
HERE = Path(__file__).resolve().parents[2] / "course_lib" / "envs" / "wiki_search"
SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# a sentence ends with . ! or ? (optionally followed by a closing quote) before a space or the end;
# "Mr." and decimal points such as "5.5" are not sentence ends
SENTENCE_END = re.compile(r'(?<!\bMr)(?<!\bMrs)(?<!\bDr)[.!?]"?(?=\s|$)')


def load(name):
    with open(HERE / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def count_sentences(text):
    return len(SENTENCE_END.findall(text))


def main():
    pages = load("pages.jsonl")
    questions = load("questions.jsonl")

    assert 24 <= len(pages) <= 30, f"{len(pages)} pages, expected 24-30"
    assert 60 <= len(questions) <= 80, f"{len(questions)} questions, expected 60-80"

    sections = {}
    page_ids = [p["page_id"] for p in pages]
    assert len(page_ids) == len(set(page_ids)), "duplicate page_id"
    for p in pages:
        assert set(p) == {"page_id", "title", "sections"}, p.keys()
        assert SLUG.match(p["page_id"]), p["page_id"]
        assert isinstance(p["title"], str) and p["title"], p["page_id"]
        secs = p["sections"]
        assert 3 <= len(secs) <= 5, f"{p['page_id']}: {len(secs)} sections"
        assert secs[0]["section_id"] == "overview", f"{p['page_id']}: first section not overview"
        sec_ids = [s["section_id"] for s in secs]
        assert len(sec_ids) == len(set(sec_ids)), f"{p['page_id']}: duplicate section_id"
        for s in secs:
            assert set(s) == {"section_id", "title", "text"}, s.keys()
            assert SLUG.match(s["section_id"]), s["section_id"]
            n = count_sentences(s["text"])
            assert 2 <= n <= 5, f"{p['page_id']}/{s['section_id']}: {n} sentences"
            sections[(p["page_id"], s["section_id"])] = s["text"]

    q_ids = [q["id"] for q in questions]
    assert len(q_ids) == len(set(q_ids)), "duplicate question id"
    assert len({q["question"] for q in questions}) == len(questions), "duplicate question text"
    for q in questions:
        assert set(q) == {"id", "question", "answer", "page_id", "section_id"}, q.keys()
        assert isinstance(q["id"], int), q
        assert q["page_id"] in page_ids, f"question {q['id']}: unknown page {q['page_id']}"
        key = (q["page_id"], q["section_id"])
        assert key in sections, f"question {q['id']}: unknown section {key}"
        assert q["answer"].strip() and len(q["answer"].split()) <= 4, f"question {q['id']}: answer"
        assert q["answer"].lower() in sections[key].lower(), f"question {q['id']}: answer {q['answer']!r} not in {key}"

    covered = {q["page_id"] for q in questions}
    uncovered = [p for p in page_ids if p not in covered]
    assert not uncovered, f"pages without questions: {uncovered}"
    n_sections = len(sections)
    print(
        f"ok: {len(pages)} pages, {n_sections} sections, {len(questions)} questions, "
        f"every page has at least one question"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
