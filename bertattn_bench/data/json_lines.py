"""The one reader of a JSON-lines file (one JSON object a line: BLiMP's paradigms, FrameNet's derived exemplars)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ..base.errors import DataError
from . import text_lines


def json_objects(path: Path) -> Iterator[tuple[str, dict]]:
    """(where, object) for each non-blank line of ``path`` (read by :func:`text_lines`), ``where`` being
    ``path:line`` (1-based) for the caller's own messages; a line that is not JSON, or not a JSON object, is a
    DataError naming the file and the line."""
    for number, line in enumerate(text_lines(path), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        yield where, obj
