"""GUM's document split, defined once: dev and test are the documents of the UD GUM release's dev/test files
(their ``# newdoc id`` lines); train is every other document of ``gum/documents`` (gum/SOURCE.md: 178 documents).
Read by the coreference family (GUM ``Entity=`` chains) and the probes (trained on GUM train sentences)."""
from __future__ import annotations

from pathlib import Path

from ..base.errors import DataError
from . import read_text, text_lines

GUM_DOCUMENTS = "gum/documents"
SPLIT_FILES = {"dev": "ud_english_gum/en_gum-ud-dev.conllu", "test": "ud_english_gum/en_gum-ud-test.conllu"}


def split_files(data_dir: Path) -> list[Path]:
    """The UD GUM dev and test files (held out from training)."""
    from ..base.settings import data_file

    return [data_file(data_dir, SPLIT_FILES[s]) for s in ("dev", "test")]


def split_ids(data_dir: Path, split: str) -> list[str]:
    """The document ids of UD GUM ``dev`` or ``test``, in file order; an error naming the file if it has none."""
    from ..base.settings import data_file

    path = data_file(data_dir, SPLIT_FILES[split])
    out = [ln.split("=", 1)[1].strip() for ln in read_text(path).splitlines()
           if ln.startswith("# newdoc id")]
    if not out:
        raise DataError(f"{path}: no '# newdoc id' lines (cannot tell which GUM documents are in {split})")
    return out


def document_id(path: Path) -> str:
    """A document file's ``# newdoc id``, which must come before its first word line."""
    for line in text_lines(path):
        if line.startswith("# newdoc id"):
            return line.split("=", 1)[1].strip()
        if line.strip() and not line.startswith("#"):
            break
    raise DataError(f"{path}:1: no '# newdoc id = ...' comment before the first word line")


def train_documents(data_dir: Path) -> list[Path]:
    """The document files of ``gum/documents`` in neither UD GUM dev nor test, sorted by name."""
    from ..base.settings import data_file

    held_out = set(split_ids(data_dir, "dev")) | set(split_ids(data_dir, "test"))
    folder = data_file(data_dir, GUM_DOCUMENTS)
    out = [p for p in sorted(folder.glob("*.conllu")) if document_id(p) not in held_out]
    if not out:
        raise DataError(f"{folder}: no GUM train documents (every document is in UD GUM dev or test)")
    return out
