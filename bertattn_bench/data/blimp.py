"""BLiMP's six subject-verb agreement paradigms (Warstadt et al. 2020; ``blimp_agreement/``, its SOURCE.md) as a
verb-number task: the sentence prefix up to the verb, labelled with the grammatical number of the good verb (the task
of Abnar & Zuidema 2020, Tables 1-2, after Linzen et al. 2016).

Per pair (one JSON object a line):

* ``one_prefix`` paradigms (``one_prefix_prefix``, the good and the bad verb): the label from the good/bad verb pair.
  Their first words are compared (``works with`` / ``work with``): an auxiliary pair of opposite numbers
  (:data:`AUXILIARIES`: is/are, was/were, has/have, does/do and their n't forms) gives the good one's number;
  otherwise good = bad + ``s``/``es`` (``y`` -> ``ies``) is singular, bad = good + ``s``/``es`` plural; anything else
  (``sing``/``singing``) is unlabelled.
* ``two_prefix`` paradigms (two prefixes, good and bad, differing in the subject noun; one verb): the verb's own form
  (an auxiliary's number; else third-person ``-s``, not ``-ss``/``-us``/``-is``: singular; else plural), checked
  against the noun pair where the nouns are regular (good noun = bad noun + ``s``: plural subject): where the two
  disagree (BLiMP's generator left a few pairs such as *The girls irritates Karen.* marked good) the pair is
  unlabelled.

Unlabelled pairs are dropped and counted (:attr:`Agreement.dropped`). The split is by pair id, deterministic:
the distractor paradigms (an attractor noun between subject and verb) are the hard test set; of the four others a
pair whose ``pairID`` is ``= 0 (mod 5)`` is test, the rest train.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import DataError
from .json_lines import json_objects

BLIMP_DIR = "blimp_agreement"
DISTRACTOR = ("distractor_agreement_relational_noun", "distractor_agreement_relative_clause")
SIMPLE = ("regular_plural_subject_verb_agreement_1", "regular_plural_subject_verb_agreement_2",
          "irregular_plural_subject_verb_agreement_1", "irregular_plural_subject_verb_agreement_2")
PARADIGMS = SIMPLE + DISTRACTOR
FILES = {p: f"{BLIMP_DIR}/{p}.jsonl" for p in PARADIGMS}
LABELS = ("singular", "plural")  # label ids 0 and 1
TEST_EVERY = 5  # a simple paradigm's pair is test when int(pairID) % TEST_EVERY == 0

AUXILIARIES = {w: n for sg, pl in (("is", "are"), ("was", "were"), ("has", "have"), ("does", "do"))
               for w, n in ((sg, 0), (pl, 1), (sg + "n't", 0), (pl + "n't", 1))}
AUXILIARIES["don't"] = 1  # do + n't


@dataclass(frozen=True)
class VerbNumber:
    """One labelled prefix: ``label`` 0 singular, 1 plural (of the good verb)."""

    paradigm: str
    pair_id: str
    prefix: str
    verb: str
    label: int

    @property
    def distractor(self) -> bool:
        return self.paradigm in DISTRACTOR


@dataclass
class Agreement:
    """The task's splits and what was dropped: ``dropped`` paradigm -> count of unlabelled pairs."""

    train: list[VerbNumber]
    test: list[VerbNumber]
    hard: list[VerbNumber]  # the distractor paradigms' pairs (attractor nouns)
    dropped: Counter = field(default_factory=Counter)


def _suffixed(longer: str, shorter: str) -> bool:
    """``longer`` is ``shorter`` with a plural/third-person ``-s``: + s, + es, or y -> ies."""
    return longer in (shorter + "s", shorter + "es") or (shorter.endswith("y") and longer == shorter[:-1] + "ies")


def pair_number(good: str, bad: str) -> int | None:
    """The number (0 singular, 1 plural) of the good verb of a good/bad verb pair, or None (module docstring)."""
    g, b = (good.split() or [""])[0].lower(), (bad.split() or [""])[0].lower()
    if g in AUXILIARIES and b in AUXILIARIES and AUXILIARIES[g] != AUXILIARIES[b]:
        return AUXILIARIES[g]
    if _suffixed(g, b):
        return 0
    if _suffixed(b, g):
        return 1
    return None


def verb_form_number(verb: str) -> int:
    """The number a verb form shows by itself: an auxiliary's, else third-person -s singular, else plural."""
    v = (verb.split() or [""])[0].lower()
    if v in AUXILIARIES:
        return AUXILIARIES[v]
    return 0 if v.endswith("s") and not v.endswith(("ss", "us", "is")) else 1


def noun_number(good_prefix: str, bad_prefix: str) -> int | None:
    """The good subject's number from the two prefixes' last words where the nouns are regular, else None."""
    g, b = (good_prefix.split() or [""])[-1].lower(), (bad_prefix.split() or [""])[-1].lower()
    if _suffixed(g, b):
        return 1
    if _suffixed(b, g):
        return 0
    return None


def _text(obj: dict, key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: '{key}' must be a non-empty string, got {value!r}")
    return value.strip()


def read_paradigm(path: Path) -> tuple[list[VerbNumber], int]:
    """(labelled prefixes, unlabelled pairs) of one paradigm file; a malformed line is a DataError naming the file
    and the line."""
    out, dropped = [], 0
    for where, obj in json_objects(path):
        paradigm, pair_id = _text(obj, "UID", where), _text(obj, "pairID", where)
        if not pair_id.isdigit():
            raise DataError(f"{where}: 'pairID' must be a number, got {pair_id!r}")
        if "one_prefix_prefix" in obj:
            prefix, verb = _text(obj, "one_prefix_prefix", where), _text(obj, "one_prefix_word_good", where)
            label = pair_number(verb, _text(obj, "one_prefix_word_bad", where))
        elif "two_prefix_prefix_good" in obj:
            prefix, verb = _text(obj, "two_prefix_prefix_good", where), _text(obj, "two_prefix_word", where)
            label = verb_form_number(verb)
            noun = noun_number(prefix, _text(obj, "two_prefix_prefix_bad", where))
            if noun is not None and noun != label:
                label = None
        else:
            raise DataError(f"{where}: missing key(s): neither 'one_prefix_prefix' nor 'two_prefix_prefix_good'")
        if label is None:
            dropped += 1
        else:
            out.append(VerbNumber(paradigm, pair_id, prefix, verb, label))
    if not out and not dropped:
        raise DataError(f"{path}: no pairs (an empty file)")
    return out, dropped


def agreement(data_dir: Path) -> Agreement:
    """The six paradigms as the task's splits (module docstring)."""
    from ..base.settings import data_file

    result = Agreement([], [], [])
    for paradigm in PARADIGMS:
        items, dropped = read_paradigm(data_file(data_dir, FILES[paradigm]))
        result.dropped[paradigm] = dropped
        for item in items:
            if paradigm in DISTRACTOR:
                result.hard.append(item)
            elif int(item.pair_id) % TEST_EVERY == 0:
                result.test.append(item)
            else:
                result.train.append(item)
    return result
