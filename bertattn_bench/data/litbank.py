"""**LitBank** (corpus ``litbank``: all 100 files of ``litbank_coref/conll/``, there is no official split; see
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
from pathlib import Path

from ..base.errors import DataError
from . import read_text
from .coref_documents import CorefDocument, build_document

LITBANK_DOCUMENTS = "litbank_coref/conll"
LITBANK_SUFFIX = ".conll"


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
    doc = build_document(doc_id, str(path), words, upos, feats, heads, sentence_starts, raw,
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
