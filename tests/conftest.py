"""Shared test setup: the smoke profile by default, and a per-notebook time summary."""

import os
import tempfile

os.environ.setdefault("COURSE_PROFILE", "smoke")
# The tests' and smoke notebooks' training runs log to trackio as a learner's do, but into a folder
# of their own: `make test` must not fill the learner's dashboard with smoke runs.
os.environ["TRACKIO_DIR"] = tempfile.mkdtemp(prefix="course-tests-trackio-")


def pytest_collection_modifyitems(items):
    """The embedded model's conversion test first: on a fresh machine it fills the cache that every
    later test and notebook loads the model from (see test_models.fresh_checkpoint)."""
    items.sort(key=lambda item: item.path.name != "test_models.py")  # a stable sort keeps the rest in order


def pytest_terminal_summary(terminalreporter):
    """Print how long each notebook took under nbmake (CI reads this to keep the run short)."""
    rows = [
        (report.nodeid, report.duration)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call" and report.nodeid.endswith(".ipynb")
    ]
    if rows:
        terminalreporter.section("notebook times")
        for nodeid, seconds in sorted(rows):
            terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")
        terminalreporter.write_line(f"{sum(s for _, s in rows):7.1f} s  total")
