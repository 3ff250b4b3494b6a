"""Data loaders. Every path is resolved under the data directory setting (``--data-dir`` / ``BERTATTN_DATA_DIR``).

Every text file is read through :func:`read_text` (or :func:`text_lines`): UTF-8 with an optional byte-order mark
dropped, and undecodable bytes a :class:`~bertattn_bench.base.errors.DataError` naming the file, the line and the byte."""
from __future__ import annotations

import codecs
from pathlib import Path

from ..base.errors import DataError


def decode_text(data: bytes, where: str | Path) -> str:
    """``data`` as UTF-8 text (a leading BOM dropped); a byte that is not UTF-8 is a DataError naming ``where``, the
    1-based line and column, and the byte."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        bad = data[exc.start:exc.end]
        raise DataError(f"{where}:{line}: not UTF-8 text: byte {' '.join(f'0x{b:02x}' for b in bad)} at column "
                        f"{column} ({exc.reason}); re-save the file as UTF-8") from None


def read_text(path: str | Path) -> str:
    """The text of ``path`` (UTF-8, BOM dropped); undecodable bytes a DataError naming file, line and byte, an
    unreadable file one naming the file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    return decode_text(data, path)


def text_lines(path: str | Path) -> list[str]:
    """The lines of :func:`read_text` (line endings dropped)."""
    return read_text(path).splitlines()
