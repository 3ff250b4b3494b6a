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

**LitBank** (corpus ``litbank``: all 100 files of ``litbank_coref/conll/``, there is no official split; see
``litbank_coref/SOURCE.md``) is CoNLL-2012 text: one token per line, the coreference column last (``(12``
opens a mention of entity 12, ``12)`` closes the latest open mention of 12, ``(12)`` is a one-word mention,
several joined by ``|``), a blank line between sentences, and no POS, lemma, parse or speaker columns. The same
conventions apply where they can (singletons dropped, same windows); what differs, since there is no tree and
no POS:

* Nothing is dropped as appositive/predicate: the CoNLL export carries a chain id only, so a copular or
  appositive link, if the export merged one into a chain, cannot be told apart (``n_dropped`` is 0).
* **Head word** (a heuristic, no tree): the last word of the mention before its first post-modifier marker —
  a preposition (``POSTMODIFIER_PREPOSITIONS``), a relative pronoun (who/whom/whose/which/that) or a comma, or
  ``--``/``;``/``:``/``(`` — looked for from the mention's second word on; else the mention's last word.
  Trailing punctuation and a possessive ``'s`` are skipped. "the man in the house who ..." → *man*; "Lincoln 's
  Inn Hall" → *Hall*; "her sister" → *sister*.
* **Type**: *pronoun* if the head word (lower-cased) is in ``PRONOUNS``: personal, possessive, reflexive and
  archaic second-person forms (I/me/my/mine/myself, thou/thee/thy/thine/thyself, ye, 'em, ...; not dialect
  spellings such as *yeh*/*yer*, which fall to nominal) and the demonstratives this/that/these/those: Penn
  PRP/PRP$ plus demonstrative NPs, what OntoNotes-era systems type as pronominal (indefinites such as *someone*
  and wh-words are not pronouns here, though GUM's UPOS PRON includes them; LitBank annotates personal pronouns
  only, so this hardly matters). *proper* if the head word is capitalised and not a pronoun, except that at an
  *initial position* (the first word with a letter or digit of a sentence, or a word right after a quote mark —
  straight quotes count, as they may open —, a dash or an opening bracket) capitalisation proves nothing: there
  the word is proper only if it also occurs in the document at a non-initial position and is capitalised at
  every such occurrence (a name seen only at initial positions counts as nominal). Otherwise *nominal*.
  LitBank is pronoun-heavy fiction: about 82% of the anaphors in its windows are pronouns (gum_dev: 61%).
* ``upos`` holds these guesses per word (PRON / PROPN / ``_``), and ``feats`` the agreement features the
  rule-based sieve reads: full Number/Gender/Person for the pronoun list (as UD gives them; *you*/*your* are
  unmarked for number), ``Number=Sing`` for a PROPN guess, and for other words ``Number=Plur`` when they end in
  ``s`` (not ``ss``/``us``/``is``/``'s``) or are an irregular plural (men, women, children, people, ...),
  else ``Number=Sing`` (a surface guess where GUM has the UD tagger's FEATS). ``heads`` is all -1 (no tree).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import DataError
from . import gum, read_text
from .gum import GUM_DOCUMENTS, SPLIT_FILES
from .ud import _blocks, _check_block

KINDS = ("pronoun", "proper", "nominal")
DROPPED_LINKS = ("appos", "pred")
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
LITBANK_DOCUMENTS = "litbank_coref/conll"
LITBANK_SUFFIX = ".conll"
DEFAULT_ENTITY_FIELDS = ("GRP", "etype", "infstat", "salience", "centering", "minspan", "link", "identity")
_BRACKET = re.compile(r"\(([^()]+)\)|\(([^()]+)|([^()]+)\)")


TYPINGS = ("ptb", "upos")
NAME_HEADS = ("last", "ud")


def mention_kind(upos: str) -> str:
    """Clark Table 2's mention types from the head word's UPOS (the ``upos`` typing, an alternative)."""
    return "pronoun" if upos == "PRON" else "proper" if upos == "PROPN" else "nominal"


def ptb_kind(xpos: str) -> str:
    """Clark Table 2's mention types from the head word's Penn tag (the default ``ptb`` typing, as on OntoNotes'
    PTB trees): PRP/PRP$ -> pronoun, NNP/NNPS -> proper, else nominal (so that/this/what/one, which UD tags PRON,
    are nominal, as are verb, numeral and adjective heads)."""
    return "pronoun" if xpos in ("PRP", "PRP$") else "proper" if xpos in ("NNP", "NNPS") else "nominal"


def name_head(h: int, start: int, end: int, heads: list[int], deprels: list[str]) -> int:
    """Clark's head rules on PTB trees take a name's last word ("John Smith" -> Smith); UD's ``flat`` makes the
    first word the head. For the ``last`` name heads: the last word of the span that attaches to ``h`` by
    ``flat`` (any subtype), else ``h`` itself."""
    flats = [i for i in range(start, end) if heads[i] == h and deprels[i].split(":")[0] == "flat"]
    return max([h] + flats)


@dataclass(frozen=True)
class Mention:
    """A mention over document word indices ``[start, end)``; ``head`` is a document word index."""

    start: int
    end: int
    entity: str
    head: int
    kind: str
    link: str = ""
    source: str = ""  # file:line of its opening bracket


@dataclass
class CorefDocument:
    doc_id: str
    path: str
    words: list[str]
    upos: list[str]
    feats: list[dict]
    heads: list[int]  # document word index of the syntactic head, -1 for a sentence root (all -1: LitBank)
    sentence_starts: list[int]  # document word index of each sentence's first word
    mentions: list[Mention]  # singletons and dropped link types removed, sorted by (head, start)
    n_singletons: int = 0
    n_dropped: int = 0  # appositive / predicate mentions
    typing: str = "ptb"  # how mention types were read (TYPINGS); LitBank: "heuristic"
    name_heads: str = "last"  # NAME_HEADS; LitBank: "heuristic"
    n_name_heads_moved: int = 0  # mentions whose head moved from a flat name's first word to its last


@dataclass(frozen=True)
class Anaphor:
    """A non-first mention in a window, with everything the head and the baselines need (window word indices)."""

    head: int
    kind: str
    antecedent_heads: tuple[int, ...]  # head words of the earlier mentions of the same entity in the window
    nearest: bool  # the nearest preceding mention is coreferent (Clark's "nearest other mention")
    head_word: bool  # the nearest preceding mention with the same (lower-cased) head word is coreferent
    rules: bool  # the 4-sieve rule-based system picks a coreferent mention
    source: str = ""


@dataclass
class CorefWindow:
    doc_id: str
    offset: int  # document word index of the window's first word
    words: list[str]
    anaphors: list[Anaphor]
    n_mentions: int


@dataclass
class WindowStats:
    n_windows: int = 0
    n_sentences: int = 0
    n_skipped_sentences: int = 0  # sentences longer than a window on their own
    n_cut_mentions: int = 0  # mentions that straddle a window boundary
    n_mentions: int = 0  # mentions inside windows
    n_first: int = 0  # mentions with no antecedent in their window (not scored)
    n_singletons: int = 0  # dropped: entities with one mention in their document
    n_dropped_links: int = 0  # dropped: appositive / predicate mentions
    skipped_sources: list[str] = field(default_factory=list)


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
    for start, lines in _blocks(text):
        _check_block(path, start, lines)
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

    doc = _build_document(doc_id, str(path), words, upos, feats, heads, sentence_starts, raw, head_of=head_of,
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


def span_head(start: int, end: int, heads: list[int]) -> int:
    """The span's syntactic head: the word whose head lies outside ``[start, end)``; the highest if several."""
    def depth(i: int) -> int:
        d = 0
        while heads[i] >= 0 and d < 1000:
            i, d = heads[i], d + 1
        return d

    outside = [i for i in range(start, end) if not start <= heads[i] < end]
    return min(outside, key=lambda i: (depth(i), i))


def _build_document(doc_id, path, words, upos, feats, heads, sentence_starts, raw, head_of=None,
                    kind_of=None) -> CorefDocument:
    """Drop singletons and appositive/predicate links; ``head_of(start, end)`` = a mention's head word (default:
    its UD syntactic head, ``span_head``); ``kind_of(head)`` its type (default: ``upos`` at the head)."""
    head_of = head_of or (lambda s, e: span_head(s, e, heads))
    kind_of = kind_of or (lambda h: mention_kind(upos[h]))
    sizes: dict[str, int] = {}
    for _, _, ent, link, _ in raw:
        if link not in DROPPED_LINKS:
            sizes[ent] = sizes.get(ent, 0) + 1
    mentions, singletons, dropped = [], 0, 0
    seen = set()
    for s, e, ent, link, src in raw:
        if link in DROPPED_LINKS:
            dropped += 1
            continue
        if sizes[ent] < 2:
            singletons += 1
            continue
        h = head_of(s, e)
        if (h, ent) in seen:  # nested mentions of one entity with one head word: one mention
            continue
        seen.add((h, ent))
        mentions.append(Mention(s, e, ent, h, kind_of(h), link, src))
    mentions.sort(key=lambda m: (m.head, m.start, -m.end))
    return CorefDocument(doc_id, path, words, upos, feats, heads, sentence_starts, mentions, singletons, dropped)


# ---- LitBank (CoNLL-2012 columns, no POS or tree: heuristics stated in the module doc) ----------------------

def _pron(number: str | None, gender: str | None, person: str | None, *forms: str) -> dict[str, dict]:
    f = {k: v for k, v in (("Number", number), ("Gender", gender), ("Person", person)) if v}
    return {w: f for w in forms}


PRONOUNS: dict[str, dict] = {  # closed list: lower-cased form -> UD-style agreement FEATS
    **_pron("Sing", None, "1", "i", "me", "my", "mine", "myself"),
    **_pron("Plur", None, "1", "we", "us", "our", "ours", "ourselves"),
    **_pron(None, None, "2", "you", "your", "yours"),
    **_pron("Sing", None, "2", "yourself", "thou", "thee", "thy", "thine", "thyself"),
    **_pron("Plur", None, "2", "yourselves", "ye"),
    **_pron("Sing", "Masc", "3", "he", "him", "his", "himself"),
    **_pron("Sing", "Fem", "3", "she", "her", "hers", "herself"),
    **_pron("Sing", "Neut", "3", "it", "its", "itself"),
    **_pron("Plur", None, "3", "they", "them", "their", "theirs", "themselves", "'em", "’em"),
    **_pron("Sing", None, None, "this", "that"),
    **_pron("Plur", None, None, "these", "those"),
}
POSTMODIFIER_PREPOSITIONS = frozenset(
    "of in on at with from to for by about into onto upon over under than like near beside between among "
    "through across along against without within behind before after during toward towards".split())
RELATIVE_PRONOUNS = frozenset(("who", "whom", "whose", "which", "that"))
_MARKER_PUNCT = frozenset((",", "--", "—", ";", ":", "("))
_OPENERS = frozenset(('"', "“", "‘", "'", "``", "`", "--", "—", "(", "["))
IRREGULAR_PLURALS = frozenset("men women children people feet teeth mice geese gentlemen gentlewomen "
                              "folk folks oxen brethren".split())
_LITBANK_COREF = re.compile(r"\((\d+)\)|\((\d+)|(\d+)\)")


def _has_alnum(word: str) -> bool:
    return any(ch.isalnum() for ch in word)


def litbank_head(words: list[str], start: int, end: int) -> int:
    """Head word of ``words[start:end]`` without a tree: the last word before the first post-modifier marker
    (preposition, relative pronoun, comma/dash/semicolon/colon/parenthesis; searched from the second word on),
    else the last word; trailing punctuation and a possessive 's are skipped."""
    stop = end
    for i in range(start + 1, end):
        w = words[i].lower()
        if w in POSTMODIFIER_PREPOSITIONS or w in RELATIVE_PRONOUNS or w in _MARKER_PUNCT:
            stop = i
            break
    for i in range(stop - 1, start - 1, -1):
        if _has_alnum(words[i]) and words[i].lower() not in ("'s", "’s"):
            return i
    return stop - 1 if stop > start else start


def _initial_positions(words: list[str], sentence_starts: list[int]) -> set[int]:
    """First word with a letter/digit of each sentence, and any word right after an opening quote or dash."""
    out = set()
    bounds = sentence_starts + [len(words)]
    for s, e in zip(bounds, bounds[1:]):
        first = next((i for i in range(s, e) if _has_alnum(words[i])), None)
        if first is not None:
            out.add(first)
        out.update(i for i in range(s + 1, e) if words[i - 1] in _OPENERS)
    return out


def _plural_surface(word: str) -> bool:
    w = word.lower()
    if w in IRREGULAR_PLURALS:
        return True
    return (len(w) > 2 and w.endswith("s") and not w.endswith(("ss", "us", "is", "'s", "’s"))
            and w.isalpha())


def guess_tags(words: list[str], sentence_starts: list[int]) -> tuple[list[str], list[dict]]:
    """Per word: a guessed UPOS (PRON / PROPN / ``_``) and agreement FEATS (see the module doc)."""
    initial = _initial_positions(words, sentence_starts)
    capitalised = lambda w: w[:1].isupper()  # noqa: E731
    non_initial: dict[str, list[bool]] = {}
    for i, w in enumerate(words):
        if i not in initial and _has_alnum(w):
            non_initial.setdefault(w.lower(), []).append(capitalised(w))
    upos, feats = [], []
    for i, w in enumerate(words):
        low = w.lower()
        if low in PRONOUNS:
            upos.append("PRON")
            feats.append(dict(PRONOUNS[low]))
            continue
        if capitalised(w) and (i not in initial or all(non_initial.get(low, [False]))):
            upos.append("PROPN")
            feats.append({"Number": "Sing"})
            continue
        upos.append("_")
        feats.append({"Number": "Plur" if _plural_surface(w) else "Sing"} if _has_alnum(w) else {})
    return upos, feats


def read_litbank_document(path: str | Path) -> CorefDocument:
    """One LitBank CoNLL-2012 file: words, sentence breaks and coreference mentions (see the module doc)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"missing LitBank document: {path}")
    doc_id = path.name[: -len(LITBANK_SUFFIX)] if path.name.endswith(LITBANK_SUFFIX) else path.stem
    words: list[str] = []
    sentence_starts: list[int] = []
    open_mentions: list[tuple[str, int, str]] = []  # (entity, start, source)
    raw: list[tuple[int, int, str, str, str]] = []  # (start, end, entity, link, source)
    new_sentence = True
    for number, line in enumerate(read_text(path).splitlines(), 1):
        where = f"{path}:{number}"
        if not line.strip():
            new_sentence = True
            continue
        if line.startswith("#"):
            if line.startswith("#begin document"):
                doc_id = line[len("#begin document"):].split(";")[0].strip().strip("()") or doc_id
            new_sentence = True
            continue
        cols = line.split("\t")
        if len(cols) < 5:
            raise DataError(f"{where}: {len(cols)} tab-separated column(s), expected CoNLL-2012 (document, part, "
                            f"token index, token, ..., coreference last)")
        if new_sentence:
            sentence_starts.append(len(words))
            new_sentence = False
        i = len(words)
        words.append(cols[3])
        value = cols[-1].strip()
        if value in ("", "-", "_"):
            continue
        for item in value.split("|"):
            m = _LITBANK_COREF.fullmatch(item)
            if m is None:
                raise DataError(f"{where}: malformed coreference value {value!r} (CoNLL-2012 '(12', '12)', "
                                f"'(12)', joined by '|', expected)")
            single, opening, closing = m.groups()
            if single is not None:
                raw.append((i, i + 1, single, "", where))
            elif opening is not None:
                open_mentions.append((opening, i, where))
            else:
                for k in range(len(open_mentions) - 1, -1, -1):
                    if open_mentions[k][0] == closing:
                        ent, s, src = open_mentions.pop(k)
                        raw.append((s, i + 1, ent, "", src))
                        break
                else:
                    raise DataError(f"{where}: coreference bracket closes entity {closing!r}, which is not open")
    if open_mentions:
        ent, _, src = open_mentions[-1]
        raise DataError(f"{src}: mention of entity {ent} is never closed (coreference column)")
    if not words:
        raise DataError(f"{path}: no tokens found (empty or not CoNLL-2012)")
    upos, feats = guess_tags(words, sentence_starts)
    heads = [-1] * len(words)
    doc = _build_document(doc_id, str(path), words, upos, feats, heads, sentence_starts, raw,
                          head_of=lambda s, e: litbank_head(words, s, e))
    doc.typing = doc.name_heads = "heuristic"
    return doc


def litbank_files(data_dir: Path) -> list[Path]:
    """The LitBank CoNLL-2012 files (sorted by name)."""
    from ..base.settings import data_file

    folder = data_file(data_dir, LITBANK_DOCUMENTS)
    files = sorted(folder.glob(f"*{LITBANK_SUFFIX}"))
    if not files:
        raise DataError(f"{folder}: no *{LITBANK_SUFFIX} files (LitBank's coref/conll folder expected)")
    return files


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


__all__ = ["KINDS", "CORPORA", "VARIANTS", "corpus_variants", "parse_corpus", "truncate_documents", "ptb_kind",
           "name_head", "PRONOUNS", "Mention", "CorefDocument", "Anaphor", "CorefWindow", "WindowStats",
           "read_gum_document", "read_litbank_document", "litbank_head", "guess_tags", "load_documents",
           "split_documents", "corpus_data_paths", "make_windows", "span_head", "mention_kind"]
