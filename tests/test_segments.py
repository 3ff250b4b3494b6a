"""Clark §3 segments: the authors' packing/splitting/truncation (preprocess_unlabeled.py), token types, options.

Hand-made sentences with known piece counts and scripted random draws, plus a differential check against the
authors' own ``prep_document`` (copied verbatim below, MIT licence, Copyright (c) 2020 Kevin Clark).
"""
import random

import pytest

from bertattn_bench.base.errors import DataError
from bertattn_bench.data import segments as S
from bertattn_bench.engine.batching import encode_pair, encode_piece_pair

# ---- the authors' code, verbatim (clarkkev/attention-analysis b609cfc, preprocess_unlabeled.py l.13-86) -------

def authors_prep_document(document, max_sequence_length):
  max_num_tokens = max_sequence_length - 3
  target_seq_length = max_num_tokens
  instances = []
  current_chunk = []
  current_length = 0
  i = 0
  while i < len(document):
    segment = document[i]
    current_chunk.append(segment)
    current_length += len(segment)
    if i == len(document) - 1 or current_length >= target_seq_length:
      if current_chunk:
        a_end = 1
        if len(current_chunk) >= 2:
          a_end = random.randint(1, len(current_chunk) - 1)
        tokens_a = []
        for j in range(a_end):
          tokens_a.extend(current_chunk[j])
        tokens_b = []
        for j in range(a_end, len(current_chunk)):
          tokens_b.extend(current_chunk[j])
        authors_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, random)
        if len(tokens_a) == 0 or len(tokens_b) == 0:
          break
        tokens = []
        tokens.append("[CLS]")
        for token in tokens_a:
          tokens.append(token)
        tokens.append("[SEP]")
        for token in tokens_b:
          tokens.append(token)
        tokens.append("[SEP]")
        instances.append(tokens)
      current_chunk = []
      current_length = 0
    i += 1
  return instances


def authors_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  while True:
    total_length = len(tokens_a) + len(tokens_b)
    if total_length <= max_num_tokens:
      break
    trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    assert len(trunc_tokens) >= 1
    if rng.random() < 0.5:
      del trunc_tokens[0]
    else:
      trunc_tokens.pop()


# ---- helpers --------------------------------------------------------------------------------------------------

class Scripted(random.Random):
    """randint and random return scripted values (and record the calls)."""

    def __init__(self, randints=(), randoms=()):
        super().__init__(0)
        self.randints, self.randoms, self.calls = list(randints), list(randoms), []

    def randint(self, a, b):
        self.calls.append(("randint", a, b))
        return self.randints.pop(0)

    def random(self):
        self.calls.append(("random",))
        return self.randoms.pop(0)


def sentence(start, n):
    """n distinct 'pieces' (ints) so that order and truncation are visible."""
    return list(range(start, start + n))


# ---- packing, splitting, truncation ---------------------------------------------------------------------------

def test_truncate_removes_from_the_longer_side_front_or_back():
    a, b = [1, 2, 3, 4, 5], [6, 7]
    rng = Scripted(randoms=[0.1, 0.9])  # front, then back
    assert S.truncate_seq_pair(a, b, 5, rng) == 2
    assert a == [2, 3, 4] and b == [6, 7]
    a, b = [1, 2], [3, 4]  # a tie truncates B (the authors' `>`)
    assert S.truncate_seq_pair(a, b, 3, Scripted(randoms=[0.9])) == 1
    assert a == [1, 2] and b == [3]


def test_pack_document_chunks_split_and_truncate_by_hand():
    # budget 10: sentences of 4, 4, 3 pieces reach 11 >= 10 -> one chunk of three sentences, split after the
    # first (randint -> 1): A = 4 pieces, B = 7 -> B (longer) loses one piece at its back (random 0.7 >= 0.5)
    doc = [sentence(0, 4), sentence(10, 4), sentence(20, 3), sentence(30, 2), sentence(40, 2)]
    rng = Scripted(randints=[1, 1], randoms=[0.7])
    segs, dropped = S.pack_document(doc, 10, rng)
    assert rng.calls[:2] == [("randint", 1, 2), ("random",)]
    first = segs[0]
    assert first.a == [0, 1, 2, 3] and first.b == [10, 11, 12, 13, 20, 21] and first.truncated == 1
    assert first.n_sentences == 3
    # the document's end closes the last chunk (2 + 2 pieces < 10): split 1 | 1, nothing to truncate
    assert segs[1].a == [30, 31] and segs[1].b == [40, 41] and segs[1].truncated == 0
    assert dropped == 0 and len(segs) == 2


def test_one_sentence_chunk_ends_the_document_as_the_authors_break():
    # the 2nd chunk is one sentence of 12 >= 10 pieces: B is empty -> that sentence and the rest are dropped
    doc = [sentence(0, 5), sentence(10, 6), sentence(20, 12), sentence(40, 3), sentence(50, 3)]
    # the dropped chunk is still truncated first (12 > 10: two draws), as the authors' code does before its check
    rng = Scripted(randints=[1], randoms=[0.2, 0.9, 0.9])
    segs, dropped = S.pack_document(doc, 10, rng)
    assert rng.calls == [("randint", 1, 1), ("random",), ("random",), ("random",)]
    assert len(segs) == 1 and dropped == 3
    assert segs[0].a == [0, 1, 2, 3, 4] and segs[0].b == [11, 12, 13, 14, 15]  # B lost its front piece
    # a document whose last sentence is left alone drops that one sentence
    segs, dropped = S.pack_document([sentence(0, 6), sentence(10, 6), sentence(20, 2)], 10, Scripted(randints=[1],
                                    randoms=[0.9, 0.9]))
    assert len(segs) == 1 and dropped == 1


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_pack_document_equals_the_authors_code(seed):
    """Same draws in the same order as the authors' prep_document (global random seeded the same)."""
    gen = random.Random(100 + seed)
    docs = [[sentence(1000 * d + 10 * i, gen.randint(1, 40)) for i in range(gen.randint(1, 30))] for d in range(20)]
    random.seed(seed)
    expected = [authors_prep_document(d, 128) for d in docs]
    rng = random.Random(seed)
    ours = [S.pack_document(d, 125, rng)[0] for d in docs]
    flat = lambda segs: [["[CLS]", *s.a, "[SEP]", *s.b, "[SEP]"] for s in segs]  # noqa: E731
    assert [flat(o) for o in ours] == expected
    assert sum(len(e) for e in expected) > 20  # the documents did produce segments (and some were truncated)
    assert any(s.truncated for o in ours for s in o)


# ---- corpus level: cap, order, shuffle, token types, accounting ------------------------------------------------

def _docs(tmp_path, n_docs=6, sentences_per_doc=12):
    """Documents of sentences 'wN wN ... .' whose words are single word pieces (digits are one piece each)."""
    docs = []
    for d in range(n_docs):
        paras = [S.Paragraph(10 * d + i + 1, "", [" ".join(["the"] * (3 + (i * 7 + d) % 9)) + " ."])
                 for i in range(sentences_per_doc)]
        docs.append(S.Document(tmp_path / f"doc{d}", paras))
    return docs


def test_authors_segments_cap_shuffle_layout_and_zero_token_types(tokenizer, tmp_path):
    docs = _docs(tmp_path)
    full = S.authors_segments(docs, tokenizer, max_tokens=24, n_segments=10_000)
    capped = S.authors_segments(docs, tokenizer, max_tokens=24, n_segments=5)
    assert len(capped.encoded) == 5
    # the cap takes the first segments in file order (then shuffles): same sources as the uncapped run's first 5
    in_order = sorted(full.sources, key=lambda s: (s.split(":")[0], int(s.split(":")[1])))
    assert sorted(capped.sources, key=lambda s: (s.split(":")[0], int(s.split(":")[1]))) == in_order[:5]
    assert capped.sources != sorted(capped.sources, key=lambda s: (s.split(":")[0], int(s.split(":")[1])))  # shuffled
    assert f"the first 5 of {len(full.encoded)} segments" in capped.description
    for e in full.encoded:
        ids = e.input_ids
        assert len(ids) <= 24
        assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        assert ids.count(tokenizer.sep_token_id) == 2 and ids.count(tokenizer.cls_token_id) == 1
        assert e.token_type_ids == [0] * len(ids)  # extract_attention.py l.30
    assert max(len(e.input_ids) for e in full.encoded) == 24  # packed to the budget, truncated to fit


def test_authors_segments_are_seeded_and_deterministic(tokenizer, tmp_path):
    docs = _docs(tmp_path)
    a = S.authors_segments(docs, tokenizer, max_tokens=24, seed=0)
    b = S.authors_segments(docs, tokenizer, max_tokens=24, seed=0)
    c = S.authors_segments(docs, tokenizer, max_tokens=24, seed=1)
    assert [e.input_ids for e in a.encoded] == [e.input_ids for e in b.encoded]
    assert [e.input_ids for e in a.encoded] != [e.input_ids for e in c.encoded]


def test_types01_option_marks_b_with_one(tokenizer, tmp_path):
    s = S.authors_segments(_docs(tmp_path), tokenizer, max_tokens=24, token_types="ab")
    for e in s.encoded:
        first_sep = e.input_ids.index(tokenizer.sep_token_id)
        assert e.token_type_ids == [0] * (first_sep + 1) + [1] * (len(e.input_ids) - first_sep - 1)


def test_dropped_sentences_are_counted(tokenizer, tmp_path):
    # budget 21: sentences of 12 + 12 pieces close a chunk; the next, 30 pieces, is a chunk of its own -> break
    long, twelve = " ".join(["the"] * 30), " ".join(["the"] * 11) + " ."
    doc = S.Document(tmp_path / "d", [S.Paragraph(i + 1, "", [t]) for i, t in
                                      enumerate([twelve, twelve, long, "the .", "the the ."])])
    s = S.authors_segments([doc], tokenizer, max_tokens=24)
    assert len(s.encoded) == 1 and s.skipped.n == 3
    assert "3 sentence(s) dropped in 1 document(s)" in s.skipped.describe()


def test_encode_piece_pair_and_encode_pair_token_types(tokenizer):
    e = encode_piece_pair(tokenizer, 3, [7, 8], [9], "zeros")
    assert e.input_ids == [tokenizer.cls_token_id, 7, 8, tokenizer.sep_token_id, 9, tokenizer.sep_token_id]
    assert e.token_type_ids == [0] * 6 and e.index == 3
    assert encode_piece_pair(tokenizer, 0, [7, 8], [9], "ab").token_type_ids == [0, 0, 0, 0, 1, 1]
    ab, zeros = encode_pair(tokenizer, 0, "the cat", "sat"), encode_pair(tokenizer, 0, "the cat", "sat", "zeros")
    assert ab.input_ids == zeros.input_ids and ab.token_type_ids == [0, 0, 0, 0, 1, 1] and set(zeros.token_type_ids) == {0}
    with pytest.raises(ValueError, match="token_types='bogus'"):
        encode_pair(tokenizer, 0, "a", "b", "bogus")
    with pytest.raises(ValueError, match="A and B must both"):
        encode_piece_pair(tokenizer, 0, [], [9])


# ---- WikiText reading and the named options --------------------------------------------------------------------

def test_split_wikitext_sentences():
    text = 'He won in 2000 . It was a U.S. film , released by Warner Bros. in 2001 ! " Why ? " he asked . the end'
    assert S.split_wikitext_sentences(text) == [
        "He won in 2000 .", "It was a U.S. film , released by Warner Bros. in 2001 !", '" Why ? " he asked . the end']


WIKI = """ = First Article = 
 Alpha beta gamma . Delta epsilon zeta .
 = = Section = = 
 Eta theta @-@ iota . Kappa lambda .
 = Second Article = 
 Mu nu xi . Omicron pi rho .
"""


@pytest.fixture
def wiki_dir(tmp_path):
    (tmp_path / "wikitext2_raw").mkdir()
    (tmp_path / "wikitext2_raw" / "wiki.test.raw").write_text(WIKI, encoding="utf-8")
    return tmp_path


def test_wikitext_documents_split_articles_drop_headings_detokenise(wiki_dir):
    docs = S.wikitext_documents(wiki_dir / "wikitext2_raw" / "wiki.test.raw")
    assert [len(d.paragraphs) for d in docs] == [2, 1]
    assert docs[0].paragraphs[1].sentences == ["Eta theta-iota .", "Kappa lambda ."]
    assert docs[0].paragraphs[1].line == 4


def test_named_options_reach_the_recipe(wiki_dir, tokenizer):
    authors = S.load_segment_set(wiki_dir, "wikitext2", tokenizer)
    pairs = S.load_segment_set(wiki_dir, "wikitext2_pairs", tokenizer)
    pairs0 = S.load_segment_set(wiki_dir, "wikitext2_pairs_types0", tokenizer)
    # authors': one chunk per article (the document ends before 125 pieces), split at a sentence boundary
    assert len(authors.encoded) == 2 and set(authors.encoded[0].token_type_ids) == {0}
    assert "Clark's segments" in authors.description and authors.description.startswith("wikitext2_raw/wiki.test.raw")
    # pairs: article 1's two paragraphs are one pair; article 2 has one paragraph (no pair)
    assert len(pairs.encoded) == 1 and set(pairs.encoded[0].token_type_ids) == {0, 1}
    assert pairs.encoded[0].input_ids == pairs0.encoded[0].input_ids and set(pairs0.encoded[0].token_type_ids) == {0}
    assert S.load_segment_set(wiki_dir, "wikitext2", tokenizer, limit=1).encoded[0].input_ids in \
        [e.input_ids for e in authors.encoded]
    with pytest.raises(DataError, match="unknown segment corpus 'wikitext3'.*wikitext2_pairs"):
        S.load_segment_set(wiki_dir, "wikitext3", tokenizer)
    assert set(S.CORPORA) == {f"{s}{x}" for s in S.SOURCES for x in ("", "_types01", "_pairs", "_pairs_types0")}


def _roberta_like_tokenizer():
    """A RoBERTa/MPNet-style fast tokenizer built offline: pairs are ``<s> A </s></s> B </s>``, no token types."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4, "b": 5, "cat": 6, "dog": 7}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", pad_token="<pad>", unk_token="<unk>")


def test_piece_pairs_are_laid_out_as_the_tokenizer_lays_out_pairs(tokenizer):
    """Issue 25: pairs come from the tokenizer, never a hard-coded [CLS] A [SEP] B [SEP]: RoBERTa-like tokenizers
    give <s> A </s></s> B </s>, BERT's [CLS] A [SEP] B [SEP] with types 0/1 as its own pair encoding."""
    rob = _roberta_like_tokenizer()
    e = encode_piece_pair(rob, 0, [6, 7], [4], "ab")
    assert e.input_ids == [0, 6, 7, 2, 2, 4, 2]
    assert e.input_ids == rob("cat dog", "a")["input_ids"]
    assert e.token_type_ids == [0] * 7
    words = tokenizer("cat dog", "sat", add_special_tokens=False)["input_ids"]  # 3 single pieces
    bert = encode_piece_pair(tokenizer, 0, words[:2], words[2:], "ab")
    ref = tokenizer("cat dog", "sat")
    assert bert.input_ids == list(ref["input_ids"]) and bert.token_type_ids == list(ref["token_type_ids"])
