"""Penn-Treebank word tokens (bertattn_bench/data/treebank.py): NLTK's own rules on the standard library's ``re``
must give NLTK's ``NLTKWordTokenizer`` tokens, on fuzzed text built from the characters its rules act on and on
the ARCT corpus."""
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nltk.tokenize.destructive import NLTKWordTokenizer
from shared_data import prepared_data

from bertattn_bench.data import treebank

NLTK = NLTKWordTokenizer()

# what the rules look at: quotes of every kind, clitics, brackets, dashes, dots, currency, digits, spaces
PIECES = ["'", '"', "``", "''", "`", "‘", "’", "“", "”", "«", "»", "'s", "'S", "n't", "N'T", "'ll", "'re", "'ve", "'d",
          "'m", "cannot", "gonna", "gimme", "wanna ", "'tis", " 'twas", "d'ye", "more'n", "(", ")", "[", "]", "{", "}",
          "<", ">", "--", "-", "...", ".", ",", ";", ":", "?", "!", "@", "#", "$", "%", "&", "*", "+", "=", "/", "\\",
          "|", "~", "^", "3,000", "3.88", "42", " ", "  ", "\t", "\n", "Mr.", "U.S.", "a", "Don", "they", "can", "won"]
FUZZ = settings(max_examples=300, derandomize=True, deadline=None, database=None, print_blob=False,
                suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=3), max_size=25).map("".join))
def test_tokens_equal_nltks_on_fuzzed_text(text):
    assert list(treebank.word_tokens(text)) == NLTK.tokenize(text)


@pytest.mark.parametrize("text", ['She said "hi" to me.', "He can't go, I cannot stay: 3,000 left...",
                                  "' Starchitects ' are ruining cities", "(a pug) -- barks 'tis gonna"])
def test_tokens_equal_nltks_on_examples(text):
    assert list(treebank.word_tokens(text)) == NLTK.tokenize(text)


def test_every_rule_is_a_stdlib_pattern_with_nltks_source():
    tok = treebank._tokenizer()
    for name in ("STARTING_QUOTES", "PUNCTUATION", "ENDING_QUOTES", "CONTRACTIONS2", "CONTRACTIONS3"):
        ours, theirs = getattr(tok, name), getattr(NLTKWordTokenizer, name)
        assert len(ours) == len(theirs) > 0
        for a, b in zip(ours, theirs):
            a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
            assert isinstance(a, re.Pattern) and a.pattern == b.pattern
    assert treebank._plain(re.compile("x", re.I)).flags & re.I


def test_tokens_equal_nltks_on_the_arct_corpus():
    files = sorted((prepared_data("arct_original/train-full.txt") / "arct_original").glob("*-full.txt"))
    texts = {part for f in files for line in f.read_text(encoding="utf-8").splitlines() for part in line.split("\t")}
    differ = [t for t in texts if list(treebank.word_tokens(t)) != NLTK.tokenize(t)]
    assert len(texts) > 1000 and differ == []
