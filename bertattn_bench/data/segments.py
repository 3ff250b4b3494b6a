"""Clark et al. §3 inputs: ``[CLS] paragraph1 [SEP] paragraph2 [SEP]`` from consecutive paragraphs.

Clark used 1000 Wikipedia segments of at most 128 tokens. Here: WikiText-2 (test, raw) articles, and GUM
documents' ``# newpar`` paragraphs. Consecutive paragraphs of one article are paired greedily without overlap;
a pair that does not fit in ``max_tokens`` word pieces is not truncated but skipped (and counted), so every
segment is two whole paragraphs as in the paper.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError

CORPORA = {
    "wikitext2": "wikitext2_raw/wiki.test.raw",
    "gum_paragraphs": "gum/documents",
}

_HEADING = re.compile(r"^\s*(=\s)+.*(\s=)+\s*$")
_WIKITEXT_ESCAPES = {" @-@ ": "-", " @,@ ": ",", " @.@ ": "."}


@dataclass
class ParagraphPair:
    first: str
    second: str
    source: str  # "file:line" of the first paragraph


def wikitext_articles(path: Path) -> list[list[tuple[int, str]]]:
    """Articles as lists of (line number, paragraph text); headings split articles (level 1) and are dropped."""
    articles: list[list[tuple[int, str]]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        if not text:
            continue
        if _HEADING.match(line):
            if text.startswith("= ") and not text.startswith("= ="):
                articles.append([])
            continue
        if not articles:
            articles.append([])
        for escaped, plain in _WIKITEXT_ESCAPES.items():
            text = text.replace(escaped, plain)
        articles[-1].append((number, text))
    return [a for a in articles if a]


def gum_paragraphs(folder: Path) -> list[list[tuple[int, str]]]:
    """Each GUM document as a list of (line number, paragraph text), paragraphs from ``# newpar`` comments."""
    docs = []
    files = sorted(folder.glob("*.conllu"))
    if not files:
        raise DataError(f"{folder}: no *.conllu documents found")
    for f in files:
        paras: list[tuple[int, str]] = []
        current: list[str] = []
        start = 0
        for number, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("# newpar"):
                if current:
                    paras.append((start, " ".join(current)))
                current, start = [], number
            elif line.startswith("# text = "):
                current.append(line[len("# text = "):].strip())
                start = start or number
        if current:
            paras.append((start, " ".join(current)))
        docs.append([(n, t) for n, t in paras])
    return docs


def paragraph_pairs(articles, fits, path: Path, limit: int | None = None) -> tuple[list[ParagraphPair], int]:
    """Greedy non-overlapping consecutive pairs for which ``fits(first, second)``; returns (pairs, skipped)."""
    pairs, skipped = [], 0
    for article in articles:
        i = 0
        while i + 1 < len(article):
            (line, first), (_, second) = article[i], article[i + 1]
            if fits(first, second):
                pairs.append(ParagraphPair(first, second, f"{path}:{line}"))
                i += 2
                if limit is not None and len(pairs) >= limit:
                    return pairs, skipped
            else:
                skipped += 1
                i += 1
    return pairs, skipped


def load_segments(data_dir: Path, corpus: str, tokenizer, max_tokens: int = 128, limit: int | None = None):
    """Paragraph pairs of ``corpus`` that fit in ``max_tokens`` pieces with [CLS]/[SEP]; (pairs, skipped)."""
    from ..settings import data_file

    if corpus not in CORPORA:
        raise DataError(f"unknown segment corpus {corpus!r}; known: {', '.join(CORPORA)}")
    path = data_file(data_dir, CORPORA[corpus])
    articles = wikitext_articles(path) if corpus == "wikitext2" else gum_paragraphs(path)

    def fits(a: str, b: str) -> bool:
        return len(tokenizer(a, b, truncation=False)["input_ids"]) <= max_tokens

    pairs, skipped = paragraph_pairs(articles, fits, path, limit)
    if not pairs:
        raise DataError(f"{path}: no pair of consecutive paragraphs fits in {max_tokens} word pieces")
    return pairs, skipped
