"""Shared test setup: the smoke profile by default, and a per-notebook time summary."""

import os
import tempfile

import pytest

os.environ.setdefault("COURSE_PROFILE", "smoke")
# The tests' and smoke notebooks' training runs log to trackio as a learner's do, but into a folder
# of their own: `make test` must not fill the learner's dashboard with smoke runs.
os.environ["TRACKIO_DIR"] = tempfile.mkdtemp(prefix="course-tests-trackio-")


def pytest_collection_modifyitems(items):
    """The embedded model's conversion test first: on a fresh machine it fills the cache that every
    later test and notebook loads the model from (see test_models.fresh_checkpoint)."""
    items.sort(key=lambda item: item.path.name != "test_models.py")  # a stable sort keeps the rest in order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs in two processes (pytest-xdist `-n 2`): the notebooks in order in one, as a
    learner runs them (a notebook may read what an earlier one wrote), the tests spread over both.
    (xdist's own `--dist loadgroup` marks no group under pytest 9, which no longer lets it rename tests.)"""
    from xdist.scheduler import LoadScopeScheduling

    class NotebooksInOneProcess(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "notebooks" if ".ipynb::" in nodeid else nodeid

    return NotebooksInOneProcess(config, log)


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
