"""Issue 64's families on the encoder types whose attention is their own code (MPNet; DeBERTa-v2/v3, relative
positions; DeBERTa v1, one interleaved projection): the trees, roles and gates passes run end to end on a tiny model
of each, with every reading the family promises (the explain family's own test: tests/test_explain.py)."""
from dataclasses import replace

import numpy as np
import pytest

LABELS = ["MPNet", "DeBERTa-v2/v3", "DeBERTa"]
UD_ROWS = ["1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_", "2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_",
           "3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_", "4\ton\ton\tADP\tIN\t_\t6\tcase\t_\t_",
           "5\tthe\tthe\tDET\tDT\t_\t6\tdet\t_\t_", "6\tmat\tmat\tNOUN\tNN\t_\t3\tobl\t_\t_",
           "7\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_"]


def build(label, tokenizer):
    import architecture_matrix as A

    arch = next(a for a in A.MATRIX if a.label == label)
    loaded = A.build(arch, tokenizer)
    return replace(loaded, info=replace(loaded.info, random_init_seed=None))


def write_ud(folder, name, n=3):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(("# sent_id = 1\n" + "\n".join(UD_ROWS) + "\n\n") * n)


@pytest.mark.parametrize("label", LABELS)
def test_trees_and_roles_on_other_encoder_types(label, tokenizer, tmp_path):
    """MAX trees scored for every head, MST decoded for every head and direction, the offset baselines; Voita's
    roles (confidence, positional share, rare word) for every head."""
    from bertattn_bench.families.roles import prepare_roles
    from bertattn_bench.families.trees import RELATIONS, prepare_trees

    loaded = build(label, tokenizer)
    n_layers, n_heads = loaded.info.n_layers, loaded.info.n_heads
    write_ud(tmp_path / "ud_english_pud", "en_pud-ud-test.conllu")
    trees = prepare_trees(loaded, tmp_path, "pud_test").run().result
    assert trees.n_trees == 3 and trees.hits.shape == (n_layers, len(RELATIONS), n_heads)
    assert len(trees.mst) == n_layers * n_heads * 2 and all(len(m.tree_uuas) == 3 for m in trees.mst)
    assert {"det", "nsubj", "obl"} <= set(trees.baselines)
    acc = trees.accuracy()
    assert bool(((acc >= 0) & (acc <= 100)).all())
    write_ud(tmp_path / "ud_english_ewt", "en_ewt-ud-dev.conllu", 2)
    (tmp_path / "wikitext2_raw").mkdir()
    (tmp_path / "wikitext2_raw" / "wiki.test.raw").write_text(" the the the cat cat sat on mat\n")
    roles = prepare_roles(loaded, tmp_path, "ewt_dev").run().result
    assert roles.n_sentences == 2
    conf = np.asarray(roles.confidence)
    assert conf.shape == (n_layers, n_heads) and np.isfinite(conf).all() and ((conf > 0) & (conf <= 1)).all()


def quick_gates(monkeypatch, tmp_path, lambdas, steps):
    """Toy MRPC under ``tmp_path``, a one-epoch fine-tune recipe and the quick tier's gate budget cut to ``lambdas``
    and ``steps``."""
    from toy_glue import write_mrpc

    from bertattn_bench.families.gates import run as gates_run
    from bertattn_bench.training import glue_pass

    write_mrpc(tmp_path, 16, 8)
    real = glue_pass.recipe_for
    monkeypatch.setattr(glue_pass, "recipe_for",
                        lambda task, tier="regression": replace(real(task, tier), epochs=1, batch_size=8, lr=1e-3))
    monkeypatch.setitem(gates_run.TIERS, "quick", {"lambdas": lambdas, "steps": steps, "n_train": 16,
                                                   "batch_size": 8, "lr": 0.5})


@pytest.mark.parametrize("label", LABELS)
def test_gates_on_other_encoder_types(label, tokenizer, tmp_path, monkeypatch):
    """The gates pass (Hard Concrete gates on every head through the engine's head gates, then Michel's curve on the
    same checkpoint): a penalty that closes every gate and one that closes none."""
    from bertattn_bench.claims.registry import families

    loaded = build(label, tokenizer)
    quick_gates(monkeypatch, tmp_path, (0.0, 50.0), 30)
    p = families()["gates"].prepare(loaded, tmp_path, "mrpc", None, 32,
                                    {"tier": "quick", "cache_dir": tmp_path / "cache"})
    assert p.reason is None
    p.artifacts()
    r = p.run().result
    n = loaded.info.n_layers * loaded.info.n_heads
    kept = np.asarray(r.n_kept)[0]
    assert kept[0] == n and kept[1] < n, kept  # no penalty keeps every head; a large one closes gates
    assert np.isfinite(np.asarray(r.scores)).all()


def test_gates_over_seeds_whose_gates_keep_different_counts(tokenizer, tmp_path, monkeypatch):
    """Two seeds whose gates keep different numbers of heads (planted): one Michel curve per seed on one shared set
    of counts (every tenth and every seed's gate counts), so the curves stack (stop 69: per-seed counts of unequal
    length failed the five-seed regression run)."""
    from transformers import BertConfig

    from bertattn_bench.claims.registry import families
    from bertattn_bench.engine.model import model_from_config
    from bertattn_bench.training import head_gates as hg

    # 2 x 8 heads: every tenth of 16 is {0, 1, 3, 4, 6, 8, 9, 11, 12, 14}; seed 0's gates prune 2 and 5 (two more
    # counts), seed 1's 7 and 8 (one more): per-seed counts would give curves of 12 and 11 points
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=8,
                        intermediate_size=64, max_position_embeddings=64)
    loaded = model_from_config(config, tokenizer, "tiny8", "tiny8", seed=0, device="cpu")
    loaded = replace(loaded, info=replace(loaded.info, random_init_seed=None))
    quick_gates(monkeypatch, tmp_path, (0.1, 1.0), 2)
    n_layers, n_heads = loaded.info.n_layers, loaded.info.n_heads

    pruned = {0: (2, 5), 1: (7, 8)}

    def planted(model, t, data, tok, lambdas, seed, recipe, *args, **kw):
        runs = []
        for lam, k in zip(lambdas, pruned[seed]):
            kept = np.zeros((n_layers, n_heads), bool)
            kept.flat[:n_layers * n_heads - k] = True
            runs.append(hg.GateRun(lam, seed, 2, np.zeros(kept.shape), kept.astype(float), kept, [1.0], [0.5]))
        return runs

    monkeypatch.setattr(hg, "gate_sweep", planted)
    p = families()["gates"].prepare(loaded, tmp_path, "mrpc", None, 32,
                                    {"tier": "quick", "cache_dir": tmp_path / "cache", "n_seeds": 2})
    assert p.seeds == (0, 1)
    p.artifacts()
    r = p.run().result
    assert np.asarray(r.n_kept).tolist() == [[14, 11], [9, 8]]
    assert {2, 5, 7, 8} <= set(r.michel_counts)  # every seed's gate counts (heads pruned), not only the last seed's
    assert np.asarray(r.michel_curve).shape == (2, len(r.michel_counts))
