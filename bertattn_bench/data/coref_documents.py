"""The coreference document model shared by the GUM and LitBank readers (:mod:`.coref_corpus`, :mod:`.litbank`):
mentions, documents, anaphors and windows, a mention's head word and its type (Clark Table 2), and the one place
that drops singletons and appositive/predicate links (``build_document``; the conventions: :mod:`.coref_corpus`)."""
from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("pronoun", "proper", "nominal")
DROPPED_LINKS = ("appos", "pred")
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


def span_head(start: int, end: int, heads: list[int]) -> int:
    """The span's syntactic head: the word whose head lies outside ``[start, end)``; the highest if several."""
    def depth(i: int) -> int:
        d = 0
        while heads[i] >= 0 and d < 1000:
            i, d = heads[i], d + 1
        return d

    outside = [i for i in range(start, end) if not start <= heads[i] < end]
    return min(outside, key=lambda i: (depth(i), i))


def build_document(doc_id, path, words, upos, feats, heads, sentence_starts, raw, head_of=None,
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
