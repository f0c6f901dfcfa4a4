"""Read a JSON Lines data file and fail at load time, naming the file, the line and the fix.

A bad data file should stop `load_environment()` with a message a learner can act on, not
surface later as a bare `KeyError` in a reward function, or as every episode scoring 0.
`read_jsonl` checks what every row needs (UTF-8, one JSON object per line, the fields and their
types); an environment adds its own checks (e.g. "this answer can never be matched") by calling
`check(row)` on each row, which returns what is wrong or None.
"""

import json
from pathlib import Path
from typing import Callable


class DataFileError(ValueError):
    """A data file cannot be used; the message names the file (and line) and says what to do."""

    def __init__(self, where: str, problem: str, fix: str):
        super().__init__(f"{where}: {problem}. {fix}")


def read_jsonl(
    path: Path,
    fields: dict[str, type | tuple[type, ...]],
    fix: str,
    check: Callable[[dict], str | None] = lambda row: None,
) -> list[dict]:
    """The rows of `path`, one JSON object per non-blank line, each with `fields` (name -> type).

    Raises DataFileError for a missing or empty file, bad bytes, a line that is not a JSON
    object (e.g. truncated), a missing field, a field of the wrong type, or a row `check` refuses.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileError(str(path), "file not found", fix)
    rows = []
    with open(path, "rb") as f:  # bytes, so that a bad byte is reported with its line
        for number, raw in enumerate(f, 1):
            where = f"{path}, line {number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DataFileError(
                    where,
                    f"byte {raw[error.start : error.start + 1]!r} at column {error.start + 1} "
                    "is not UTF-8 (save the file as UTF-8)",
                    fix,
                ) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataFileError(
                    where,
                    f"not valid JSON at column {error.colno} ({error.msg}); each line must "
                    "be one complete JSON object (a truncated or hand-edited line?)",
                    fix,
                ) from None
            if not isinstance(row, dict):
                raise DataFileError(where, f"a JSON {type(row).__name__}, not an object with {', '.join(fields)}", fix)
            for name, kind in fields.items():
                if name not in row:
                    raise DataFileError(where, f"field {name!r} is missing (every row needs {', '.join(fields)})", fix)
                if not isinstance(row[name], kind) or (isinstance(row[name], bool) and kind is int):
                    wanted = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
                    raise DataFileError(
                        where,
                        f"field {name!r} is {row[name]!r:.60}, a {type(row[name]).__name__}; it must be a {wanted}",
                        fix,
                    )
            problem = check(row)
            if problem:
                raise DataFileError(where, problem, fix)
            rows.append(row)
    if not rows:
        raise DataFileError(str(path), "the file has no rows", fix)
    return rows
