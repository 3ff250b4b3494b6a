"""Small pieces the report and the matrix share (neither imports the other for them): reading a report's JSON
documents with one clear error, and the short model names of the tables."""
from __future__ import annotations

import json
from pathlib import Path


def read_json(path: Path, missing: str):
    """A JSON file of a claims report: ``missing`` (naming what was expected) where the file is not there, the file
    and line where it is not JSON."""
    from .errors import BenchError

    path = Path(path)
    if not path.is_file():
        raise BenchError(missing)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BenchError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None


def short_model(name: str) -> str:
    """The model as in the test ids: ``embedded:all-MiniLM-L6-v2`` -> ``minilm``, its random twin
    ``random-init(embedded:...)@0`` -> ``random-minilm`` (``@seed`` when not 0), a folder -> its name."""
    import re

    twin = re.fullmatch(r"random-init\((.*)\)@(-?\d+)", name)
    if twin:
        return "random-" + short_model(twin.group(1)) + ("" if twin.group(2) == "0" else f"@{twin.group(2)}")
    if name.startswith("embedded:"):
        return "minilm"
    return Path(name).name or name
