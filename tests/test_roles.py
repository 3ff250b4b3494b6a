"""Voita et al.'s head roles on planted maps (known answers by hand) and through a tiny model."""
from __future__ import annotations

from collections import Counter

import pytest
import torch
from test_dependency_reducer import CAT, SNORKEL, batch_probs, first_piece, next_token_rows

from bertattn_bench.engine.batching import encode_words, make_batch
from bertattn_bench.families.common.dependency_stats import offset_baselines, sd_arcs
from bertattn_bench.families.roles import (
    RolesReducer,
    rarest_mask,
    role_positional_confidence,
    role_positional_count,
    role_rare_word_gap,
    role_syntactic_gap,
    word_counts,
)

CPU = torch.device("cpu")
# "The cat sat on the mat ." : "mat" is the rarest word
COUNTS = Counter({"the": 100, "cat": 5, "sat": 3, "on": 50, "mat": 1, ".": 200})


class _PR:
    def __init__(self, result):
        self.result = result


def planted_result(tokenizer):
    enc = encode_words(tokenizer, 0, CAT.words)  # [CLS] 7 one-piece words [SEP]: 9 pieces
    batch = make_batch([enc], tokenizer, CPU, with_words=True)
    n = len(enc.input_ids)
    # head 1: 0.6 to the previous piece, 0.4 to itself ([CLS]: all to itself)
    prev = {t: ({t - 1: 0.6, t: 0.4} if t else {0: 1.0}) for t in range(n)}
    to_mat = {t: {first_piece(enc, 5): 1.0} for t in range(n)}  # head 2: every piece attends to "mat"
    probs = batch_probs(batch, [[next_token_rows(enc), prev, to_mat]])
    red = RolesReducer([sd_arcs(CAT)], [rarest_mask(CAT.words, COUNTS)], n_layers=1, n_heads=3, device=CPU)
    red.start_batch(batch)
    red.update(0, probs)
    red.end_batch()
    res = red.finalize()
    res.dependency.baselines = offset_baselines([sd_arcs(CAT)])
    return res


def test_rarest_mask_ties_and_lower_case():
    assert rarest_mask(CAT.words, COUNTS).tolist() == [False] * 5 + [True, False]
    assert rarest_mask(["The", "zebu", "qux"], COUNTS).tolist() == [False, True, True]  # both unseen: 0


def test_confidence_and_positional_shares(tokenizer):
    res = planted_result(tokenizer)
    # queries: [CLS] and the 7 words (the end token [SEP] is no query): 8
    assert res.n_queries == 8
    # head 0 (next piece): all 8 at +1, confidence 1; head 1: [CLS] at 0, the 7 words at -1 (7/8 = 87.5%),
    # confidence (1 + 7 x 0.6) / 8 = 0.65
    # head 2 (all to "mat", piece 6): "the" (piece 5) is at +1 and "." (piece 7) at -1 of it: 1/8 each
    assert res.offset_share[0, 0].tolist() == pytest.approx([100.0, 0.0, 12.5])
    assert res.offset_share[1, 0].tolist() == pytest.approx([0.0, 87.5, 12.5])
    # offset 0 (itself): head 1's [CLS], head 2's "mat": 1/8 each
    assert res.offset_share[2, 0].tolist() == pytest.approx([0.0, 12.5, 12.5])
    assert res.confidence[0].tolist() == pytest.approx([1.0, 0.65, 1.0])
    count = role_positional_count(_PR(res))
    assert count.value == 1.0 and "1-1 (+1 100.0%" in count.detail  # head 1 is at 87.5%: below Voita's 90
    assert role_positional_confidence(_PR(res)).value == pytest.approx(1.0)
    assert role_positional_count(_PR(res), share=85.0).value == 2.0
    assert role_positional_confidence(_PR(res), share=85.0).value == pytest.approx(0.65)
    # issue 61, bounds by hand: Wilson on 8 of 8 queries is [67.5, 100] %, on 7 of 8 [52.9, 97.8] %: at 90% neither
    # head is surely positional, both possibly: bounds [0, 2] around the count 1
    assert count.bounds == (0.0, 2.0)
    # the confidence's SE from its mean alone (Bhatia-Davis): sqrt(0.65 x 0.35 / 8) = 0.1686
    assert role_positional_confidence(_PR(res), share=85.0).standard_error == pytest.approx(0.16864, abs=1e-4)


def test_rare_word_head(tokenizer):
    res = planted_result(tokenizer)
    # head 2 attends to "mat" from every word: the rarest; head 0's columns: words 1..6 get 1 each (argmax "cat");
    # head 1's: words 0..5 get 1.0 each (argmax "The"): neither is "mat". Chance: 1 of 7 words
    assert res.rare_hits[0].tolist() == [0.0, 0.0, 1.0]
    assert res.rare_chance == pytest.approx(100 / 7)
    gap = role_rare_word_gap(_PR(res))
    assert gap.value == pytest.approx(100 - 100 / 7) and gap.head == "1-3"


def test_a_word_of_many_pieces_is_not_favoured(tokenizer):
    # "The snorkeling stopped ." with "snorkeling" (4 pieces) the rarest word; every piece attends uniformly to all 7
    # real pieces: per piece, every word receives the same (argmax: the first word, "The"), so no hit; summed over
    # its pieces "snorkeling" would receive 4 times as much and count as a rare-word head
    enc = encode_words(tokenizer, 0, SNORKEL.words)
    batch = make_batch([enc], tokenizer, CPU, with_words=True)
    n = len(enc.input_ids)
    uniform = {t: {k: 1.0 / n for k in range(n)} for t in range(n)}
    probs = batch_probs(batch, [[uniform]])
    counts = Counter({"the": 100, "stopped": 5, ".": 200})
    red = RolesReducer([sd_arcs(SNORKEL)], [rarest_mask(SNORKEL.words, counts)], n_layers=1, n_heads=1, device=CPU)
    red.start_batch(batch)
    red.update(0, probs)
    red.end_batch()
    res = red.finalize()
    assert res.rare_hits.tolist() == [[0.0]] and res.rare_chance == pytest.approx(25.0)


def test_syntactic_gap_reads_the_dependency_statistics(tokenizer):
    res = planted_result(tokenizer)
    # det: "The"→"cat", "the"→"mat": offset +1 is right on both (100%); head 0 (next piece) is right on both too
    gap = role_syntactic_gap(_PR(res), "det", 0)
    assert gap.value == pytest.approx(0.0) and gap.n == 2


def test_word_counts_of_a_file(tmp_path):
    f = tmp_path / "w.raw"
    f.write_text(" = Title = \n The cat , the Cat .\n")
    c = word_counts(str(f))
    assert c["the"] == 2 and c["cat"] == 2 and c["="] == 2 and c["title"] == 1


def test_the_pass_through_a_tiny_model(tiny, tmp_path):
    from bertattn_bench.families.roles import prepare_roles

    (tmp_path / "ud_english_ewt").mkdir()
    (tmp_path / "wikitext2_raw").mkdir()
    (tmp_path / "wikitext2_raw" / "wiki.test.raw").write_text(" the the the cat cat sat\n")
    rows = ["1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_", "2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_",
            "3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_", "4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_"]
    (tmp_path / "ud_english_ewt" / "en_ewt-ud-dev.conllu").write_text(("\n".join(rows) + "\n\n") * 2)
    res = prepare_roles(tiny, tmp_path, "ewt_dev").run().result
    assert res.n_sentences == 2 and res.n_queries == 2 * 5  # [CLS] + 4 words, twice
    assert res.rare_chance == pytest.approx(25.0)  # "." (unseen: 0) is the one rarest of 4 words


def test_figure_writes_png(tokenizer, tmp_path):
    from types import SimpleNamespace

    from bertattn_bench.families.roles import roles_figure

    pr = SimpleNamespace(result=planted_result(tokenizer), model=SimpleNamespace(name="tiny", slug="tiny"),
                         corpus="ewt_dev")
    paths = roles_figure([pr, SimpleNamespace(result=None)], tmp_path)
    assert [p.name for p in paths] == ["roles-tiny-ewt_dev.png"] and paths[0].stat().st_size > 0
