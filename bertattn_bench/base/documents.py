"""The output files' contract (issue 37): every JSON document the suite writes (``claims.json``, ``run.json``,
baselines, ``matrix.json``) is ``{"schema": "bertattn-bench/<kind>", "version": N, ...}``, strict JSON (no NaN or
Infinity: a non-finite number is written as null, with the reason under the enclosing object's ``null_reasons``), and
valid against the JSON Schema shipped in ``bertattn_bench/schemas/<kind>.schema.json``.

One writer (:func:`write_json`, atomic: temporary file then rename) and one loader of the schemas (:func:`schema`);
:func:`validate` uses the ``jsonschema`` package where installed, else a small validator of the subset the shipped
schemas use. With validation on (:func:`validate_outputs`: the faces turn it on for ``BERTATTN_VALIDATE_OUTPUTS=1``,
which the test suite sets) every written document is validated and a document that does not match is an error, so
every file a test writes is checked against its schema. This module reads no environment (issue 62).
"""
from __future__ import annotations

import json
import math
import os
import re
from functools import lru_cache
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"  # bertattn_bench/schemas
PREFIX = "bertattn-bench/"
VERSIONS = {"claims": 1, "run": 1, "baseline": 1, "matrix": 1}
_VALIDATE = {"on": False}  # validate every written document (validate_outputs): a test aid, off by default


def validate_outputs(on: bool) -> None:
    """Validate every document :func:`write_json` writes against its schema (a mismatch is an error), or not: the
    faces set it from ``BERTATTN_VALIDATE_OUTPUTS``; the test suite turns it on."""
    _VALIDATE["on"] = bool(on)


class SchemaError(ValueError):
    """A document that does not match its shipped schema."""


def envelope(kind: str, body: dict) -> dict:
    """``{"schema": "bertattn-bench/<kind>", "version": N, **body}`` (the keys first, for a reader of the file)."""
    rest = {k: v for k, v in body.items() if k not in ("schema", "version")}
    return {"schema": PREFIX + kind, "version": VERSIONS[kind], **rest}


def kind_of(doc) -> str | None:
    """The document's kind (``claims``, ``run``, ...) where it names one, else None (an older, unversioned file)."""
    name = doc.get("schema") if isinstance(doc, dict) else None
    return name[len(PREFIX):] if isinstance(name, str) and name.startswith(PREFIX) else None


# ---- strict JSON ---------------------------------------------------------------------------------------------------

def _reason(x: float) -> str:
    return "NaN (not a number)" if math.isnan(x) else ("+Infinity" if x > 0 else "-Infinity")


def strict(value, _reasons: dict | None = None, _path: str = ""):
    """``value`` with every non-finite float replaced by None; in a dict, the reason goes to its ``null_reasons``
    (``{"measured": "NaN (not a number)", "interval[1]": "+Infinity"}``), in a top-level list nowhere else to put it."""
    if isinstance(value, float) and not math.isfinite(value):
        if _reasons is not None:
            _reasons[_path] = _reason(value)
        return None
    if isinstance(value, dict):
        reasons: dict = {}
        out = {k: strict(v, reasons, str(k)) for k, v in value.items()}
        if reasons:  # said where it happened: this object
            out["null_reasons"] = {**(value.get("null_reasons") or {}), **reasons}
        return out
    if isinstance(value, (list, tuple)):
        return [strict(v, _reasons, f"{_path}[{i}]") for i, v in enumerate(value)]
    try:  # numpy scalars
        import numpy as np

        if isinstance(value, np.generic):
            return strict(value.item(), _reasons, _path)
    except ImportError:  # pragma: no cover
        pass
    return value


def dumps(doc, indent: int | None = 1) -> str:
    """Strict JSON text of ``doc`` (non-finite numbers as null with a reason; ``allow_nan=False`` refuses any left)."""
    return json.dumps(strict(doc), indent=indent, ensure_ascii=False, allow_nan=False) + "\n"


def _no_constants(name):
    raise ValueError(f"not strict JSON: {name}")


def loads(text: str):
    """Parse JSON text, refusing NaN / Infinity (what :func:`dumps` never writes)."""
    return json.loads(text, parse_constant=_no_constants)


def write_json(path: Path, doc, kind: str | None = None) -> Path:
    """Write ``doc`` as strict JSON to ``path`` atomically (temporary file in the same folder, then rename). ``kind``:
    the document is validated against that schema when validation is on (:func:`validate_outputs`)."""
    path = Path(path)
    text = dumps(doc)
    kind = kind or kind_of(doc)
    if kind and _VALIDATE["on"]:
        errors = validate(loads(text), kind)
        if errors:
            raise SchemaError(f"{path}: does not match the {kind} schema: " + "; ".join(errors[:5]))
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path.parent)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


_TEMP_NAME = re.compile(r"\.tmp(\d+)$")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


def remove_stale_temps(folder: Path) -> list[Path]:
    """Remove what a killed process left in ``folder``: files and folders named ``*.tmp<PID>`` (every atomic write
    here: a temporary beside its target, then a rename) whose process is no longer running. Another running
    process's are left alone. Returns what was removed."""
    import shutil

    removed: list[Path] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP_NAME.search(entry.name)
        if not match or int(match.group(1)) == os.getpid() or _running(int(match.group(1))):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:
            continue
        removed.append(entry)
    return removed


# ---- schemas and validation ----------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def schema(kind: str) -> dict:
    return json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text(encoding="utf-8"))


def validate(doc, kind: str) -> list[str]:
    """The ways ``doc`` breaks the shipped ``kind`` schema (empty: valid)."""
    s = schema(kind)
    try:
        import jsonschema
    except ImportError:
        return list(_validate(doc, s, s, "$"))
    validator = jsonschema.validators.validator_for(s)(s)
    return [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}" for e in validator.iter_errors(doc)]


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value, t: str) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[t])


def _validate(v, s: dict, root: dict, where: str):  # noqa: C901 - one branch per keyword
    """A small JSON Schema validator: $ref (local), type, const, enum, anyOf, properties, required,
    additionalProperties, items, minItems, maxItems, minimum, pattern (the subset the shipped schemas use)."""
    import re

    if "$ref" in s:
        target = root
        for part in s["$ref"].lstrip("#/").split("/"):
            target = target[part]
        yield from _validate(v, target, root, where)
        return
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_is(v, t) for t in types):
            yield f"{where}: {v!r:.60} is not of type {'/'.join(types)}"
            return
    if "const" in s and v != s["const"]:
        yield f"{where}: {v!r:.60} is not {s['const']!r}"
    if "enum" in s and v not in s["enum"]:
        yield f"{where}: {v!r:.60} is not one of {s['enum']}"
    if "anyOf" in s and not any(not list(_validate(v, sub, root, where)) for sub in s["anyOf"]):
        yield f"{where}: {v!r:.60} matches none of anyOf"
    if "minimum" in s and _is(v, "number") and v < s["minimum"]:
        yield f"{where}: {v} < {s['minimum']}"
    if "pattern" in s and isinstance(v, str) and not re.search(s["pattern"], v):
        yield f"{where}: {v!r:.60} does not match {s['pattern']}"
    if isinstance(v, dict):
        for k in s.get("required", []):
            if k not in v:
                yield f"{where}: missing {k!r}"
        props = s.get("properties", {})
        extra = s.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                yield from _validate(x, props[k], root, f"{where}.{k}")
            elif extra is False:
                yield f"{where}: unexpected key {k!r}"
            elif isinstance(extra, dict):
                yield from _validate(x, extra, root, f"{where}.{k}")
    if isinstance(v, list):
        if "minItems" in s and len(v) < s["minItems"]:
            yield f"{where}: fewer than {s['minItems']} items"
        if "maxItems" in s and len(v) > s["maxItems"]:
            yield f"{where}: more than {s['maxItems']} items"
        if "items" in s:
            for i, x in enumerate(v):
                yield from _validate(x, s["items"], root, f"{where}[{i}]")


# ---- reading a report's documents; the tables' model names (shared by report and matrix) ----------------------

def read_json(path: Path, missing: str):
    """A JSON file of a claims report: ``missing`` (naming what was expected) where the file is not there, the file
    and line where it is not JSON."""
    from .errors import BenchError

    path = Path(path)
    if not path.is_file():
        raise BenchError(missing)
    try:
        data = path.read_bytes()
        return json.loads(data.decode("utf-8-sig"))  # a BOM dropped
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BenchError(f"{path}: not UTF-8 text (line {line}, byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise BenchError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    except OSError as exc:
        raise BenchError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def short_model(name: str) -> str:
    """The model as the tables name it: ``embedded:all-MiniLM-L6-v2`` -> ``minilm``, its random twin
    ``random-init(embedded:...)@0`` -> ``random-minilm`` (``@seed`` when not 0), a folder -> its name. (Test ids
    name a twin ``random<seed>`` instead, :func:`runner.model_id`, so that ``-k minilm`` does not select it.)"""
    import re

    twin = re.fullmatch(r"random-init\((.*)\)@(-?\d+)", name)
    if twin:
        return "random-" + short_model(twin.group(1)) + ("" if twin.group(2) == "0" else f"@{twin.group(2)}")
    if name.startswith("embedded:"):
        return "minilm"
    return Path(name).name or name


def read_baseline_text(path: Path) -> str:
    """A baseline file's text (UTF-8, a BOM dropped); a BenchError naming the file where it cannot be read."""
    from .errors import BenchError

    try:
        return Path(path).read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BenchError(f"baseline {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise BenchError(f"baseline {path}: cannot be read ({exc.strerror})") from None


def baseline_document(text: str, where: str) -> dict:
    """A recorded baseline parsed and checked (the one parser of the three readers: the judged model's own, the
    --compare-to file, ``diff``'s REV:PATH): a versioned document or an older one; a BenchError naming ``where``."""
    from .errors import BenchError

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise BenchError(f"baseline {where}: not JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        raise BenchError(f"baseline {where}: not a baseline file (no \"results\" object)")
    return checked(doc, "baseline", f"baseline {where}")


def checked(doc, kind: str, where: str):
    """``doc`` as read back from a file, checked against its shipped schema: a versioned document in full, an older
    one (no ``schema`` key) where it has the parts the readers index (a baseline's entries, a report's records).
    A BenchError naming ``where`` and the first broken entry (``results/clark.x@y: 5 is not of type object``)."""
    from .errors import BenchError

    if kind_of(doc) is not None and kind_of(doc) != kind:
        raise BenchError(f"{where}: a {kind_of(doc)} document, not a {kind} one")
    if kind_of(doc) is not None:
        if doc.get("version") != VERSIONS[kind]:
            raise BenchError(f"{where}: {kind} version {doc.get('version')!r}, this code reads {VERSIONS[kind]}")
        errors = validate(doc, kind)
    else:  # older, unversioned: the entries the readers index must be of their shape
        s = schema(kind)
        parts = {"baseline": ("results", "entry"), "claims": ("records", "record")}.get(kind)
        errors = []
        if parts and isinstance(doc, dict) and isinstance(doc.get(parts[0]), (dict, list)):
            entries = doc[parts[0]]
            pairs = entries.items() if isinstance(entries, dict) else enumerate(entries)
            for key, entry in pairs:
                errors += list(_validate(entry, s["$defs"][parts[1]], s, f"{parts[0]}/{key}"))
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise BenchError(f"{where}: malformed (does not match the shipped {kind} schema): {errors[0]}{more}")
    return doc
