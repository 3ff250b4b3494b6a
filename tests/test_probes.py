"""Clark §5 probes: data split, word maps from planted attention, probe orientation and maths, training on planted
signals, the claim metrics, and the whole pass on the tiny model over hand-made treebanks."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertattn_bench.base.errors import DataError
from bertattn_bench.claims.registry import NotApplicable
from bertattn_bench.data.ud import Sentence
from bertattn_bench.engine.batching import encode_words, make_batch
from bertattn_bench.engine.model import LoadedModel
from bertattn_bench.families import probes as P
from bertattn_bench.families.dependency import HeadScore

CPU = torch.device("cpu")

# "The cat sat on the mat ." (one piece per word) and "The snorkeling stopped ." (snorkeling = 4 pieces)
CAT = [("The", 2, "det"), ("cat", 3, "nsubj"), ("sat", 0, "root"), ("on", 6, "case"), ("the", 6, "det"),
       ("mat", 3, "obl"), (".", 3, "punct")]
SNORKEL = [("The", 2, "det"), ("snorkeling", 3, "nsubj"), ("stopped", 0, "root"), (".", 3, "punct")]


def sentence(rows) -> Sentence:
    upos = {"det": "DET", "case": "ADP", "punct": "PUNCT"}
    return Sentence(words=[r[0] for r in rows], heads=[r[1] for r in rows], deprels=[r[2] for r in rows],
                    upos=[upos.get(r[2], "NOUN") for r in rows], xpos=["_"] * len(rows))


def conllu(rows, sent_id: str, newdoc: str | None = None) -> str:
    lines = ([f"# newdoc id = {newdoc}"] if newdoc else []) + [f"# sent_id = {sent_id}"]
    s = sentence(rows)
    for i, (w, h, d) in enumerate(rows, 1):
        lines.append("\t".join([str(i), w, w, s.upos[i - 1], "_", "_", str(h), d, "_", "_"]))
    return "\n".join(lines) + "\n\n"


def make_data_dir(root: Path, train_docs: int = 3) -> Path:
    """ud_english_gum dev/test (one document each), gum/documents (those two + train documents), EWT dev."""
    (root / "ud_english_gum").mkdir(parents=True)
    (root / "gum" / "documents").mkdir(parents=True)
    (root / "ud_english_ewt").mkdir(parents=True)
    for split in ("dev", "test"):
        text = conllu(CAT, f"{split}-1", newdoc=f"GUM_x_{split}") + conllu(SNORKEL, f"{split}-2")
        (root / "ud_english_gum" / f"en_gum-ud-{split}.conllu").write_text(text, encoding="utf-8")
        (root / "gum" / "documents" / f"GUM_x_{split}.conllu").write_text(text, encoding="utf-8")
    for d in range(train_docs):
        text = conllu(CAT, f"t{d}-1", newdoc=f"GUM_y_train{d}") + conllu(SNORKEL, f"t{d}-2") \
            + conllu([("Hello", 0, "root")], f"t{d}-3")
        (root / "gum" / "documents" / f"GUM_y_train{d}.conllu").write_text(text, encoding="utf-8")
    ewt = conllu(CAT, "e1") + conllu(SNORKEL, "e2") + conllu(CAT, "e3")
    (root / "ud_english_ewt" / "en_ewt-ud-dev.conllu").write_text(ewt, encoding="utf-8")
    return root


# ---- data ----------------------------------------------------------------------------------------------------

def test_train_documents_are_those_outside_dev_and_test(tmp_path):
    root = make_data_dir(tmp_path, train_docs=2)
    docs = P.gum_train_documents(root)
    assert [p.name for p in docs] == ["GUM_y_train0.conllu", "GUM_y_train1.conllu"]
    bad = root / "gum" / "documents" / "GUM_z.conllu"
    bad.write_text(conllu(CAT, "z1"), encoding="utf-8")  # no newdoc id
    with pytest.raises(DataError, match=r"GUM_z\.conllu:1: no '# newdoc id"):
        P.gum_train_documents(root)


def test_train_sample_is_seeded_and_skips_one_word_sentences(tmp_path):
    docs = P.gum_train_documents(make_data_dir(tmp_path, train_docs=4))
    a, n_docs = P.sample_train_sentences(docs, 3, seed=0)
    b, _ = P.sample_train_sentences(docs, 3, seed=0)
    assert len(a) == 3 and n_docs == 3  # 2 usable sentences per document: 3 documents give the pool of 6
    assert [s.source for s in a] == [s.source for s in b]
    assert all(len(s.words) > 1 for s in a)


def test_gold_heads_skip_root_and_punct():
    assert P.gold_heads(sentence(CAT), root=False).tolist() == [1, 2, -1, 5, 5, 2, -1]
    # Clark's probe scores the root word (head ROOT); punct stays unscored
    assert P.gold_heads(sentence(CAT)).tolist() == [1, 2, P.ROOT, 5, 5, 2, -1]


# ---- word maps from planted attention ------------------------------------------------------------------------

def test_word_maps_pool_pieces_and_vectors_average_embeddings(tokenizer):
    sents = [sentence(CAT), sentence(SNORKEL)]
    encs = [encode_words(tokenizer, i, s.words) for i, s in enumerate(sents)]
    batch = make_batch(encs, tokenizer, CPU, with_words=True)
    b, t = batch.input_ids.shape
    probs = torch.zeros(b, 2, t, t)
    for e, (enc, s) in enumerate(zip(encs, sents)):
        first = {w: enc.word_index.index(w) for w in range(enc.n_words)}
        for q, w in enumerate(enc.word_index):
            probs[e, :, q, 0] = 1.0  # default: [CLS]
            if w >= 0 and s.heads[w] > 0:
                probs[e, 0, q] = 0.0
                probs[e, 0, q, first[s.heads[w] - 1]] = 1.0  # head 0: every piece → first piece of the gold head
    # head 1 of SNORKEL: "The" spreads over the 4 pieces of "snorkeling" (0.25 each): summed, it is 1
    pieces = [q for q, w in enumerate(encs[1].word_index) if w == 1]
    probs[1, 1, 1] = 0.0
    probs[1, 1, 1, pieces] = 0.25
    # head 1 of CAT: [SEP] attends to "mat" (word 5) only
    sep = len(encs[0].input_ids) - 1
    probs[0, 1, sep] = 0.0
    probs[0, 1, sep, encs[0].word_index.index(5)] = 1.0
    emb = torch.randn(tokenizer.vocab_size, 5)
    red = P.WordMapReducer(n_layers=1, n_heads=2, embeddings=emb)
    red.start_batch(batch)
    red.update(0, probs)
    maps, vectors, specials = red.finalize()
    # specials (K, W, 4): word -> [CLS], word -> [SEP], [CLS] -> word, [SEP] -> word
    assert specials[0].shape == (2, 7, 4) and specials[1].shape == (2, 4, 4)
    assert specials[0][0, 2, 0] == 1.0 and specials[0][0, 0, 0] == 0.0  # head 0: only the root "sat" → [CLS]
    assert specials[0][1, :, 0].tolist() == [1.0] * 7 and specials[0][..., 1].sum() == 0  # head 1: all → [CLS]
    assert specials[0][1, :, 3].tolist() == [0, 0, 0, 0, 0, 1.0, 0]  # [SEP] → "mat"
    assert specials[0][..., 2].sum() == 0  # [CLS] attends to itself
    assert specials[1][0, 2, 0] == 1.0  # SNORKEL's root "stopped" (its pieces averaged)
    assert maps[0].shape == (2, 7, 7) and maps[1].shape == (2, 4, 4) and maps[0].dtype == torch.float16
    for e, s in enumerate(sents):
        for w, h in enumerate(s.heads):
            if h > 0:
                assert maps[e][0, w, h - 1] == 1.0  # mean over the pieces attending (4 for "snorkeling")
        assert maps[e][0].sum() == sum(h > 0 for h in s.heads)  # [CLS] is not a word: the root's row is empty
    assert maps[1][1, 0, 1] == 1.0
    assert torch.allclose(vectors[1][1], emb[batch.input_ids[1, pieces]].mean(0))
    assert torch.allclose(vectors[0][2], emb[batch.input_ids[0, 3]])


# ---- probes ---------------------------------------------------------------------------------------------------

def features(maps, heads, dim=3, seed=0) -> P.Features:
    g = torch.Generator().manual_seed(seed)
    return P.Features([m.half() for m in maps], [torch.randn(m.shape[-1], dim, generator=g) for m in maps],
                      [np.asarray(h, dtype=np.int64) for h in heads])


def test_probe_orientation_both_directions():
    heads = [1, 2, -1, 2]  # word 2 is the root
    dep_to_head = torch.zeros(4, 4)
    head_to_dep = torch.zeros(4, 4)
    for j, h in enumerate(heads):
        if h >= 0:
            dep_to_head[j, h] = 1.0  # the dependent attends to its head: α_ji
            head_to_dep[h, j] = 1.0  # the head attends to the dependent: α_ij
    (bk,) = P.make_buckets(features([torch.stack([dep_to_head, head_to_dep])], [heads]), 8, CPU)
    probe = P.AttnProbe(2)
    with torch.no_grad():
        probe.u[0] = 5.0  # u weighs α_ji: dependent → candidate
    assert P.uas(probe, [bk]) == (100.0, 3)
    probe = P.AttnProbe(2)
    with torch.no_grad():
        probe.w[1] = 5.0  # w weighs α_ij: candidate → dependent
    assert P.uas(probe, [bk]) == (100.0, 3)
    probe = P.AttnProbe(2)
    with torch.no_grad():
        probe.w[0] = 5.0  # the wrong direction for this map
    assert P.uas(probe, [bk])[0] < 100.0


def test_attn_words_probe_matches_the_formula():
    torch.manual_seed(0)
    maps = [torch.rand(3, 5, 5), torch.rand(3, 3, 3)]
    feats = features(maps, [[1, -1, 1, 2, 0], [2, 0, -1]], dim=4)
    (bk,) = P.make_buckets(feats, 8, CPU)
    probe = P.AttnWordsProbe(3, 5)
    with torch.no_grad():
        probe.W.normal_()
        probe.U.normal_()
    scores = probe(bk)
    v = bk.vectors
    for b, m in enumerate(maps):
        n = m.shape[-1]
        order = 0 if n == 3 else 1  # buckets are length-sorted
        assert torch.equal(bk.words[order, :n], torch.ones(n, dtype=torch.bool))
        for j in range(n):
            for i in range(n):
                pair = torch.cat([v[order, i], v[order, j]])
                a = m.half().float()  # the features keep maps as float16
                want = sum((probe.W[k] @ pair) * a[k, i, j] + (probe.U[k] @ pair) * a[k, j, i] for k in range(3))
                assert scores[order, j, i].item() == pytest.approx(want.item(), rel=1e-4, abs=1e-5)


def test_attn_words_probe_starts_from_attn_probe():
    torch.manual_seed(1)
    feats = features([torch.rand(4, 6, 6)], [[1, 2, -1, 2, 3, 3]])
    (bk,) = P.make_buckets(feats, 8, CPU)
    attn = P.AttnProbe(4)
    with torch.no_grad():
        attn.w.normal_()
        attn.u.normal_()
    words = P.AttnWordsProbe(4, feats.vectors[0].shape[-1] + 1, attn)
    assert torch.allclose(words(bk), attn(bk), atol=1e-5)


def test_root_candidate_from_attention_to_the_special_tokens():
    """The root word attends to [CLS] (map 0) and [SEP] attends to it (map 1); the other words attend to their heads
    (map 0). u weighs dependent → candidate (so root_to for ROOT), w candidate → dependent (root_from)."""
    heads = [1, 2, P.ROOT, 2]
    dep_to_head = torch.zeros(4, 4)
    for j, h in enumerate(heads):
        if h >= 0:
            dep_to_head[j, h] = 1.0
    specials = torch.zeros(2, 4, 4)
    specials[0, 2, 0] = 1.0  # map 0: "root" → [CLS]
    specials[1, 2, 3] = 1.0  # map 1: [SEP] → "root"
    feats = features([torch.stack([dep_to_head, torch.zeros(4, 4)])], [heads])
    feats.specials = [specials.half()]
    (bk,) = P.make_buckets(feats, 8, CPU)
    assert bk.root and bk.heads[0].tolist() == [1, 2, 4, 2]  # ROOT is column W = 4
    probe = P.AttnProbe(2)
    with torch.no_grad():
        probe.u[0] = 5.0
    scores = probe(bk)
    assert scores.shape == (1, 4, 5) and scores[0, 2, 4].item() == pytest.approx(5.0)  # u_0 ρ_start α(root → [CLS])
    assert P.uas(probe, [bk]) == (100.0, 4)
    probe = P.AttnProbe(2)
    with torch.no_grad():
        probe.u[0], probe.w[1], probe.rho[0] = 5.0, 2.0, 0.0  # ρ_start 0: only ρ_end α([SEP] → root) w_1 counts
    assert probe(bk)[0, 2, 4].item() == pytest.approx(2.0)
    # Attn + words starts from the Attn probe, ROOT column included
    words = P.AttnWordsProbe(2, feats.vectors[0].shape[-1] + 1, probe)
    assert torch.allclose(words(bk), probe(bk), atol=1e-5)
    # without specials there is no ROOT column and the root word is not scored
    feats.specials = None
    (bk,) = P.make_buckets(feats, 8, CPU)
    assert not bk.root and bk.heads[0].tolist() == [1, 2, -1, 2] and P.AttnProbe(2)(bk).shape == (1, 4, 4)


def test_distance_features_as_clark():
    offsets = torch.arange(4)[None, :] - torch.arange(4)[:, None]  # [j, i] = i - j
    f = P.distance_features(offsets, torch.tensor([4, 2]))
    assert f.shape == (2, 4, 4, 7)
    assert f[0, 0, 3].tolist() == [0.75, 0, 0, 0, 0, 0, 0]  # 3 ahead of a 4-word sentence
    assert f[1, 0, 1].tolist() == [0.5, 0, 0, 0, 1, 0, 0]  # 1 ahead of 2 words: the +1 indicator
    assert f[0, 3, 1].tolist() == [0, 0.5, 0, 0, 0, 1, 0]  # 2 behind: the -2 indicator
    assert f[0, 2, 2].tolist() == [0, 0, 1, 0, 0, 0, 0]
    mlp = P.seeded(0, lambda: P.DistWordsProbe(4, 8))
    heads = [[1, 2, P.ROOT]]
    (bk,) = P.make_buckets(features([torch.zeros(1, 3, 3)], heads), 8, CPU)
    assert mlp(bk).shape == (1, 3, 3)  # no specials, no ROOT column
    feats = features([torch.zeros(1, 3, 3)], heads)
    feats.specials = [torch.zeros(1, 3, 4).half()]
    (bk,) = P.make_buckets(feats, 8, CPU)
    assert mlp(bk).shape == (1, 3, 4)
    P.train_probe(mlp, [bk], epochs=60, lr=0.05, seed=0)
    assert P.uas(mlp, [bk]) == (100.0, 3)  # ROOT learnable from its indicator


def random_trees(n, lengths, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        w = int(rng.choice(lengths))
        heads = np.array([int(rng.choice([x for x in range(w) if x != j])) for j in range(w)])
        heads[int(rng.integers(w))] = -1
        out.append(heads)
    return out


def planted(heads, k=4, signal=2, seed=0):
    """Noise maps (rows sum to 1) except map ``signal``: 1.0 from each dependent to its head on top of the noise."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for h in heads:
        w = len(h)
        m = torch.rand(k, w, w, generator=g)
        m = m / m.sum(-1, keepdim=True)
        for j, hj in enumerate(h):
            if hj >= 0:
                m[signal, j, hj] += 1.0
        out.append(m)
    return out


def test_training_finds_the_planted_head_and_is_deterministic():
    train_h, eval_h = random_trees(40, [4, 6, 9], 0), random_trees(20, [5, 7], 1)
    train = features(planted(train_h), train_h)
    evals = features(planted(eval_h, seed=1), eval_h, seed=1)
    s = P.ProbeSettings(epochs=15, batch_sentences=8)
    tb, eb = P.make_buckets(train, s.batch_sentences, CPU), P.make_buckets(evals, 64, CPU, max_elements=2000)
    assert len(eb) > 1  # the element budget splits the eval sentences
    a = P.train_probe(P.AttnProbe(4), tb, s.epochs, s.lr_attn, s.seed)
    b = P.train_probe(P.AttnProbe(4), tb, s.epochs, s.lr_attn, s.seed)
    assert torch.equal(a.u, b.u) and torch.equal(a.w, b.w)
    assert P.uas(a, eb)[0] == 100.0
    assert int(torch.argmax(a.u)) == 2  # the planted map, dependent → head
    scores = P.train_probes(train, evals, s, CPU)
    assert scores["attn"].uas == 100.0 and scores["attn_words"].uas >= 95.0
    assert scores["attn"].n_arcs == sum(int((h >= 0).sum()) for h in eval_h)


def test_distance_mlp_learns_right_branching():
    heads = [np.array(list(range(1, w)) + [-1]) for w in (3, 5, 8, 6) * 6]  # every head is the next word
    feats = features([torch.zeros(1, len(h), len(h)) for h in heads], heads)
    buckets = P.make_buckets(feats, 8, CPU)
    mlp = P.seeded(0, lambda: P.DistWordsProbe(4, 16))
    P.train_probe(mlp, buckets, epochs=20, lr=0.05, seed=0)
    assert P.uas(mlp, buckets)[0] == 100.0


# ---- metrics --------------------------------------------------------------------------------------------------

def result(**uas) -> SimpleNamespace:
    res = P.ProbeResult(
        probes={k: P.ProbeScore(v, 100) for k, v in uas.items()}, right_branching=30.0,
        best_head=HeadScore(2, 1, 0, 45.0, 100), n_eval_sentences=10, n_eval_arcs=100, n_train_sentences=20,
        n_train_arcs=200, n_train_documents=2, random_init="test")
    return SimpleNamespace(result=res)


def test_margin_metrics():
    pr = result(attn=60.0, attn_words=72.0, dist_words=65.0, random_init=25.0)
    m = P.probe_margin_over(pr, "attn", {"right_branching": 20, "best_head": 10})
    assert m.value == pytest.approx(5.0) and m.n == 100 and m.n_unit == "arcs"  # 60 - max(50, 55)
    assert "best single head 3-2" in m.detail
    # SE of the binding difference (best head), binomial over the 100 arcs
    assert m.standard_error == pytest.approx(100 * ((0.6 * 0.4 + 0.45 * 0.55) / 100) ** 0.5)
    assert P.probe_margin_over(pr, "attn_words", {"attn": 5, "dist_words": 5}).value == pytest.approx(2.0)
    m = P.probe_margin_under(pr, "random_init", {"right_branching": 10, "attn_words": -20})
    assert m.value == pytest.approx(-15.0)  # 25 - min(40, 52)
    assert m.standard_error == pytest.approx(100 * ((0.25 * 0.75 + 0.3 * 0.7) / 100) ** 0.5)  # right-branching binds
    assert P.probe_uas(pr, "right_branching").value == 30.0
    assert P.probe_uas(pr, "right_branching").standard_error == pytest.approx(100 * (0.3 * 0.7 / 100) ** 0.5)
    assert P.probe_uas(pr, "dist_words").value == 65.0
    empty = result(attn=0.0)
    empty.result.n_eval_arcs = 0
    with pytest.raises(NotApplicable):
        P.probe_uas(empty, "attn")


def test_reduced_budget_is_labelled_in_every_detail():
    """The regression tier's sampled training is a reduced budget whose verdict can differ from the full tier's: every
    probe claim's detail says so; the full tier's does not."""
    pr = result(attn=60.0, attn_words=72.0, dist_words=65.0, random_init=25.0)
    details = [P.probe_margin_over(pr, "attn", {"right_branching": 20}).detail, P.probe_uas(pr, "attn").detail,
               P.probe_margin_under(pr, "random_init", {"right_branching": 10}).detail]
    assert pr.result.tier == "regression" and all("REDUCED BUDGET" in d and "--tier full" in d for d in details)
    pr.result.tier = "full"
    assert "REDUCED BUDGET" not in P.probe_uas(pr, "attn").detail


# ---- the pass on the tiny model -------------------------------------------------------------------------------

def test_pass_on_tiny_model(tmp_path, tiny):
    root = make_data_dir(tmp_path)
    settings = P.ProbeSettings(n_train=4, n_eval=None, epochs=2)
    pretrained = LoadedModel(tiny.model, tiny.tokenizer, dataclasses.replace(tiny.info, random_init_seed=None))
    prepared = P.prepare_probes(pretrained, root, "ewt_dev", settings=settings)
    assert len(prepared.encoded) == 3 and len(prepared.train_encoded) == 4
    pr = prepared.run()
    res = pr.result
    assert pr.family == "probes" and pr.n_examples == 3
    # non-punct arcs (CAT 5 + SNORKEL 2 + CAT 5) and each sentence's root word (head ROOT)
    assert res.n_eval_arcs == 5 + 2 + 5 + 3 and res.n_root_words == 3
    assert res.n_train_sentences == 4 and res.n_train_documents == 3
    assert set(res.probes) == {"attn", "attn_words", "dist_words", "random_init"}
    assert all(p.n_arcs == 15 for p in res.probes.values())
    assert res.right_branching == pytest.approx(100 * 8 / 15)  # CAT: The→cat, cat→sat, the→mat; SNORKEL: both
    assert res.best_head.n == 15  # the single head's arcs + the root words it cannot predict
    assert "random weights" in res.random_init and "random_init_features" in res.seconds
    # the structural probe: gold edges among the non-punctuation words (CAT 6 → 5, SNORKEL 3 → 2, CAT again 5)
    assert res.structural.n_edges == 12 and 0 <= res.structural.layer <= tiny.info.n_layers
    assert len(res.structural.held_out_uuas) == tiny.info.n_layers + 1 and "structural" in res.seconds
    # the tiny model is itself random-init: its own probe is the random-init baseline
    res2 = P.prepare_probes(tiny, root, "ewt_dev", settings=settings).run().result
    assert res2.probes["random_init"] == res2.probes["attn_words"] and "itself" in res2.random_init


def test_random_init_twin_keeps_only_the_embeddings(tiny):
    twin = P.random_init_twin(tiny)
    emb, twin_emb = tiny.model.embeddings.state_dict(), twin.model.embeddings.state_dict()
    assert all(torch.equal(emb[k], twin_emb[k]) for k in emb)
    q = [n for n, _ in tiny.model.named_parameters() if "attention.self.query.weight" in n][0]
    assert not torch.equal(dict(tiny.model.named_parameters())[q], dict(twin.model.named_parameters())[q])
    state = torch.random.get_rng_state()
    P.random_init_twin(tiny)
    assert torch.equal(state, torch.random.get_rng_state())  # the global random state is untouched


def test_training_seed_from_env(monkeypatch):
    """$BERTATTN_SEED moves the training seed of all probes (the structural one too), never the data samples;
    unset keeps the recorded baseline's seed 0; a bad value names the variable."""
    from bertattn_bench.base.errors import DataError
    from bertattn_bench.base.settings import from_environment

    def from_env():  # as a face reads the run's seed (issue 44: the environment is read once, by the faces)
        return P.ProbeSettings.with_seed(from_environment().get("seed"))

    monkeypatch.delenv("BERTATTN_SEED", raising=False)
    s = from_env()
    assert (s.seed, s.training_seed, s.structural.seed) == (0, 0, 0)
    monkeypatch.setenv("BERTATTN_SEED", "3")
    s = from_env()
    assert (s.seed, s.training_seed, s.structural.seed) == (0, 3, 3)
    monkeypatch.setenv("BERTATTN_SEED", "x1")
    with pytest.raises(DataError, match="BERTATTN_SEED='x1'"):
        from_env()


def test_train_probes_uses_the_training_seed(monkeypatch):
    """Every probe of train_probes trains (and the MLP initialises) under the training seed, not the sample seed."""
    train_h = random_trees(8, [4, 6], 0)
    train = features(planted(train_h), train_h)
    seen = []
    real_train, real_seeded = P.train_probe, P.seeded
    # patched where train_probes looks them up: the package's models module
    monkeypatch.setattr(P.models, "train_probe", lambda probe, b, e, lr, seed: seen.append(seed) or real_train(probe, b, 1, lr, seed))
    monkeypatch.setattr(P.models, "seeded", lambda seed, build: seen.append(("init", seed)) or real_seeded(seed, build))
    P.train_probes(train, train, P.ProbeSettings(seed=0, train_seed=7, epochs=1), CPU)
    assert seen == [7, 7, ("init", 7), 7]


def test_sd_like_trees():
    """case heads the prepositional phrase; cc attaches to the first conjunct; possessive 's and a root noun stay."""
    assert P.sd_like(sentence(CAT)).heads == [2, 3, 0, 3, 6, 4, 3]  # on → sat, mat → on
    assert sentence(CAT).heads == [2, 3, 0, 6, 6, 3, 3]  # a copy: the UD tree is untouched
    coord = sentence([("A", 0, "root"), ("and", 3, "cc"), ("B", 1, "conj")])
    assert P.sd_like(coord).heads == [0, 1, 1]
    poss = sentence([("John", 3, "nmod:poss"), ("'s", 1, "case"), ("dog", 4, "nsubj"), ("barks", 0, "root")])
    assert P.sd_like(poss).heads == [3, 1, 4, 0]
    assert P.sd_like(sentence([("in", 2, "case"), ("London", 0, "root")])).heads == [2, 0]
    # "because of the rain": the first case marker heads; "of" (case too) stays under the noun
    phrase = sentence([("left", 0, "root"), ("because", 5, "case"), ("of", 5, "case"), ("the", 5, "det"),
                       ("rain", 1, "obl")])
    assert P.sd_like(phrase).heads == [0, 1, 5, 5, 2]
    assert P.gold_heads(P.sd_like(sentence(CAT))).tolist() == [1, 2, P.ROOT, 2, 5, 3, -1]


def test_tiers_and_tree_variants(tmp_path, tiny):
    """The regression tier samples n_train sentences, --tier full reads every GUM train sentence (of >= 2 words); the
    corpus label of a full-tier pass carries the tier; ``_ud`` corpora keep UD's trees."""
    from bertattn_bench.claims.catalog import corpus_label

    root = make_data_dir(tmp_path)  # 3 train documents, 2 usable sentences each
    quick = P.prepare_probes(tiny, root, "ewt_dev", options={"tier": "regression"})
    assert len(quick.train_encoded) == 6 and quick.tier == "regression"  # 800 asked, 6 there
    full = P.prepare_probes(tiny, root, "ewt_dev", options={"tier": "full"})
    assert len(full.train_encoded) == 6 and full.tier == "full" and full.settings.n_train is None
    assert "(all)" in full.data and "full tier" in full.data and "SD-like" in full.data
    pr = SimpleNamespace(corpus="ewt_dev", result=SimpleNamespace(tier="full"))
    assert corpus_label(pr) == "ewt_dev+full"
    with pytest.raises(DataError, match="--tier 'huge'"):
        P.prepare_probes(tiny, root, "ewt_dev", options={"tier": "huge"})
    # SD-like by default: CAT's "on" is headed by "sat"; the _ud variant keeps UD (on → mat)
    assert full.eval_heads[0].tolist() == [1, 2, P.ROOT, 2, 5, 3, -1]
    ud = P.prepare_probes(tiny, root, "ewt_dev_ud", options={"tier": "regression"})
    assert ud.eval_heads[0].tolist() == [1, 2, P.ROOT, 5, 5, 2, -1] and "UD gold trees" in ud.data


# ---- several training seeds on one set of features (issue 61) ---------------------------------------------------

def test_several_seeds_share_the_features_and_the_first_is_the_one_seed_run(tmp_path, tiny):
    """The regression tier trains three probe seeds on the features of one forward pass: the first seed's probes are
    those a one-seed run trains (same numbers), every reading is the mean over the seeds, and the judge reads each
    seed's value through its one-seed view."""
    from bertattn_bench.claims.catalog import load_claims
    from bertattn_bench.claims.checks import one_seed, per_seed_values

    root = make_data_dir(tmp_path)
    pretrained = LoadedModel(tiny.model, tiny.tokenizer, dataclasses.replace(tiny.info, random_init_seed=None))
    one = P.prepare_probes(pretrained, root, "ewt_dev", settings=P.ProbeSettings(n_train=4, n_eval=None, epochs=2))
    three = P.prepare_probes(pretrained, root, "ewt_dev",
                             settings=P.ProbeSettings(n_train=4, n_eval=None, epochs=2, n_seeds=2))
    r1, pr3 = one.run().result, three.run()
    r3 = pr3.result
    assert r3.seeds == (0, 1) and len(r3.per_seed) == 2 and r1.seeds == () and r1.per_seed == []
    assert r3.per_seed[0].probes == r1.probes and r3.per_seed[0].structural == r1.structural
    assert r3.per_seed[1].structural.seed == 1 and r3.per_seed[1].probes["attn"].n_arcs == 15
    for name in ("attn", "attn_words", "dist_words", "random_init"):
        assert r3.uas(name) == pytest.approx(np.mean([x.probes[name].uas for x in r3.per_seed]))
    assert r3.structural_uuas() == pytest.approx(np.mean([x.structural.uuas for x in r3.per_seed]))
    view = one_seed(r3, 1)
    assert view.seeds == (1,) and view.uas("attn") == r3.per_seed[1].probes["attn"].uas
    # the learned-model guard checks every seed's probes (4 probes + the structural one, per seed)
    assert len(pr3.learning) == 2 * 5 and sum("training seed 1" in c.subject for c in pr3.learning) == 5
    claims = {c.id: c for c in load_claims()}
    c = claims["clark.probe_vs_structural"]
    values = per_seed_values(c, pr3)
    assert values == pytest.approx([x.probes["attn_words"].uas - x.structural.uuas for x in r3.per_seed])
    assert P.probe_vs_structural(pr3).value == pytest.approx(np.mean(values))
    assert "training seeds 0, 1" in P.probe_vs_structural(pr3).detail
    # the run's $BERTATTN_SEEDS / seeds= reaches the probes (from the run's seed on)
    two = P.prepare_probes(pretrained, root, "ewt_dev", options={"tier": "quick", "n_seeds": 2, "seed": 3}).settings
    assert two.training_seeds == (3, 4)
