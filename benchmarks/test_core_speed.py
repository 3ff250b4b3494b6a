"""How fast is the attention core? Beside (a) the floor, a bare batched forward pass with output_attentions on
the same batches, and (b) a plain one-sentence-at-a-time loop computing the same §4 statistics in Python.

The loop is also a second, independent implementation of Clark §4.1's word-level argmax: on the sentences it
sees, its per-head correct counts must equal the core's exactly.
"""
import time

import numpy as np
import pytest
import torch

from bertattn_bench.engine.batching import iter_batches
from bertattn_bench.faces.pytest_session import Target, benchmark_group

NAIVE_SENTENCES = 200  # one forward and 72-144 small maps a sentence: enough sentences for a stable rate


def _sync(device: str):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@pytest.fixture(scope="module")
def dep_target(request, bench):
    if not request.config.getoption("--time-cores"):
        # a warm re-run of the claim benchmarks takes seconds; these time the core again (and check the naive
        # loop's counts), which CI asks for with --time-cores
        pytest.skip("core-vs-floor timings and the naive loop's agreement run with --time-cores")
    return Target(bench.options.models[0], bench.options.corpora("dependency")[0], "dependency")


def test_speed_floor_bare_forward(benchmark, bench, dep_target):
    """(a) The floor: the same batches through the model with output_attentions, nothing reduced."""
    benchmark.group = benchmark_group(dep_target)
    prepared = bench.prepare(dep_target)
    model, tok, dev = prepared.loaded.model, prepared.loaded.tokenizer, prepared.loaded.info.device

    def bare():
        _sync(dev)
        start = time.perf_counter()
        with torch.inference_mode():
            for batch in iter_batches(prepared.encoded, tok, dev, prepared.batch_size, with_words=False):
                model(**batch.model_inputs(model), output_attentions=True)
        _sync(dev)
        return time.perf_counter() - start

    seconds = benchmark.pedantic(bare, rounds=1, iterations=1)
    core = bench.result(dep_target)
    ratio = core.seconds / seconds
    benchmark.extra_info.update({"n_sentences": len(prepared.encoded), "floor_sentences_per_s": len(prepared.encoded) / seconds,
                                 "core_sentences_per_s": core.examples_per_second, "core_over_floor": ratio,
                                 "device": prepared.loaded.info.device})
    print(f"\nfloor {len(prepared.encoded) / seconds:.1f} sent/s, core {core.examples_per_second:.1f} sent/s, "
          f"core/floor time ratio {ratio:.2f}")
    assert core.n_examples == len(prepared.encoded)


def word_word_attention(a: np.ndarray, pieces: list[list[int]]) -> np.ndarray:
    """The authors' ``get_word_word_attention`` (clarkkev/attention-analysis ``bpe_utils.py`` l.46-75) with mode
    "mean", the paper's (§4.1): columns summed over a word's pieces, rows averaged over them, one map at a time.
    Here on the words' pieces alone (their code keeps [CLS]/[SEP] as words and drops them in the predictor,
    ``Syntax_Analysis.ipynb`` cell 6). Their ``make_attn_word_level`` (l.78-84) calls it without ``mode``, so the
    released code takes each split word's *first* piece's row (docs/families/clark.md, "Word-level maps")."""
    starts = [p[0] for p in pieces]
    w = np.array(a)
    for p in pieces:
        w[:, p[0]] = w[:, p].sum(axis=-1)
    w = w[:, starts]
    for p in pieces:
        w[p[0]] = np.mean(w[p], axis=0)
    return w[starts]


def naive_dependency_counts(loaded, encoded, arcs, relations):
    """One sentence at a time, one map at a time in numpy: the authors' way (``bpe_utils.make_attn_word_level``,
    ``Syntax_Analysis.ipynb`` cell 6's ``attn_head_predictor``; Clark §4.1)."""
    info = loaded.info
    correct = np.zeros((info.n_layers, 2, len(relations), info.n_heads))
    rel_id = {r: i for i, r in enumerate(relations)}
    for e in encoded:
        ids = torch.tensor([e.input_ids], device=info.device)
        with torch.inference_mode():
            out = loaded.model(input_ids=ids, token_type_ids=torch.zeros_like(ids), output_attentions=True)
        pieces = [[p for p, w in enumerate(e.word_index) if w == word] for word in range(e.n_words)]
        for layer, att in enumerate(out.attentions):
            att = att[0].float().cpu().numpy()
            for head in range(info.n_heads):
                words = word_word_attention(att[head], pieces)
                np.fill_diagonal(words, -np.inf)
                pred = words.argmax(axis=1)
                for arc in arcs[e.index]:
                    if arc.relation not in rel_id:
                        continue
                    r = rel_id[arc.relation]
                    d2h = pred[arc.dependent] == arc.head or (arc.alt >= 0 and pred[arc.alt] == arc.head)
                    h2d = pred[arc.head] == arc.dependent or (arc.alt >= 0 and pred[arc.head] == arc.alt)
                    correct[layer, 0, r, head] += d2h
                    correct[layer, 1, r, head] += h2d
    return correct


def test_speed_naive_loop_and_agreement(benchmark, bench, dep_target):
    """(b) The one-at-a-time loop: its rate, and the same counts as the batched core on the same sentences."""
    # its own table: it times NAIVE_SENTENCES sentences, not the corpus, so a ratio beside the core would mislead
    benchmark.group = f"{benchmark_group(dep_target)}, naive loop on {NAIVE_SENTENCES} sentences"
    from bertattn_bench.engine.attention import run_reducers
    from bertattn_bench.families.dependency import RELATIONS, DependencyReducer, sd_arcs

    prepared = bench.prepare(dep_target)
    subset = prepared.encoded[:NAIVE_SENTENCES]
    from bertattn_bench.data.ud import load_corpus

    sentences = load_corpus(bench.data_dir, dep_target.corpus, bench.config.getoption("--limit"))
    arcs = [sd_arcs(s) for s in sentences]
    loaded = prepared.loaded

    def naive():
        _sync(loaded.info.device)
        start = time.perf_counter()
        counts = naive_dependency_counts(loaded, subset, arcs, RELATIONS)
        _sync(loaded.info.device)
        return counts, time.perf_counter() - start

    counts, seconds = benchmark.pedantic(naive, rounds=1, iterations=1)
    red = DependencyReducer(arcs, loaded.info.n_layers, loaded.info.n_heads, loaded.info.device)
    (core,) = run_reducers(loaded.model, iter_batches(subset, loaded.tokenizer, loaded.info.device,
                                                      prepared.batch_size, True), [red])
    full = bench.result(dep_target)
    speedup = full.examples_per_second / (len(subset) / seconds)
    benchmark.extra_info.update({"naive_sentences": len(subset), "naive_sentences_per_s": len(subset) / seconds,
                                 "core_sentences_per_s": full.examples_per_second, "core_speedup_over_naive": speedup})
    print(f"\nnaive loop {len(subset) / seconds:.1f} sent/s on {len(subset)} sentences; "
          f"core {full.examples_per_second:.1f} sent/s: {speedup:.1f}x")
    disagreements = int((torch.from_numpy(counts) != core.correct.cpu()).sum())
    assert disagreements <= counts.size * 0.001, f"{disagreements} (layer, direction, relation, head) counts differ"


def test_word_word_attention_by_hand():
    """The loop's word-level map on a planted 5-piece map with one word split in two and one in three: attention
    *to* a word sums its pieces' columns, attention *from* it averages its pieces' rows (Clark §4.1)."""
    a = np.arange(25, dtype=np.float64).reshape(5, 5)
    pieces = [[0], [1, 2], [3, 4]]
    want = np.array([[a[pf][:, pt].sum(axis=1).mean() for pt in pieces] for pf in pieces])
    assert np.array_equal(word_word_attention(a, pieces), want)
    assert word_word_attention(a, pieces)[1, 2] == ((8 + 9) + (13 + 14)) / 2
