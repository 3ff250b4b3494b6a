"""Penn-Treebank word tokens: NLTK's ``NLTKWordTokenizer``, the tokenizer inside ``word_tokenize`` (the Kovaleva
FrameNet notebook's ``word_tokenize(..., preserve_line=True)``, Niven & Kao's cue statistics per sentence).

NLTK's own rules, read from its class at first use, run with the standard library's ``re``: NLTK 3.10 routes every
pattern through ``nltk.redos`` (the third-party ``regex`` engine under a wall-clock timeout, a guard against
attacker-supplied patterns), about twice the time on these fixed patterns (FrameNet's notebook set: 42,596 calls).
The tokens equal NLTK's: tested against ``NLTKWordTokenizer`` itself on fuzzed text and on the ARCT corpus, and
checked once on every FrameNet exemplar and frame-element span (docs/speed.md, stop 57). Memoised: the callers
tokenize the same sentences and spans many times."""
from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=None)
def word_tokens(text: str) -> tuple[str, ...]:
    """``nltk.word_tokenize(text, preserve_line=True)``: no sentence splitting (its Punkt model is a download);
    opening quotes become ``\\`\\```, closing ones ``''``; clitics ('s, n't, 'll ...) and punctuation split off."""
    return tuple(_tokenizer().tokenize(text))


def _plain(rx) -> re.Pattern:
    """A pattern of NLTK's (``nltk.redos.TimedPattern`` over a ``regex`` pattern, or a ``re.Pattern`` before NLTK
    3.10) as a ``re.Pattern`` with the same source and the flags both engines share."""
    if isinstance(rx, re.Pattern):
        return rx
    import regex

    flags = 0
    for name in ("IGNORECASE", "MULTILINE", "DOTALL", "VERBOSE", "ASCII"):
        if rx.flags & getattr(regex, name):
            flags |= getattr(re, name)
    return re.compile(rx.pattern, flags)


@lru_cache(maxsize=1)
def _tokenizer():
    from nltk.tokenize.destructive import NLTKWordTokenizer

    rules: dict = {}
    for name in ("STARTING_QUOTES", "PUNCTUATION", "ENDING_QUOTES", "CONVERT_PARENTHESES"):
        rules[name] = [(_plain(rx), sub) for rx, sub in getattr(NLTKWordTokenizer, name)]
    for name in ("PARENS_BRACKETS", "DOUBLE_DASHES"):
        rx, sub = getattr(NLTKWordTokenizer, name)
        rules[name] = (_plain(rx), sub)
    for name in ("CONTRACTIONS2", "CONTRACTIONS3"):
        rules[name] = [_plain(rx) for rx in getattr(NLTKWordTokenizer, name)]
    return type("StdlibReWordTokenizer", (NLTKWordTokenizer,), rules)()
