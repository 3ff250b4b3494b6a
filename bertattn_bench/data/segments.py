"""Clark et al. §3 inputs: ``[CLS] A [SEP] B [SEP]`` segments of at most 128 word pieces.

**Default: the authors' segments.** Clark et al. built their 1,000 Wikipedia segments with
``preprocess_unlabeled.py`` of clarkkev/attention-analysis (commit b609cfc) and fed them with
``extract_attention.py``. Line numbers below are of those files at that commit:

* the input is one sentence per line, documents separated by blank lines (README); each sentence is word-piece
  tokenised on its own and empty ones are left out (l.113-130);
* ``prep_document`` (l.13-68): sentences are collected into a chunk until the chunk holds at least
  ``max_sequence_length - 3`` = 125 pieces or the document ends (l.15-16, 27-31); the chunk is split at a random
  sentence boundary ``a_end = randint(1, len(chunk) - 1)`` into A and B (l.33-43), and ``truncate_seq_pair``
  (l.71-86) removes pieces from the longer of the two, from its front or its back at random, until
  ``len(A) + len(B) <= 125`` (l.44); a chunk of one sentence has an empty B, and then ``break`` ends the whole
  document (l.46-47: the rest of the document is not used);
* segments are taken in file order until ``--num-docs`` = 1000 (l.96, 119-126), then shuffled (l.144); one
  ``random`` stream seeded 0 (l.106) draws the splits, the truncations and the shuffle;
* ``extract_attention.py`` l.30: ``segment_ids = [0] * len(tokens)``: token type ids are all 0 (the model never
  sees A/B segment embeddings); the layout is ``[CLS] A [SEP] B [SEP]`` (l.51-60 of preprocess_unlabeled.py).

Here the same procedure (same order of random draws, ``random.Random(seed)``) runs on WikiText-2 test articles
(a document = an article: the text between level-1 headings, headings dropped; paragraphs split into sentences by
:func:`split_wikitext_sentences`) and on GUM documents (one file = one document; sentences are GUM's
``# text =`` lines). Nothing is skipped for length: long chunks are truncated as the authors do; what the
authors' ``break`` drops is counted (sentences) and reported with every value.

**Options** (corpus names, so they reach every family that reads segments, and the cache key):

============================  =========================================================  ==================
corpus                        segments                                                   token type ids
============================  =========================================================  ==================
``wikitext2``                 the authors' (above), WikiText-2 test                      all 0 (authors')
``wikitext2_types01``         the authors', WikiText-2 test                              0 for A, 1 for B
``wikitext2_pairs``           two consecutive whole paragraphs that fit (earlier choice)  0 for A, 1 for B
``wikitext2_pairs_types0``    two consecutive whole paragraphs that fit                  all 0
``gum_paragraphs`` ...        the same four for GUM documents (``# newpar`` paragraphs)
============================  =========================================================  ==================

Paragraph pairs (``*_pairs``): consecutive paragraphs of one article are paired greedily without overlap; a pair
that does not fit in ``max_tokens`` pieces is not truncated but skipped (its first paragraph is counted), so
every segment is two whole paragraphs, as the paper's text says (§3, "two consecutive paragraphs").
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import DataError
from ..engine.batching import Encoded, Skipped, encode_pair, encode_piece_pair, pair_template
from . import read_text

SOURCES = {
    "wikitext2": "wikitext2_raw/wiki.test.raw",
    "gum_paragraphs": "gum/documents",
}
N_SEGMENTS = 1000  # preprocess_unlabeled.py l.96: --num-docs default 1000 (Clark §3: "1000 Wikipedia segments")
SEED = 0  # preprocess_unlabeled.py l.106: random.seed(0)


@dataclass(frozen=True)
class Recipe:
    source: str  # key of SOURCES
    packing: str  # "authors" | "pairs"
    token_types: str  # "zeros" | "ab"


def _recipes() -> dict[str, Recipe]:
    out = {}
    for source in SOURCES:
        out[source] = Recipe(source, "authors", "zeros")
        out[f"{source}_types01"] = Recipe(source, "authors", "ab")
        out[f"{source}_pairs"] = Recipe(source, "pairs", "ab")
        out[f"{source}_pairs_types0"] = Recipe(source, "pairs", "zeros")
    return out


RECIPES = _recipes()
CORPORA = {name: SOURCES[r.source] for name, r in RECIPES.items()}  # corpus name -> data path (cache key)

_HEADING = re.compile(r"^\s*(=\s)+.*(\s=)+\s*$")
_WIKITEXT_ESCAPES = {" @-@ ": "-", " @,@ ": ",", " @.@ ": "."}
_SENTENCE_END = {".", "!", "?"}
_CLOSERS = {'"', "'", ")", "]"}


@dataclass
class Paragraph:
    line: int  # 1-based line in its file
    text: str
    sentences: list[str]


@dataclass
class Document:
    path: Path
    paragraphs: list[Paragraph]

    def sentences(self) -> list[tuple[int, str]]:
        return [(p.line, s) for p in self.paragraphs for s in p.sentences]


@dataclass
class ParagraphPair:
    first: str
    second: str
    source: str  # "file:line" of the first paragraph


def split_wikitext_sentences(text: str) -> list[str]:
    """Sentences of a WikiText paragraph. WikiText is tokenised with spaces around punctuation, and abbreviations
    keep their period ("U.S.", "Jr."), so a sentence ends at a free-standing ``.``/``!``/``?`` token whose next
    word (after any quotes or closing brackets) does not start with a lower-case letter, or at the end. (No
    sentence splitter is a dependency of the project; only chunk boundaries depend on it.)"""
    tokens = text.split()
    sentences, current = [], []
    for i, tok in enumerate(tokens):
        current.append(tok)
        j = i + 1
        while j < len(tokens) and tokens[j] in _CLOSERS:  # look past quotes/brackets: '? " he said' goes on
            j += 1
        nxt = tokens[j] if j < len(tokens) else None
        if tok in _SENTENCE_END and (nxt is None or not nxt[0].islower()):
            sentences.append(" ".join(current))
            current = []
    if current:
        sentences.append(" ".join(current))
    return sentences


def wikitext_documents(path: Path) -> list[Document]:
    """Articles (split at level-1 headings; headings dropped), each paragraph with its sentences."""
    docs: list[Document] = []
    for number, line in enumerate(read_text(path).splitlines(), 1):
        text = line.strip()
        if not text:
            continue
        if _HEADING.match(line):
            if text.startswith("= ") and not text.startswith("= ="):
                docs.append(Document(path, []))
            continue
        if not docs:
            docs.append(Document(path, []))
        for escaped, plain in _WIKITEXT_ESCAPES.items():
            text = text.replace(escaped, plain)
        docs[-1].paragraphs.append(Paragraph(number, text, split_wikitext_sentences(text)))
    return [d for d in docs if d.paragraphs]


def gum_documents(folder: Path) -> list[Document]:
    """Each GUM document (file, sorted by name): paragraphs from ``# newpar``, sentences from ``# text =``."""
    files = sorted(folder.glob("*.conllu"))
    if not files:
        raise DataError(f"{folder}: no *.conllu documents found")
    docs = []
    for f in files:
        paras: list[Paragraph] = []
        current: list[str] = []
        start = 0

        def close():
            if current:
                paras.append(Paragraph(start, " ".join(current), list(current)))

        for number, line in enumerate(read_text(f).splitlines(), 1):
            if line.startswith("# newpar"):
                close()
                current, start = [], number
            elif line.startswith("# text = "):
                current.append(line[len("# text = "):].strip())
                start = start or number
        close()
        docs.append(Document(f, paras))
    return docs


# ---- the authors' segments (preprocess_unlabeled.py) -----------------------------------------------------------

@dataclass
class PackedSegment:
    a: list[int]  # word-piece ids of segment A
    b: list[int]
    source: str  # "file:line" of its first sentence
    n_sentences: int
    truncated: int  # pieces removed by truncate_seq_pair


def truncate_seq_pair(a: list, b: list, max_pieces: int, rng: random.Random) -> int:
    """preprocess_unlabeled.py l.71-86, in place: drop a piece from the front or the back (coin flip) of the longer
    of the two (B on a tie) until they fit. Returns the number of pieces removed."""
    removed = 0
    while len(a) + len(b) > max_pieces:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()
        removed += 1
    return removed


def pack_document(sentences: list[list[int]], max_pieces: int, rng: random.Random,
                  sources: list[str] | None = None) -> tuple[list[PackedSegment], int]:
    """preprocess_unlabeled.py ``prep_document`` (l.13-68) on one document's sentences (word-piece ids, none
    empty). ``max_pieces`` is the budget for A + B (``max_sequence_length - 3``). Returns (segments, sentences
    dropped by the authors' ``break``: the chunk whose A or B came out empty and every later sentence)."""
    segments: list[PackedSegment] = []
    chunk: list[list[int]] = []
    length, start = 0, 0
    for i, sentence in enumerate(sentences):
        chunk.append(sentence)
        length += len(sentence)
        if i == len(sentences) - 1 or length >= max_pieces:  # l.31
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1  # l.33-35
            a = [p for s in chunk[:a_end] for p in s]
            b = [p for s in chunk[a_end:] for p in s]
            removed = truncate_seq_pair(a, b, max_pieces, rng)  # l.44
            if not a or not b:  # l.46-47: ends the document
                return segments, len(sentences) - start
            where = sources[start] if sources else f"sentence {start + 1}"
            segments.append(PackedSegment(a, b, where, len(chunk), removed))
            chunk, length, start = [], 0, i + 1
    return segments, 0


@dataclass
class SegmentSet:
    """The encoded segments of one corpus, what was left out, and a description for the report."""

    encoded: list[Encoded]
    skipped: Skipped
    description: str
    path: Path
    sources: list[str] = field(default_factory=list)  # "file:line" per segment, in ``encoded`` order


def authors_segments(documents: list[Document], tokenizer, max_tokens: int = 128, n_segments: int = N_SEGMENTS,
                     seed: int = SEED, token_types: str = "zeros", path: Path | None = None) -> SegmentSet:
    """The authors' procedure over ``documents`` in order: the first ``n_segments`` segments, shuffled."""
    # l.15: [CLS], [SEP], [SEP] for BERT; the tokenizer's own special tokens of a pair (RoBERTa-like: 4)
    n_special = sum(1 for p in pair_template(tokenizer)[0] if p not in ("A", "B"))
    budget = max_tokens - n_special
    if budget < 2:
        raise DataError(f"max_tokens={max_tokens}: segments need room for A, B and the {n_special} special tokens "
                        f"of a pair")
    rng = random.Random(seed)
    chosen: list[PackedSegment] = []
    dropped = ended_early = available = empty = 0
    for doc in documents:
        lines_texts = doc.sentences()
        if not lines_texts:
            continue
        ids = tokenizer([t for _, t in lines_texts], add_special_tokens=False)["input_ids"]
        kept = [(f"{doc.path}:{line}", s) for (line, _), s in zip(lines_texts, ids) if s]  # l.129-130
        empty += len(ids) - len(kept)
        # once the cap is reached the authors stop (l.125-126); later documents are only counted (their own rng,
        # so the shuffle below draws from the same stream state as the authors')
        full = len(chosen) >= n_segments
        segs, lost = pack_document([s for _, s in kept], budget, random.Random(seed) if full else rng,
                                   [w for w, _ in kept])
        available += len(segs)
        if not full:
            dropped += lost
            ended_early += bool(lost)
            chosen.extend(segs[: n_segments - len(chosen)])  # l.120-124
    rng.shuffle(chosen)  # l.144
    if not chosen:
        raise DataError(f"{path}: no segment of two non-empty parts could be built")
    encoded = [encode_piece_pair(tokenizer, i, s.a, s.b, token_types) for i, s in enumerate(chosen)]
    truncated = sum(s.truncated for s in chosen)
    skipped = Skipped(n=dropped, max_tokens=max_tokens,
                      reason=(f"sentence(s) dropped in {ended_early} document(s) where a chunk had no sentence "
                              f"for B (authors' break, preprocess_unlabeled.py l.46-47)"))
    types = "token types all 0" if token_types == "zeros" else "token types 0 for A, 1 for B"
    description = (f"Clark's segments (preprocess_unlabeled.py): sentences packed to <= {max_tokens} pieces, A/B "
                   f"split at a random sentence, truncated; {types}; the first {len(chosen)} of {available} "
                   f"segments, seed {seed}; {truncated} pieces truncated in "
                   f"{sum(1 for s in chosen if s.truncated)} segments"
                   + (f"; {empty} sentences without pieces left out" if empty else ""))
    return SegmentSet(encoded, skipped, description, path, [s.source for s in chosen])


# ---- paragraph pairs (the project's earlier choice) -------------------------------------------------------------

def paragraph_pairs(articles, fits, path: Path, limit: int | None = None) -> tuple[list[ParagraphPair], int]:
    """Greedy non-overlapping consecutive pairs for which ``fits(first, second)``; returns (pairs, skipped).
    ``articles``: lists of (line number, paragraph text)."""
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


def pair_segments(documents: list[Document], tokenizer, max_tokens: int = 128, limit: int | None = None,
                  token_types: str = "ab", path: Path | None = None) -> SegmentSet:
    articles = [[(p.line, p.text) for p in d.paragraphs] for d in documents]

    def fits(a: str, b: str) -> bool:
        return len(tokenizer(a, b, truncation=False)["input_ids"]) <= max_tokens

    pairs, not_fitting = paragraph_pairs(articles, fits, path, limit)
    if not pairs:
        raise DataError(f"{path}: no pair of consecutive paragraphs fits in {max_tokens} word pieces")
    encoded = [encode_pair(tokenizer, i, p.first, p.second, token_types) for i, p in enumerate(pairs)]
    types = "token types all 0" if token_types == "zeros" else "token types 0 for A, 1 for B"
    skipped = Skipped(n=not_fitting, max_tokens=max_tokens,
                      reason=f"paragraph(s) whose pair with the next one is over {max_tokens} word pieces skipped")
    return SegmentSet(encoded, skipped, f"paragraph pairs, <= {max_tokens} pieces, not truncated; {types}", path,
                      [p.source for p in pairs])


def load_segment_set(data_dir: Path, corpus: str, tokenizer, max_tokens: int = 128,
                     limit: int | None = None) -> SegmentSet:
    """The segments of ``corpus`` (a name of :data:`RECIPES`), encoded. ``limit`` caps the number of segments
    (for the authors' recipe it is their ``--num-docs``, at most :data:`N_SEGMENTS`)."""
    from ..base.settings import data_file

    if corpus not in RECIPES:
        raise DataError(f"unknown segment corpus {corpus!r}; known: {', '.join(RECIPES)}")
    if limit is not None and limit < 1:
        raise DataError(f"--limit {limit}: needs at least 1 segment")
    recipe = RECIPES[corpus]
    path = data_file(data_dir, CORPORA[corpus])
    documents = wikitext_documents(path) if recipe.source == "wikitext2" else gum_documents(path)
    if recipe.packing == "pairs":
        out = pair_segments(documents, tokenizer, max_tokens, limit, recipe.token_types, path)
    else:
        n = N_SEGMENTS if limit is None else min(limit, N_SEGMENTS)
        out = authors_segments(documents, tokenizer, max_tokens, n, SEED, recipe.token_types, path)
    out.description = f"{CORPORA[corpus]} ({out.description})"
    return out
