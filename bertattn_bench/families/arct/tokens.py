"""Niven & Kao (the model-free arct family): the tokenisation variants the cue statistics are computed under."""
from __future__ import annotations

import re
from functools import lru_cache

from ...data.treebank import word_tokens

# ---- tokenisation variants -------------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def treebank_tokens(text: str) -> list[str]:
    """Penn Treebank tokens (NLTK ``word_tokenize``'s rules), lower-cased: "don't" → do n't, "cannot" → can not."""
    return list(_treebank_text(text))


@lru_cache(maxsize=None)
def _treebank_text(text: str) -> tuple[str, ...]:
    # memoised: every cue table (each split, "all" again, both Treebank variants) tokenizes the same warrants; each
    # sentence with NLTK's Penn Treebank word tokenizer (the one inside ``word_tokenize``)
    return tuple(t.lower() for s in _SENTENCE_END.split(text.strip()) if s for t in word_tokens(s))


_CLEAN_SUBS = [(re.compile(p), r) for p, r in (
    (r"what's", "what is "), (r"\'s", " "), (r"\'ve", " have "), (r"can't", "cannot "), (r"n't", " not "),
    (r"i'm", "i am "), (r"i’m", "i am"), (r"\'re", " are "), (r"\'d", " would "), (r"\'ll", " will "),
    (r",", " "), (r"\.", " "), (r"'", " "), (r"\s{2,}", " "), (r"\d+", ""), (r"[^a-z\d ]", ""))]


def _clean(token: str) -> str:
    """The per-token ``clean`` of the authors' ``util/text.py`` (IKMLab/arct2, paper era): lower-case, n't → not,
    punctuation and digits removed."""
    token = token.lower()
    for regexp, sub in _CLEAN_SUBS:
        token = regexp.sub(sub, token)
    return token.strip()


def treebank_clean_tokens(text: str) -> list[str]:
    """≈ the authors' ``util/text.tokenize``: Treebank tokens, each cleaned (n't → not); empty tokens dropped and a
    cleaned token holding a space ("what is") split."""
    return [w for t in treebank_tokens(text) for w in _clean(t).split()]


_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")


TOKENIZATIONS = {
    "whitespace": lambda text: text.lower().split(),  # punctuation stays attached ("not," is not "not")
    "regex_words": lambda text: _WORD.findall(text.lower()),  # letters/digits, contractions kept whole ("don't")
    "treebank": treebank_tokens,
    "treebank_clean": treebank_clean_tokens,
}
