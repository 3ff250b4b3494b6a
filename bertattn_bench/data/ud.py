"""CoNLL-U treebanks (UD EWT, UD GUM, UD PUD) through the ``conllu`` package, with file:line errors.

Only syntactic words are kept: multiword-token ranges (``1-2``) and empty nodes (``1.1``) are skipped, as the
trees are defined over syntactic words.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import conllu

from ..base.errors import DataError
from . import read_text

CORPORA = {
    "ewt_dev": "ud_english_ewt/en_ewt-ud-dev.conllu",
    "ewt_test": "ud_english_ewt/en_ewt-ud-test.conllu",
    "gum_dev": "ud_english_gum/en_gum-ud-dev.conllu",
    "gum_test": "ud_english_gum/en_gum-ud-test.conllu",
    "pud_test": "ud_english_pud/en_pud-ud-test.conllu",  # PUD (CoNLL 2017): Htut et al. 2019's English set
}
FEATURES_CORPUS = "ewt_dev"  # the sentences of Kovaleva's linguistic features (the patterns family; the data manifest)


@dataclass
class Sentence:
    """One tree. ``heads`` are 1-based word ids, 0 for the root, as in CoNLL-U."""

    words: list[str]
    heads: list[int]
    deprels: list[str]
    upos: list[str]
    xpos: list[str]
    sent_id: str = ""
    source: str = ""  # "file:line" of the sentence's first line
    misc: list[dict | None] = field(default_factory=list)
    comments: dict = field(default_factory=dict)


def sentence_blocks(text: str):
    """Yield (first line number, block text) for each sentence block."""
    start, lines = None, []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            if start is None:
                start = number
            lines.append(line)
        elif lines:
            yield start, lines
            start, lines = None, []
    if lines:
        yield start, lines


def check_block(path: Path, start: int, lines: list[str]) -> None:
    """Column count, integer ids and HEADs in range, each error at its own line."""
    n_words = sum(1 for ln in lines if not ln.startswith("#") and ln.split("\t")[0].isdigit())
    for offset, line in enumerate(lines):
        if line.startswith("#"):
            continue
        where = f"{path}:{start + offset}"
        cols = line.split("\t")
        if len(cols) != 10:
            raise DataError(f"{where}: malformed CoNLL-U: expected 10 tab-separated columns, found {len(cols)}")
        tid = cols[0]
        if "-" in tid or "." in tid:
            continue
        if not tid.isdigit():
            raise DataError(f"{where}: malformed CoNLL-U: word id {tid!r} is not an integer")
        if not cols[6].isdigit():
            raise DataError(f"{where}: malformed CoNLL-U: HEAD {cols[6]!r} of word {tid} is not an integer")
    for offset, line in enumerate(lines):  # second pass: every line is well-formed, so n_words is right
        cols = line.split("\t")
        if not line.startswith("#") and cols[0].isdigit() and int(cols[6]) > n_words:
            raise DataError(f"{path}:{start + offset}: malformed CoNLL-U: HEAD {cols[6]} of word {cols[0]} "
                            f"is out of range 0..{n_words}")


def tree_problem(heads: list[int]) -> str | None:
    """Why 1-based ``heads`` (0 = root) are not one tree rooted at a single word, or None when they are."""
    roots = [i for i, h in enumerate(heads, 1) if h == 0]
    if len(roots) != 1:
        return f"{len(roots)} words attach to the root (0), expected 1: word ids {roots[:5]}"
    for start in range(1, len(heads) + 1):
        seen, word = set(), start
        while word != 0:
            if word in seen:
                return f"word {start} reaches a cycle through word {word}"
            seen.add(word)
            word = heads[word - 1]
    return None


def read_conllu(path: str | Path, limit: int | None = None) -> list[Sentence]:
    """Read a CoNLL-U file; malformed input raises :class:`DataError` naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"missing CoNLL-U file: {path}")
    text = read_text(path)
    sentences: list[Sentence] = []
    for start, lines in sentence_blocks(text):
        check_block(path, start, lines)
        try:
            (tokenlist,) = conllu.parse("\n".join(lines) + "\n\n")
        except Exception as exc:  # conllu's own errors carry no line numbers
            raise DataError(f"{path}:{start}: malformed CoNLL-U sentence: {exc}") from exc
        words = [t for t in tokenlist if isinstance(t["id"], int)]
        if not words:
            continue
        ids = [t["id"] for t in words]
        if ids != list(range(1, len(ids) + 1)):
            raise DataError(f"{path}:{start}: word ids are not 1..n in order: {ids[:10]}")
        heads = [t["head"] for t in words]
        bad = [h for h in heads if h is None or not 0 <= h <= len(words)]
        if bad:
            raise DataError(f"{path}:{start}: HEAD out of range 0..{len(words)}: {bad[:5]}")
        problem = tree_problem(heads)
        if problem:
            raise DataError(f"{path}:{start}: HEAD column is not one tree: {problem}")
        sentences.append(Sentence(
            words=[t["form"] for t in words],
            heads=heads,
            deprels=[t["deprel"] for t in words],
            upos=[t["upos"] for t in words],
            xpos=[t["xpos"] or "_" for t in words],
            sent_id=tokenlist.metadata.get("sent_id", ""),
            source=f"{path}:{start}",
            misc=[t["misc"] for t in words],
            comments=dict(tokenlist.metadata),
        ))
        if limit is not None and len(sentences) >= limit:
            break
    if not sentences:
        raise DataError(f"{path}: no sentences found (empty or not CoNLL-U)")
    return sentences


def load_corpus(data_dir: Path, corpus: str, limit: int | None = None) -> list[Sentence]:
    from ..base.settings import data_file

    if corpus not in CORPORA:
        raise DataError(f"unknown treebank {corpus!r}; known: {', '.join(CORPORA)}")
    return read_conllu(data_file(data_dir, CORPORA[corpus]), limit=limit)
