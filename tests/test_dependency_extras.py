"""The dependency pass's extra statistics on planted maps: [CLS]/[SEP] as candidates (Clark fn. 2), the no-op
share by nominality (Clark §3.2 Fig. 5), word-map row sums (Clark §4.1)."""
import numpy as np
import pytest
import torch

from bertattn_bench.engine.batching import encode_words, make_batch
from bertattn_bench.families.dependency import NOMINAL_UPOS, DependencyReducer, sd_arcs
from tests.test_dependency_reducer import CAT, first_piece


@pytest.fixture
def reduced(tokenizer):
    enc = encode_words(tokenizer, 0, CAT.words)
    batch = make_batch([enc], tokenizer, "cpu", with_words=True)
    t = batch.input_ids.shape[1]
    probs = torch.zeros(1, 2, t, t)
    probs[0, 0, :, 0] = 1.0  # head 0: everything to [CLS] (the sink)
    for w, h in enumerate(CAT.heads):  # head 1: each word to its gold head's first piece; root to [SEP]
        key = first_piece(enc, h - 1) if h > 0 else t - 1
        for p in [i for i, wi in enumerate(enc.word_index) if wi == w]:
            probs[0, 1, p, key] = 1.0
    for p in (0, t - 1):
        probs[0, 1, p, 0] = 1.0
    nominal = [np.array([u in NOMINAL_UPOS for u in CAT.upos])]
    red = DependencyReducer([sd_arcs(CAT)], 1, 2, "cpu", nominal_per_example=nominal)
    red.start_batch(batch)
    red.update(0, probs)
    return red.finalize()


def test_special_tokens_as_candidates(reduced):
    r = reduced.relations.index("All")
    n = int(reduced.n_arcs[r])
    assert n == 5  # 6 non-root arcs, one is punct
    # head 0 predicts [CLS] for every word once specials are candidates: 0 correct; head 1 is unaffected
    assert reduced.all_correct_with_special[0].tolist() == [0.0, float(reduced.correct[0, 0, r, 1])]
    assert float(reduced.correct[0, 0, r, 1]) == n


def test_sink_share_by_nominality(reduced):
    other, nominal = reduced.sink_share[0, 0].tolist()
    assert other == pytest.approx(1.0) and nominal == pytest.approx(1.0)
    assert reduced.n_nominal == (5, 2)  # cat, mat are nouns
    # head 1: only the root ("sat", a verb) attends to a special token
    other1, nominal1 = reduced.sink_share[0, 1].tolist()
    assert other1 == pytest.approx(1 / 5) and nominal1 == pytest.approx(0.0)
    # its standard error: non-nominal shares 1,0,0,0,0 (mean 0.2, E[x^2] 0.2: var 0.16 over 5), nominal 0 and 0
    assert reduced.sink_sq_mean[0, 1].tolist() == pytest.approx([1 / 5, 0.0])
    from types import SimpleNamespace

    from bertattn_bench.families.dependency import noop_sink_by_nominality

    head = SimpleNamespace(layer=0, head=1, name="1-2", describe=lambda: "1-2")
    res = SimpleNamespace(**{k: getattr(reduced, k) for k in ("sink_share", "sink_sq_mean", "n_nominal")},
                          best_head=lambda relation: head)
    m = noop_sink_by_nominality(SimpleNamespace(result=res), relation="nsubj")
    assert m.value == pytest.approx(0.2) and m.standard_error == pytest.approx((0.16 / 5) ** 0.5)


def test_row_sums_are_one(reduced):
    assert reduced.max_row_sum_error < 1e-6
