"""Coreference chains from GUM (Clark et al. §4.3 with GUM standing in for CoNLL-2012), truncated as Clark's.

GUM's per-document CoNLL-U files carry coreference as CorefUD brackets in MISC: ``Entity=(12-person-...`` opens a
mention of entity 12, ``12)`` closes it, ``(12-...)`` is a one-word mention. The ``# global.Entity`` comment names
the fields of an opening bracket (``GRP-etype-infstat-salience-centering-minspan-link-identity``); we read the
entity (GRP) and the link type.

Conventions (ours, to approximate OntoNotes/CoNLL-2012, which Clark used):

* **Singletons are dropped** (entities with one mention in the document): OntoNotes does not annotate them.
* **Appositive and copular-predicate mentions** (GUM link ``appos`` / ``pred``) are dropped: OntoNotes does not
  link them by identity coreference.
* A mention's **head word** is its syntactic head: the word of the span whose UD head lies outside the span (the
  highest in the tree if several), except for names: Clark's head rules on PTB trees take a name's last word,
  UD's ``flat`` its first, so by default (``name_heads="last"``) the head moves to the last word attached to it
  by ``flat`` ("John Smith" → Smith; 112 mentions of GUM dev). Its **type** (default ``typing="ptb"``, as on
  OntoNotes' Penn tags) follows the head's XPOS: PRP/PRP$ → pronoun, NNP/NNPS → proper, else nominal. The
  alternative (``typing="upos"``, ``name_heads="ud"``: the ``_ud`` corpus variants) types by UPOS (PRON → pronoun,
  which includes that/this/what/one/everything; PROPN → proper) and keeps UD's heads.
* **Truncation** (default, Clark §4.3 footnote 3: "We truncate documents to 128 tokens"): each document is read
  up to its first ``max_tokens`` word pieces ([CLS] and [SEP] included), whole words, the cut may fall inside a
  sentence (GUM dev: 30 windows, 322 anaphors; the first *whole-sentence* window of each document would give 288).
  **Windows** (the ``_windows`` corpus variants, ours): every document cut into non-overlapping windows of
  consecutive whole sentences of at most ``max_tokens`` pieces (GUM dev: 287 windows, 2,610 anaphors); a sentence
  that alone does not fit is skipped (counted). Either way a mention counts as an anaphor only if an antecedent
  (an earlier mention of its entity, by head-word position) lies in the same window.

Corpora: ``gum_dev``/``gum_test``/``gum_train``/``litbank`` (Clark's setup) and the variants ``_windows``,
``_ud`` (GUM only) and ``_windows_ud`` (the project's setup before issue 16), see ``parse_corpus``.

Splits: the ``# newdoc id`` lines of ``ud_english_gum/en_gum-ud-{dev,test}.conllu`` (``gum/files.*`` are stale,
see ``gum/SOURCE.md``); train = the other documents.

LitBank (corpus ``litbank``) is read by :mod:`.litbank`; the document model both readers build is
:mod:`.coref_documents`.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..base.errors import DataError
from . import gum, read_text
from .coref_documents import (
    NAME_HEADS,
    TYPINGS,
    Anaphor,
    CorefDocument,
    CorefWindow,
    Mention,
    WindowStats,
    build_document,
    mention_kind,
    name_head,
    ptb_kind,
    span_head,
)
from .gum import GUM_DOCUMENTS, SPLIT_FILES
from .litbank import LITBANK_DOCUMENTS, litbank_files, read_litbank_document
from .ud import check_block, sentence_blocks

CORPORA = {"gum_dev": "dev", "gum_test": "test", "gum_train": "train", "litbank": "all"}
# corpus variants, one option away from Clark's setup: ``_windows`` = all windows of whole sentences instead of
# each document's first 128 pieces; ``_ud`` (GUM only) = UPOS mention typing and UD name heads instead of Clark's
# PTB typing and last-word name heads. ``gum_dev_windows_ud`` is the setup this project used before (issue 16).
VARIANTS = ("", "_windows", "_ud", "_windows_ud")


def corpus_variants() -> tuple[str, ...]:
    return tuple(base + v for base in CORPORA for v in VARIANTS if base != "litbank" or "_ud" not in v)


def parse_corpus(corpus: str) -> tuple[str, bool, str, str]:
    """``corpus`` -> (base corpus, all windows?, typing, name heads)."""
    for v in sorted(VARIANTS, key=len, reverse=True):
        base = corpus[: len(corpus) - len(v)] if v else corpus
        if corpus.endswith(v) and base in CORPORA and corpus in corpus_variants():
            ud = "_ud" in v
            return base, "_windows" in v, "upos" if ud else "ptb", "ud" if ud else "last"
    raise DataError(f"unknown coreference corpus {corpus!r}; known: {', '.join(corpus_variants())}")


DEFAULT_ENTITY_FIELDS = ("GRP", "etype", "infstat", "salience", "centering", "minspan", "link", "identity")
_BRACKET = re.compile(r"\(([^()]+)\)|\(([^()]+)|([^()]+)\)")


# ---- reading ---------------------------------------------------------------------------------------------------

def _parse_feats(text: str) -> dict:
    if text in ("_", ""):
        return {}
    return dict(kv.split("=", 1) for kv in text.split("|") if "=" in kv)


def _entity_value(misc: str) -> str | None:
    for item in misc.split("|"):
        if item.startswith("Entity="):
            return item[len("Entity="):]
    return None


def read_gum_document(path: str | Path, typing: str = "ptb", name_heads: str = "last") -> CorefDocument:
    """One GUM document: words, UD heads, FEATS and its coreference mentions (see the module doc). ``typing``:
    ``ptb`` (Clark's: types from the head's XPOS, see ``ptb_kind``) or ``upos`` (``mention_kind``);
    ``name_heads``: ``last`` (Clark's head rules: a flat name's last word, see ``name_head``) or ``ud``."""
    if typing not in TYPINGS or name_heads not in NAME_HEADS:
        raise DataError(f"unknown mention typing {typing!r} / name heads {name_heads!r} (known: {TYPINGS} / "
                        f"{NAME_HEADS})")
    path = Path(path)
    if not path.is_file():
        raise DataError(f"missing GUM document: {path}")
    text = read_text(path)
    fields = list(DEFAULT_ENTITY_FIELDS)
    doc_id = path.stem
    words, upos, feats, heads, sentence_starts = [], [], [], [], []
    xpos, deprels, where_of = [], [], []
    open_stack: list[tuple[str, int, str, str]] = []  # (entity, start, link, source)
    raw: list[tuple[int, int, str, str, str]] = []  # (start, end, entity, link, source)
    for start, lines in sentence_blocks(text):
        check_block(path, start, lines)
        base = len(words)
        sentence_starts.append(base)
        for offset, line in enumerate(lines):
            where = f"{path}:{start + offset}"
            if line.startswith("#"):
                key, _, value = line[1:].partition("=")
                if key.strip() == "global.Entity":
                    fields = value.strip().split("-")
                elif key.strip() == "newdoc id":
                    doc_id = value.strip()
                continue
            cols = line.split("\t")
            if not cols[0].isdigit():
                if _entity_value(cols[9]) is not None:
                    raise DataError(f"{where}: Entity= on a multiword-token or empty-node line is not supported")
                continue
            i = len(words)
            if int(cols[0]) != i - base + 1:
                raise DataError(f"{where}: word id {cols[0]} out of order (expected {i - base + 1})")
            words.append(cols[1])
            upos.append(cols[3])
            xpos.append(cols[4])
            deprels.append(cols[7])
            where_of.append(where)
            feats.append(_parse_feats(cols[5]))
            h = int(cols[6])
            heads.append(base + h - 1 if h > 0 else -1)
            value = _entity_value(cols[9])
            if value is not None:
                _parse_brackets(value, i, fields, open_stack, raw, where)
    if open_stack:
        ent, _, _, src = open_stack[-1]
        raise DataError(f"{src}: mention of entity {ent} is never closed (Entity= bracket)")
    if not words:
        raise DataError(f"{path}: no words found (empty or not CoNLL-U)")
    moved = [0]

    def head_of(s: int, e: int) -> int:
        h = span_head(s, e, heads)
        if name_heads == "last":
            h2 = name_head(h, s, e, heads, deprels)
            moved[0] += h2 != h
            h = h2
        return h

    def kind_of(h: int) -> str:
        if typing == "upos":
            return mention_kind(upos[h])
        if xpos[h] in ("_", ""):
            raise DataError(f"{where_of[h]}: head word {words[h]!r} of a mention has no XPOS (the ptb mention "
                            f"typing needs Penn tags; the corpus variants ending in _ud type by UPOS)")
        return ptb_kind(xpos[h])

    doc = build_document(doc_id, str(path), words, upos, feats, heads, sentence_starts, raw, head_of=head_of,
                          kind_of=kind_of)
    doc.typing, doc.name_heads, doc.n_name_heads_moved = typing, name_heads, moved[0]
    return doc


def _parse_brackets(value, i, fields, open_stack, raw, where) -> None:
    pos = 0
    link_at = fields.index("link") if "link" in fields else None
    for m in _BRACKET.finditer(value):
        if m.start() != pos:
            break
        pos = m.end()
        single, opening, closing = m.groups()
        desc = single or opening
        if desc is not None:
            parts = desc.split("-")
            entity = parts[0]
            if not entity or "[" in entity:
                raise DataError(f"{where}: unsupported Entity= bracket {desc!r} (discontinuous mentions are not read)")
            link = parts[link_at] if link_at is not None and len(parts) > link_at else ""
            if single is not None:
                raw.append((i, i + 1, entity, link, where))
            else:
                open_stack.append((entity, i, link, where))
        else:
            entity = closing
            for k in range(len(open_stack) - 1, -1, -1):
                if open_stack[k][0] == entity:
                    ent, s, link, src = open_stack.pop(k)
                    raw.append((s, i + 1, ent, link, src))
                    break
            else:
                raise DataError(f"{where}: Entity= closes {entity!r}, which is not open")
    if pos != len(value):
        raise DataError(f"{where}: malformed Entity= value {value!r} (CorefUD brackets expected)")


def corpus_data_paths(data_dir: Path, corpus: str) -> list[Path]:
    """The files and folders a pass over ``corpus`` reads, for the cache key and provenance (a folder stands for
    its CoNLL files, see ``hashing.data_files``)."""
    if parse_corpus(corpus)[0] == "litbank":
        litbank_files(data_dir)  # fail early, naming the folder, when it holds no LitBank files
        return [data_dir / LITBANK_DOCUMENTS]
    return [data_dir / GUM_DOCUMENTS] + [data_dir / p for p in SPLIT_FILES.values()]


def split_documents(data_dir: Path, split: str) -> list[str]:
    """GUM document ids of a split (:mod:`bertattn_bench.data.gum`: dev/test from the UD release, train the rest)."""
    if split in SPLIT_FILES:
        return gum.split_ids(data_dir, split)
    return [p.stem for p in gum.train_documents(data_dir)]


def load_documents(data_dir: Path, corpus: str, limit: int | None = None) -> list[CorefDocument]:
    """The documents of ``corpus`` (gum_dev, gum_test, gum_train, litbank, or a variant: ``parse_corpus``);
    ``limit`` = at most that many."""
    from ..base.settings import data_file

    base, _, typing, heads = parse_corpus(corpus)
    if base == "litbank":
        return [read_litbank_document(f) for f in litbank_files(data_dir)[:limit]]
    folder = data_file(data_dir, GUM_DOCUMENTS)
    ids = split_documents(data_dir, CORPORA[base])
    if limit is not None:
        ids = ids[:limit]
    return [read_gum_document(folder / f"{d}.conllu", typing, heads) for d in ids]


# ---- windows and baselines -------------------------------------------------------------------------------------

def _agree(a: dict, b: dict, upos_a: str, upos_b: str) -> bool:
    """Number, gender and person compatible (UD FEATS; an unmarked value agrees; non-pronouns are 3rd person)."""
    for key in ("Number", "Gender", "Person"):
        va, vb = a.get(key), b.get(key)
        if key == "Person":
            va = va or (None if upos_a == "PRON" else "3")
            vb = vb or (None if upos_b == "PRON" else "3")
        if va and vb and va != vb:
            return False
    return True


def _anaphors(doc: CorefDocument, mentions: list[Mention], offset: int) -> tuple[list[Anaphor], int]:
    """Anaphors of one window (mentions sorted by head word) with the three baselines' verdicts (Clark §4.3)."""
    lower = [w.lower() for w in doc.words]
    text = {m: tuple(lower[m.start:m.end]) for m in mentions}
    out, first = [], 0
    for j, m in enumerate(mentions):
        before = [c for c in mentions[:j] if c.head < m.head]
        antecedent_heads = sorted({c.head for c in before if c.entity == m.entity})
        if not antecedent_heads:
            first += 1
            continue
        nearest = before[-1]
        same_head = [c for c in before if lower[c.head] == lower[m.head]]
        rules = None
        for sieve in (lambda c: text[c] == text[m], lambda c: lower[c.head] == lower[m.head],
                      lambda c: _agree(doc.feats[c.head], doc.feats[m.head], doc.upos[c.head], doc.upos[m.head]),
                      lambda c: True):
            passing = [c for c in before if sieve(c)]
            if passing:
                rules = passing[-1]
                break
        out.append(Anaphor(
            head=m.head - offset, kind=m.kind, antecedent_heads=tuple(h - offset for h in antecedent_heads),
            nearest=nearest.entity == m.entity,
            head_word=bool(same_head) and same_head[-1].entity == m.entity,
            rules=rules.entity == m.entity, source=m.source))
    return out, first


def _add_window(doc: CorefDocument, s: int, e: int, windows: list, stats: WindowStats) -> None:
    inside = [m for m in doc.mentions if s <= m.start and m.end <= e]
    stats.n_cut_mentions += sum(1 for m in doc.mentions if m.start < e and m.end > s
                                and not (s <= m.start and m.end <= e))
    anaphors, first = _anaphors(doc, inside, s)
    stats.n_mentions += len(inside)
    stats.n_first += first
    windows.append(CorefWindow(doc.doc_id, s, doc.words[s:e], anaphors, len(inside)))


def _counted(docs: list[CorefDocument], stats: WindowStats):
    """``docs``, one by one, each one's dropped singletons and links added to ``stats`` (both window builders)."""
    for doc in docs:
        stats.n_singletons += doc.n_singletons
        stats.n_dropped_links += doc.n_dropped
        yield doc


def truncate_documents(docs: list[CorefDocument], tokenizer,
                       max_tokens: int = 128) -> tuple[list[CorefWindow], WindowStats]:
    """Clark §4.3 footnote 3: each document truncated to its first ``max_tokens`` pieces ([CLS]/[SEP] included),
    one window per document: its first words (whole words, the cut may fall inside a sentence) while they fit.
    Mentions that straddle the cut are counted in ``n_cut_mentions``; the rest of the document is not read."""
    windows, stats, budget = [], WindowStats(), max_tokens - 2
    for doc in _counted(docs, stats):
        used, e = 0, 0
        while e < len(doc.words):
            pieces = max(1, len(tokenizer.tokenize(doc.words[e])))
            if used + pieces > budget:
                break
            used, e = used + pieces, e + 1
        if e == 0:
            continue
        stats.n_sentences += sum(1 for s in doc.sentence_starts if s < e)
        _add_window(doc, 0, e, windows, stats)
    stats.n_windows = len(windows)
    return windows, stats


def make_windows(docs: list[CorefDocument], tokenizer, max_tokens: int = 128) -> tuple[list[CorefWindow], WindowStats]:
    """Non-overlapping windows of whole consecutive sentences, at most ``max_tokens`` pieces with [CLS]/[SEP]."""
    windows, stats, budget = [], WindowStats(), max_tokens - 2
    for doc in _counted(docs, stats):
        bounds = doc.sentence_starts + [len(doc.words)]
        spans: list[tuple[int, int]] = []  # word ranges of windows
        cur_start, cur_end, cur_pieces = None, None, 0
        for k in range(len(doc.sentence_starts)):
            s, e = bounds[k], bounds[k + 1]
            stats.n_sentences += 1
            pieces = sum(max(1, len(tokenizer.tokenize(w))) for w in doc.words[s:e])
            if pieces > budget:
                stats.n_skipped_sentences += 1
                stats.skipped_sources.append(f"{doc.path} sentence {k + 1}")
                if cur_start is not None:
                    spans.append((cur_start, cur_end))
                cur_start, cur_pieces = None, 0
                continue
            if cur_start is not None and cur_pieces + pieces <= budget:
                cur_end, cur_pieces = e, cur_pieces + pieces
            else:
                if cur_start is not None:
                    spans.append((cur_start, cur_end))
                cur_start, cur_end, cur_pieces = s, e, pieces
        if cur_start is not None:
            spans.append((cur_start, cur_end))
        for s, e in spans:
            _add_window(doc, s, e, windows, stats)
    stats.n_windows = len(windows)
    return windows, stats


__all__ = ["CORPORA", "VARIANTS", "corpus_variants", "parse_corpus", "read_gum_document", "split_documents",
           "load_documents", "corpus_data_paths", "truncate_documents", "make_windows"]
