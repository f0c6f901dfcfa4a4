"""Links into the results (RESULTS.md, the report, and results/JOURNAL.md, the run journal) resolve: the file
exists and the anchor is one of its headings, as GitHub names them."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]*(?:RESULTS\.md|JOURNAL\.md|results/)[^)\s]*)\)")


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces as hyphens,
    a repeated heading numbered -1, -2, ..."""
    anchors, seen = set(), {}
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        heading = re.match(r"^#{1,6} (.*)", line)
        if in_code or not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def sources() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "RESULTS.md", ROOT / "TEACHING.md"]
    files += sorted((ROOT / "results").glob("*.md")) + sorted((ROOT / "data").rglob("README.md"))
    files += sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "executed").rglob("*.ipynb"))
    return [path for path in files if path.is_file()]


def links(path: Path) -> list[str]:
    text = path.read_text()
    if path.suffix == ".ipynb":  # the JSON escapes quotes, not brackets: the links read the same
        text = text.replace('\\"', '"')
    return LINK.findall(text)


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_to_the_results_resolve(path):
    """Catches: a link to a RESULTS.md section that moved to the journal, a heading renamed under a link,
    or a journal link that lost its `../` when the file moved into results/."""
    broken = []
    for link in links(path):
        target, _, anchor = link.partition("#")
        if target.startswith("http"):
            continue
        file = (path.parent / target).resolve() if target else path
        if not file.exists():
            broken.append(f"{link}: no file {file}")
        elif anchor and file.is_file() and anchor not in github_anchors(file.read_text()):
            broken.append(f"{link}: no heading with this anchor")
    assert broken == []


def test_the_anchor_rule_matches_githubs():
    """Catches: the anchor rule drifting from GitHub's (colons, dashes, backticks and repeated headings)."""
    text = "# A `cpu` run: 22:42 – 00:05 UTC\n## Summary\n## Summary\n"
    assert github_anchors(text) == {"a-cpu-run-2242--0005-utc", "summary", "summary-1"}
