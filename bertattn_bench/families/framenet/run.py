"""The framenet family's pass (``-k framenet``): the notebook's piece pairs and the prepare (what the cache key
follows)."""
from __future__ import annotations

from pathlib import Path

from ...claims.registry import family
from .constants import NOTEBOOK_MAX_LEN, TIER_CORPORA
from .reduce import FrameReducer, FrameResult


def notebook_pairs(tokenizer, text: str, target: tuple[int, int], links: list, max_len: int = NOTEBOOK_MAX_LEN):
    """``analyze_sem_links`` for one sentence: (input pieces, [(target position, FE position)] as zipped by
    ``get_max_source_target_weight``) or (pieces, None) when a target/FE piece is not in the cut input."""
    cls, sep = tokenizer.cls_token, tokenizer.sep_token
    if cls is None or sep is None:
        raise ValueError(f"{type(tokenizer).__name__} has no cls/sep token: cannot build [CLS] sentence [SEP]")
    pieces = [cls, *tokenizer.tokenize(text)[:max_len - 3], sep]
    try:
        target_idx = [pieces.index(p) for p in tokenizer.tokenize(text[target[0]:target[1]])]
        source_idx = [pieces.index(p) for fe in links for p in tokenizer.tokenize(text[fe.start:fe.end])]
    except ValueError:
        return pieces, None
    return pieces, [(t, f) for f, t in zip(source_idx, target_idx)]


def _prepare_notebook(loaded, fn, batch_size: int):
    from ...engine.batching import Encoded, Skipped
    from ...engine.passes import PreparedPass

    tok, info = loaded.tokenizer, loaded.info
    encoded, pairs, lengths, kept_records = [], [], [], []
    skipped = Skipped(reason="")
    for k, r in enumerate(fn.records):
        pieces, pr = notebook_pairs(tok, r.text, r.target_spans[0], r.links)
        if pr is None:
            skipped.n += 1
            skipped.indices.append(k)
            continue
        ids = tok.convert_tokens_to_ids(pieces)
        i = len(encoded)
        encoded.append(Encoded(i, ids, [0] * len(ids), [-1] * len(ids), 0))
        pairs.append(pr)
        lengths.append(len(pieces) - 2)
        kept_records.append((r, pieces))
    skipped.reason = ("sentence(s) whose target or FE piece is not in the 20-piece input (the notebook's "
                      "bert_tokens.index would raise)") if skipped.n else ""
    ex_index = next((i for i, (r, _) in enumerate(kept_records) if r.annoset_id == fn.example.annoset_id), None)

    def finish(result: FrameResult) -> FrameResult:
        maps = result.example.pop("maps")
        result.description = fn.description
        if ex_index is None or maps is None:
            return result
        ex, pieces = kept_records[ex_index]
        (t0, f0) = pairs[ex_index][0]
        # cell 71/72: the row of the first FE piece ("he"); a hit is its argmax on a target piece
        row_of = f0
        result.example = {"annoset_id": ex.annoset_id, "labels": pieces, "row": row_of, "lu": ex.lu,
                          "frame": ex.frame, "hits": sorted({t for t, _ in pairs[ex_index]}),
                          "exclude": [0, len(pieces) - 1, row_of], "fe_names": [fe.name for fe in ex.links],
                          "what": f"the row of {pieces[row_of]!r} (the FE's first piece, notebook cells 71-72), argmax "
                                  f"over the other sentence pieces", "rows": maps[:, :, row_of, :len(pieces)]}
        return result

    return PreparedPass("framenet", "notebook", fn.description, loaded, encoded, skipped,
                        lambda: FrameReducer(pairs, lengths, info.n_layers, info.n_heads, info.device,
                                             example_index=ex_index, level="piece", offset=1),
                        finish=finish, with_words=False, batch_size=batch_size, data_paths=fn.paths)


@family("framenet", corpora=("notebook", "one_per_lu", "all"), default_corpus="notebook", tier_corpora=TIER_CORPORA)
def prepare_framenet(loaded, data_dir: Path, corpus: str = "notebook", limit: int | None = None,
                     batch_size: int = 32):
    """Kovaleva §4.2 on FrameNet 1.5 exemplars (filters and n per step in ``data/framenet_corpus.py``)."""
    from ...data.framenet_corpus import load_corpus
    from ...engine.batching import drop_too_long, encode_words
    from ...engine.passes import PreparedPass

    fn = load_corpus(data_dir, corpus, limit)
    if corpus == "notebook":
        return _prepare_notebook(loaded, fn, batch_size)
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, r.words) for i, r in enumerate(fn.records)],
                                     loaded.info.max_positions)
    pairs = [r.link_pairs() for r in fn.records]
    ex_index = next(i for i, r in enumerate(fn.records) if r.annoset_id == fn.example.annoset_id)
    info = loaded.info

    def finish(result: FrameResult) -> FrameResult:
        ex = fn.records[ex_index]
        maps = result.example.pop("maps")
        target = ex.target_words[0]
        result.example = {"annoset_id": ex.annoset_id, "labels": ex.words, "row": target, "lu": ex.lu,
                          "frame": ex.frame, "hits": sorted({w for fe in ex.links for w in fe.words}),
                          "exclude": [target], "fe_names": [fe.name for fe in ex.links],
                          "what": f"the row of the target {ex.words[target]!r} (word-level), argmax over the other words",
                          "rows": None if maps is None else maps[:, :, target, :len(ex.words)]}
        result.description = fn.description
        return result

    return PreparedPass("framenet", corpus, fn.description, loaded, encoded, skipped,
                        lambda: FrameReducer(pairs, [len(r.words) for r in fn.records], info.n_layers, info.n_heads,
                                             info.device, example_index=ex_index),
                        finish=finish, with_words=True, batch_size=batch_size, data_paths=fn.paths)
