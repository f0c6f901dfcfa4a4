"""dev/ holds what the results tell a reader to rerun: every script there is named in RESULTS.md or the journal."""

from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_every_dev_script_is_cited_in_the_results():
    """Catches: a one-off script left in dev/ that no result points to (delete it, or cite the run it made)."""
    results = (ROOT / "RESULTS.md").read_text() + (ROOT / "results" / "JOURNAL.md").read_text()
    uncited = [path.name for path in sorted((ROOT / "dev").glob("*.py")) if f"dev/{path.name}" not in results]
    assert not uncited, f"dev/ scripts no result cites: {uncited}"
