"""The architecture matrix (issue 10): a tiny randomly initialised model of each text encoder transformers ships,
built from its config with the embedded tokenizer, either read and measured or refused with one line.

For each architecture :func:`probe` records

* **load**: :func:`bertattn_bench.engine.model.model_from_config` loads it (the load-time check saw every layer's attention,
  rows summing to 1) or refuses it (:class:`ModelLoadError`, one line: architecture, reason, what is supported);
* **reading**: the largest difference between the observed maps and the model's own ``output_attentions`` from an
  ``attn_implementation="eager"`` copy with the same weights, on a padded batch;
* **uniform attention** (Kovaleva §4.6) and **head masking** (Michel §3, :func:`attention.gate_heads`): exact when
  the intervened model's output equals an independent reference edited in the weights: a head whose query and key
  projections are zero has scores 0 + mask, i.e. uniform attention over the real keys; a head whose value
  projection is zero outputs 0, i.e. gate ξ_h = 0;
* **families**: every attention family's pass on a toy data folder (two or three examples, :func:`toy_data_dir`),
  then every claim of the family evaluated: measured or skipped with its reason, never a crash.

``scripts/architectures.py`` prints the matrix as docs/architectures.md's Markdown table; ``tests/test_architectures.py``
asserts it. A support module of the tests (and of those scripts), not of the package: it reads the checkout's
``fixtures/``, which the wheel does not carry (issue 44).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bertattn_bench.base.errors import ModelLoadError
from bertattn_bench.engine import attention

SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=64)
# families whose passes read attention (finetune/disable fine-tune on GLUE: their interventions are the two columns;
# arct is model-free)
FAMILIES = ("surface", "dependency", "coref", "probes", "clustering", "gradient")


@dataclass(frozen=True)
class Arch:
    label: str
    model_type: str
    overrides: dict = field(default_factory=dict)

    def config(self, vocab_size: int):
        from transformers import AutoConfig

        kw = {**SHAPE, "vocab_size": vocab_size, **self.overrides}
        kw = {k: v for k, v in kw.items() if v is not None}
        return AutoConfig.for_model(self.model_type, **kw)


MATRIX: tuple[Arch, ...] = (
    Arch("BERT", "bert"),
    Arch("BERT, 1 layer x 1 head", "bert", dict(num_hidden_layers=1, num_attention_heads=1)),
    Arch("BERT, 3 layers x 5 heads", "bert", dict(num_hidden_layers=3, num_attention_heads=5, hidden_size=40)),
    Arch("RoBERTa", "roberta"),
    Arch("XLM-R", "xlm-roberta"),
    Arch("XLM-R XL", "xlm-roberta-xl"),
    Arch("RoBERTa-PreLayerNorm", "roberta-prelayernorm"),
    Arch("CamemBERT", "camembert"),
    Arch("ELECTRA", "electra", dict(embedding_size=16)),
    Arch("ERNIE", "ernie"),
    Arch("Data2Vec-text", "data2vec-text"),
    Arch("MobileBERT", "mobilebert", dict(embedding_size=16, intra_bottleneck_size=32, true_hidden_size=32,
                                          num_feedforward_networks=1)),
    Arch("LayoutLM", "layoutlm"),
    Arch("MarkupLM", "markuplm"),
    Arch("Splinter", "splinter"),
    Arch("DistilBERT", "distilbert"),
    Arch("ALBERT", "albert", dict(embedding_size=16)),
    Arch("ALBERT, 3 layers in 2 groups", "albert", dict(embedding_size=16, num_hidden_layers=3, num_hidden_groups=2)),
    Arch("ALBERT, inner_group_num 2", "albert", dict(embedding_size=16, inner_group_num=2)),
    Arch("X-MOD", "xmod", dict(default_language="en_XX")),
    # ModernBERT: layer 1 global attention, layer 2 local (sliding window, here wider than the toy inputs)
    Arch("ModernBERT", "modernbert", dict(global_attn_every_n_layers=2)),
    Arch("ModernBERT, local window of 5 tokens", "modernbert", dict(global_attn_every_n_layers=2, local_attention=4)),
    Arch("EuroBERT", "eurobert"),
    Arch("GTE", "gte"),
    Arch("NomicBERT", "nomic_bert"),
    Arch("Jina embeddings v3", "jina_embeddings_v3"),
    Arch("UltraBERT", "ultrabert"),
    Arch("RoCBERT", "roc_bert"),
    Arch("BertGeneration (encoder)", "bert-generation"),
    Arch("MegatronBERT", "megatron-bert"),
    Arch("DeBERTa", "deberta", dict(relative_attention=True, pos_att_type=["c2p", "p2c"])),
    # DeBERTa-v3's attention: disentangled c2p/p2c scores, log-bucketed relative positions, shared key projections
    Arch("DeBERTa-v2/v3", "deberta-v2", dict(relative_attention=True, pos_att_type=["p2c", "c2p"],
                                             share_att_key=True, position_buckets=16, max_relative_positions=-1,
                                             norm_rel_ebd="layer_norm")),
    Arch("DeBERTa-v2, separate position keys", "deberta-v2", dict(relative_attention=True,
                                                                  pos_att_type=["p2c", "c2p"], share_att_key=False)),
    Arch("MPNet", "mpnet"),
    Arch("RoFormer", "roformer"),
    Arch("ConvBERT", "convbert"),
    Arch("RemBERT", "rembert", dict(input_embedding_size=16, output_embedding_size=16)),
    Arch("Nystromformer", "nystromformer"),
    Arch("BigBird, full attention", "big_bird", dict(attention_type="original_full")),
    Arch("BigBird, block-sparse", "big_bird"),
    Arch("LUKE", "luke"),
    Arch("I-BERT", "ibert"),
    Arch("Longformer", "longformer", dict(attention_window=4)),
    Arch("FNet", "fnet"),
    Arch("SqueezeBERT", "squeezebert", dict(embedding_size=32)),
    Arch("Funnel", "funnel", dict(num_hidden_layers=None, block_sizes=[1, 1], d_model=32, n_head=4, d_head=8,
                                  architectures=["FunnelModel"],  # AutoModel needs it to choose FunnelModel
                                  d_inner=64)),
    Arch("CANINE", "canine"),
    Arch("MRA", "mra"),
    Arch("YOSO", "yoso"),
    Arch("XLM", "xlm", dict(emb_dim=32, n_layers=2, n_heads=4)),
    Arch("FlauBERT", "flaubert", dict(emb_dim=32, n_layers=2, n_heads=4)),
    Arch("TAPAS", "tapas"),
    Arch("LiLT", "lilt"),
    Arch("BROS", "bros"),
    Arch("XLNet", "xlnet", dict(max_position_embeddings=None, d_model=32, n_layer=2, n_head=4, d_inner=64)),
)


@dataclass
class Probe:
    arch: Arch
    refused: str | None = None  # the one-line ModelLoadError
    n_layers: int = 0
    n_heads: int = 0
    reading_diff: float | None = None  # max |observed - eager output_attentions|; None: not loaded
    uniform_diff: float | None = None  # max |intervened - weight-edited reference| of the last hidden state
    gates_diff: float | None = None
    path: str = ""  # attention.INTERFACE or attention.OWN_CODE
    train_loss: float | None = None  # fine-tuning on the toy pairs (finetune_and_sweep)
    sweep_diff: float | None = None  # max |swept - alone| over configurations, uniform and mask
    train_precision: str = ""  # "bf16 autocast", or "fp32 (bf16 autocast fails: ...)" (finetune.bf16_failure)
    families: dict = field(default_factory=dict)  # family -> (measured claims, skipped claims, first skip reason)
    norms: str = ""  # the norms family (Kobayashi et al.): how it splits the attention output, or why refused

    EXACT = 1e-5

    @property
    def uniform_exact(self) -> bool:
        return self.uniform_diff is not None and self.uniform_diff < self.EXACT

    @property
    def gates_exact(self) -> bool:
        return self.gates_diff is not None and self.gates_diff < self.EXACT


def build(arch: Arch, tokenizer):
    """The tiny model of ``arch`` (seed 0, CPU) through the project's loader: a LoadedModel or a ModelLoadError."""
    from bertattn_bench.engine.model import model_from_config

    config = arch.config(tokenizer.vocab_size)
    # special-token ids of a config made for another vocabulary (ModernBERT's 50283): the tokenizer's, by role
    for attr, role in (("pad_token_id", "pad"), ("bos_token_id", "cls"), ("eos_token_id", "sep"),
                       ("cls_token_id", "cls"), ("sep_token_id", "sep")):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value >= tokenizer.vocab_size:
            setattr(config, attr, getattr(tokenizer, f"{role}_token_id"))
    return model_from_config(config, tokenizer, f"tiny-{arch.model_type}",
                             f"tiny-{arch.model_type}", seed=0, device="cpu")


def _inputs(loaded, tokenizer):
    from bertattn_bench.engine.batching import model_inputs

    return model_inputs(loaded.model, tokenizer(["the cat sat on the mat", "a dog"], ["it was tired .", "no"],
                                                padding=True, return_tensors="pt"))


def _eager_twin(loaded):
    from transformers import AutoModel

    ref = AutoModel.from_config(copy.deepcopy(loaded.model.config), attn_implementation="eager")
    ref.load_state_dict(loaded.model.state_dict())
    return ref.eval()


def reading_diff(loaded, tokenizer) -> float:
    """max |observed maps - the eager model's own output_attentions| over layers, on a padded pair batch."""
    enc = _inputs(loaded, tokenizer)
    seen: dict[int, torch.Tensor] = {}
    with torch.no_grad(), attention.attention_run(loaded.model, observe=lambda l, p: seen.__setitem__(l, p.clone())):
        loaded.model(**enc)
    with torch.no_grad():
        theirs = _eager_twin(loaded)(**enc, output_attentions=True).attentions
    if theirs is None or len(theirs) != len(seen) or sorted(seen) != list(range(len(theirs))):
        return float("inf")
    return max(float((seen[i] - theirs[i]).abs().max()) for i in range(len(theirs)))


# Projection names of an attention block, (query, key, value); fused projections hold q, k, v in thirds.
_QKV = (("query", "key", "value"), ("q_lin", "k_lin", "v_lin"), ("query_proj", "key_proj", "value_proj"),
        ("q", "k", "v"), ("q_proj", "k_proj", "v_proj"))
_FUSED = ("Wqkv",)  # [q | k | v], each head-major
_INTERLEAVED = ("in_proj",)  # DeBERTa: per head [q_h | k_h | v_h]
_POS_KEYS = ("pos_proj", "pos_key_proj")  # DeBERTa's relative-position keys (c2p) when not the key projection


def _linear(m, name):
    """A linear projection (nn.Linear, or I-BERT's QuantLinear: anything with a 2-D weight)."""
    lin = getattr(m, name, None)
    w = getattr(lin, "weight", None)
    return lin if isinstance(lin, torch.nn.Module) and isinstance(w, torch.Tensor) and w.dim() == 2 else None


def _block(model, mod):
    """The attention block of ``mod`` (a module calling the interface, or an own-code model's probability module):
    the nearest module, ``mod`` or an ancestor, that holds the projections."""
    parents = {c: p for p in model.modules() for c in p.children()}
    m = mod
    while m is not None:
        if _per_head_params(m) or any(all(_linear(m, n) is not None for n in names) for names in _QKV) \
                or any(_linear(m, n) is not None for n in _FUSED + _INTERLEAVED):
            return m
        m = parents.get(m)
    raise AssertionError(f"{type(mod).__name__}: no attention projections above it")


def _per_head_params(m) -> bool:
    """XLNet's projections: parameters q, k, v, r of shape (d_model, heads, d_head)."""
    return all(isinstance(getattr(m, n, None), torch.nn.Parameter) and getattr(m, n).dim() == 3 for n in "qkvr")


def _zero_rows(lin, start: int, stop: int) -> None:
    with torch.no_grad():
        lin.weight[start:stop] = 0
        if getattr(lin, "bias", None) is not None:
            lin.bias[start:stop] = 0


def _zero_head(model, block, which: int, head: int, n_heads: int) -> None:
    """Zero head ``head``'s rows of the key (``which=1``) or value (``which=2``) projection of ``block``; for a
    key, also the head's column of a relative-position bias shared by the layers (MPNet), so its scores are 0."""
    if _per_head_params(block):  # XLNet: scores (q + u)·k + (q + v)·r (no segment term without token types)
        with torch.no_grad():
            for n in ("kr" if which == 1 else "v"):
                getattr(block, n)[:, head] = 0
        return
    for names in _QKV:
        if all(_linear(block, n) is not None for n in names):
            lin = _linear(block, names[which])
            d = lin.weight.shape[0] // n_heads
            _zero_rows(lin, head * d, (head + 1) * d)
            break
    else:
        fused = [n for n in _FUSED if _linear(block, n) is not None]
        if fused:
            lin = _linear(block, fused[0])
            third = lin.weight.shape[0] // 3
            d = third // n_heads
            _zero_rows(lin, which * third + head * d, which * third + (head + 1) * d)
        else:  # interleaved per head, with DeBERTa's separate q/v biases
            lin = next(_linear(block, n) for n in _INTERLEAVED if _linear(block, n) is not None)
            d = lin.weight.shape[0] // 3 // n_heads
            _zero_rows(lin, head * 3 * d + which * d, head * 3 * d + (which + 1) * d)
            bias = getattr(block, ("q_bias", "k_bias", "v_bias")[which], None)
            if isinstance(bias, torch.Tensor):
                with torch.no_grad():
                    bias.view(-1)[head * d:(head + 1) * d] = 0
    if which == 1:
        for n in _POS_KEYS:
            lin = _linear(block, n)
            if lin is not None:
                d = lin.weight.shape[0] // n_heads
                _zero_rows(lin, head * d, (head + 1) * d)
        for name, emb in model.named_modules():
            if name.endswith("relative_attention_bias") and isinstance(emb, torch.nn.Embedding) \
                    and emb.embedding_dim == n_heads:
                with torch.no_grad():
                    emb.weight[:, head] = 0


def intervention_diffs(loaded, tokenizer) -> tuple[float, float]:
    """(uniform, gates): max |intervened - weight-edited reference| of the last hidden state over the real tokens,
    for the last head of every layer. References: the head's key projection zero (scores 0 + mask: uniform over
    the real keys; also a shared relative-position bias's column), or its value projection zero (output 0)."""
    n_layers, n_heads = loaded.info.n_layers, loaded.info.n_heads
    head = n_heads - 1
    enc = _inputs(loaded, tokenizer)
    heads = [(layer, head) for layer in range(n_layers)]
    out = {}
    with torch.no_grad():
        with attention.attention_run(loaded.model, edit_probs=attention.uniform_attention(heads)):
            out["uniform"] = loaded.model(**enc).last_hidden_state
        gates = attention.zero_heads(n_layers, n_heads, heads)
        with attention.attention_run(loaded.model, head_gates=gates):
            out["gates"] = loaded.model(**enc).last_hidden_state
    diffs = []
    real = enc["attention_mask"].bool()
    for kind, which in (("uniform", 1), ("gates", 2)):
        ref = copy.deepcopy(loaded.model)
        blocks = list(dict.fromkeys(_block(ref, m) for m in attention.attention_modules(ref)))
        for block in blocks:
            _zero_head(ref, block, which, head, n_heads)
        with torch.no_grad():
            expected = ref(**enc).last_hidden_state
        diffs.append(float((out[kind] - expected)[real].abs().max()))
    return diffs[0], diffs[1]


_PAIRS = [("the cat sat on the mat", "a cat sat on a mat"), ("dogs bark", "the market fell"),
          ("she reads old books", "old books are read by her"), ("it rained", "the sun shone all day"),
          ("he plays chess", "chess is played by him"), ("a red car", "blue skies"),
          ("birds sing at dawn", "at dawn birds sing"), ("prices rose", "the team won")]


def finetune_and_sweep(loaded, tokenizer) -> tuple[float, float, str]:
    """Fine-tuning (1 epoch, 8 toy MRPC-style pairs, batch 4) under bf16 autocast where the model's code runs under
    it, else in fp32 (the trainer's fallback, :func:`finetune.bf16_failure`; forced rather than chosen by the CPU, so
    the row is the same on every machine), and the batched disabling/masking sweep on it (none, every head, every
    layer; each batch row its own configuration): returns (last epoch's training loss, max |swept logits - the same
    configuration run alone| over the configurations and both kinds, the training precision)."""
    import math

    from bertattn_bench.data import glue
    from bertattn_bench.training import glue_finetune as finetune
    from bertattn_bench.training import sweeps

    t = glue.task("mrpc")
    rows = [glue.Example(a, b, float(i % 2), f"toy:{i + 1}") for i, (a, b) in enumerate(_PAIRS)]
    data = finetune.encode_split(tokenizer, rows, min(64, loaded.info.max_positions))
    model = finetune.task_model(loaded, t, seed=0)
    failure = finetune.bf16_failure(model, tokenizer)
    precision = f"fp32 (bf16 autocast fails: {failure})" if failure else "bf16 autocast"
    log = finetune.train(model, t, data, tokenizer,
                         finetune.Recipe(epochs=1, batch_size=4, bf16_autocast=failure is None), seed=0)
    model.eval()
    n_l, n_h = attention.layers_heads(model)
    configs = [[]] + [[(l, h)] for l in range(n_l) for h in range(n_h)] + [[(l, h) for h in range(n_h)]
                                                                          for l in range(n_l)]
    worst = 0.0
    for kind in ("uniform", "mask"):
        swept = sweeps.sweep(model, data, tokenizer, configs, kind=kind, rows_per_pass=12, examples_per_batch=4)
        for c, heads in enumerate(configs):
            iv = (attention.Intervention("probs", attention.uniform_attention(heads)) if kind == "uniform"
                  else attention.gate_heads(attention.zero_heads(n_l, n_h, heads)))
            alone = finetune.predict(model, data, tokenizer, batch_size=4, interventions=[iv])
            worst = max(worst, float(abs(swept[c] - alone).max()))
    loss = float(log["loss_per_epoch"][-1])
    return (loss if math.isfinite(loss) else float("nan")), worst, precision


# ---- the toy data folder: two or three examples per corpus --------------------------------------------------------

_SENTS = [
    [("The", 2, "det", "DET"), ("cat", 3, "nsubj", "NOUN"), ("sat", 0, "root", "VERB"), ("on", 6, "case", "ADP"),
     ("the", 6, "det", "DET"), ("mat", 3, "obl", "NOUN"), (".", 3, "punct", "PUNCT")],
    [("She", 2, "nsubj", "PRON"), ("reads", 0, "root", "VERB"), ("old", 4, "amod", "ADJ"),
     ("books", 2, "obj", "NOUN"), (",", 6, "punct", "PUNCT"), ("slowly", 2, "advmod", "ADV"),
     (".", 2, "punct", "PUNCT")],
]


def toy_conllu(doc_id: str) -> str:
    out = [f"# newdoc id = {doc_id}"]
    for s, words in enumerate(_SENTS):
        out += [f"# sent_id = {doc_id}-{s + 1}", "# text = " + " ".join(w for w, *_ in words)]
        out += [f"{i + 1}\t{w}\t{w.lower()}\t{u}\t_\t_\t{h}\t{r}\t_\t_" for i, (w, h, r, u) in enumerate(words)]
        out.append("")
    return "\n".join(out) + "\n"


def toy_data_dir(root: Path) -> Path:
    """WikiText-2 test, UD EWT/GUM dev and test, GUM documents (the coreference fixture as a dev document, two
    train documents): enough for every attention family's default corpus."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "coref" / "GUM_toy_coref.conllu"
    (root / "wikitext2_raw").mkdir(parents=True, exist_ok=True)
    text = " The cat sat on the mat . It was tired , so it slept . The dog barked at the cat . "
    (root / "wikitext2_raw" / "wiki.test.raw").write_text(
        " \n = Cats = \n \n" + text * 3 + "\n \n = Dogs = \n \n" + text * 2 + "\n", encoding="utf-8")
    for corpus in ("ud_english_ewt/en_ewt-ud-dev.conllu", "ud_english_ewt/en_ewt-ud-test.conllu",
                   "ud_english_gum/en_gum-ud-test.conllu"):
        (root / corpus).parent.mkdir(parents=True, exist_ok=True)
        (root / corpus).write_text(toy_conllu("GUM_x_" + corpus.split("-")[-1][:-7]), encoding="utf-8")
    docs = root / "gum" / "documents"
    docs.mkdir(parents=True, exist_ok=True)
    (docs / fixture.name).write_text(fixture.read_text(encoding="utf-8"), encoding="utf-8")
    (root / "ud_english_gum" / "en_gum-ud-dev.conllu").write_text(fixture.read_text(encoding="utf-8"),
                                                                   encoding="utf-8")
    (docs / "GUM_x_test.conllu").write_text(toy_conllu("GUM_x_test"), encoding="utf-8")
    for d in range(2):
        (docs / f"GUM_y_train{d}.conllu").write_text(toy_conllu(f"GUM_y_train{d}"), encoding="utf-8")
    return root


def run_families(loaded, data_dir: Path, families=FAMILIES, limit: int = 3) -> dict:
    """Every attention family's default pass (``limit`` examples) and every claim of it evaluated, by the runner
    (the same steps as a run of the suite, on the model object, no cache, no baseline): family -> (claims measured,
    claims skipped, the first skip reason). A crash propagates."""
    from bertattn_bench.claims.catalog import load_claims
    from bertattn_bench.claims.registry import families as registered
    from bertattn_bench.engine.passes import NothingToMeasure
    from bertattn_bench.runner.options import RunOptions
    from bertattn_bench.runner.plan import Target
    from bertattn_bench.runner.session import Runner

    name = loaded.info.name
    runner = Runner(RunOptions(models=[name], data_dir=data_dir, limit=limit, batch_size=2, tier="regression",
                               cache_dir=None, check_baseline=False), loaded={name: loaded})
    out = {}
    for fam in families:
        target = Target(name, registered()[fam].default_corpus, fam)
        result = runner.result(target)
        measured, skipped, reasons = 0, 0, []
        for claim in load_claims(family=fam):
            if isinstance(result.result, NothingToMeasure):
                skipped, reasons = skipped + 1, reasons + [result.result.reason]
                continue
            o = runner.outcome(claim, target)
            if o.skipped:
                skipped, reasons = skipped + 1, reasons + [o.skipped]
            else:
                measured += 1
        out[fam] = (measured, skipped, reasons[0] if reasons else "")
    return out


def probe(arch: Arch, tokenizer, data_dir: Path | None = None) -> Probe:
    """Load ``arch``'s tiny model (or record the refusal), then reading, interventions and (with ``data_dir``)
    the families."""
    p = Probe(arch)
    try:
        loaded = build(arch, tokenizer)
    except ModelLoadError as exc:
        p.refused = str(exc)
        return p
    p.n_layers, p.n_heads = loaded.info.n_layers, loaded.info.n_heads
    p.reading_diff = reading_diff(loaded, tokenizer)
    p.uniform_diff, p.gates_diff = intervention_diffs(loaded, tokenizer)
    p.path = attention.site(loaded.model).path
    p.norms = norms_split(loaded)
    if data_dir is not None:
        p.families = run_families(loaded, data_dir)
        p.train_loss, p.sweep_diff, p.train_precision = finetune_and_sweep(loaded, tokenizer)
    return p


def norms_split(loaded) -> str:
    """The norms family's reading of a loaded model: alpha f(x) with the residual ratios, alpha f(x) only, or the
    refusal's reason (:func:`bertattn_bench.engine.attention_norms.norm_site`)."""
    from bertattn_bench.engine import attention_norms as norms

    try:
        ns = norms.norm_site(loaded.model)
    except norms.NormsRefused as exc:
        return "**refused**: " + str(exc).split("refused by the norms family: ", 1)[-1]
    return "‖αf(x)‖ and every mixing ratio" if ns.residual else "‖αf(x)‖, Attn-W/N, AttnRes-W (no LayerNorm over attention output + layer input, e.g. pre-LN: no AttnRes-N, AttnResLn-N)"


def norms_markdown(probes: list[Probe]) -> str:
    """The norms family's table: each read architecture's split of its attention output into alpha f(x)."""
    rows = ["| architecture (`model_type`) | norms family (Kobayashi et al.; the identity sum alpha f + b_O = the "
            "output projection's output: tests/test_norms.py) |", "|---|---|"]
    rows += [f"| {p.arch.label} (`{p.arch.model_type}`) | {p.norms} |" for p in probes if not p.refused]
    return "\n".join(rows) + "\n"


def markdown(probes: list[Probe]) -> str:
    """The table of architectures (docs/architectures.md)."""
    rows = ["| architecture (`model_type`) | path | tiny shape | reading (= eager `output_attentions`) "
            "| uniform attention | head masking / gates | fine-tune + sweep (precision: loss; sweep = alone) "
            "| families (claims measured / skipped with a reason) |",
            "|---|---|---|---|---|---|---|---|"]
    for p in probes:
        name = f"{p.arch.label} (`{p.arch.model_type}`)"
        if p.refused:
            why = p.refused.split(" is not supported: ", 1)[-1].split(", so its attention maps")[0]
            rows.append(f"| {name} | | | **refused**: {why} | — | — | — | — |")
            continue
        fams = ", ".join(f"{f} {m}/{s}" for f, (m, s, _) in p.families.items()) or "not run"
        read = f"yes (max diff {p.reading_diff:.0e})" if p.reading_diff is not None and p.reading_diff < 1e-5 \
            else f"**differs** ({p.reading_diff:.2g})"
        ft = "not run" if p.sweep_diff is None else (
            f"{p.train_precision}: loss {p.train_loss:.3f}; {'exact' if p.sweep_diff < Probe.EXACT else '**differs**'} "
            f"(max diff {p.sweep_diff:.0e})")
        rows.append(f"| {name} | {p.path} | {p.n_layers}x{p.n_heads} | {read} "
                    f"| {'exact' if p.uniform_exact else 'NOT exact'} | {'exact' if p.gates_exact else 'NOT exact'} "
                    f"| {ft} | {fams} |")
    return "\n".join(rows) + "\n"
