"""Issue 10's matrix: a tiny model of every text encoder transformers ships is either read (maps equal to its own
eager output_attentions, uniform attention and head masking exact against weight-edited references, every attention
family's pass and claims run or skip with a reason) or refused at load with one line naming the architecture, the
reason and what is supported. Never a crash, never a value from attention that was not observed."""
import warnings

import architecture_matrix as A
import pytest

# refused: no softmax map over the input tokens that a module boundary carries (issue 25); everything else is read
REFUSED = {"ALBERT, inner_group_num 2", "Nystromformer", "BigBird, block-sparse", "Longformer", "FNet", "SqueezeBERT",
           "Funnel", "CANINE", "MRA", "YOSO", "LiLT", "BROS"}
READ = {a.label for a in A.MATRIX} - REFUSED
# model types whose own code fails under bf16 autocast (transformers 5.24: DeBERTa v1 masks with float32's min, X-MOD
# index-puts bf16 into float32): they train in fp32, the trainer's fallback
BF16_FAILS = {"deberta", "xmod"}
# issue 25: at least 30 model types read, these among them
MUST_READ = {"deberta-v2", "mpnet", "modernbert", "deberta", "megatron-bert", "roformer", "rembert", "luke", "ibert",
             "convbert", "xlnet", "big_bird", "bert", "roberta", "distilbert", "albert", "xlm", "flaubert"}


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add overhead (the matrix is 4x faster on 2 shared cores)
    yield A.toy_data_dir(tmp_path_factory.mktemp("toy_data"))
    torch.set_num_threads(threads)


def test_matrix_labels_are_unique_and_every_supported_one_is_listed():
    labels = [a.label for a in A.MATRIX]
    assert len(labels) == len(set(labels))
    assert REFUSED <= set(labels)
    read_types = {a.model_type for a in A.MATRIX if a.label in READ}
    assert len(read_types) >= 30 and MUST_READ <= read_types, sorted(read_types)


@pytest.mark.parametrize("arch", A.MATRIX, ids=[a.label for a in A.MATRIX])
def test_architecture_is_read_exactly_or_refused_in_one_line(arch, tokenizer, toy_data):
    warnings.filterwarnings("ignore")
    p = A.probe(arch, tokenizer, toy_data)
    if arch.label not in READ:
        assert p.refused is not None, f"{arch.label} loaded: it should be refused (or added to READ)"
        assert "\n" not in p.refused
        assert " is not supported: " in p.refused and "(supported: " in p.refused
        assert f"({arch.model_type})" in p.refused
        return
    assert p.refused is None, p.refused
    assert p.reading_diff is not None and p.reading_diff < 1e-5, f"observed maps differ from eager by {p.reading_diff}"
    assert p.uniform_exact, f"uniform attention differs from the zero-query/key reference by {p.uniform_diff}"
    assert p.gates_exact, f"head masking differs from the zero-value reference by {p.gates_diff}"
    assert p.path in (A.attention.INTERFACE, A.attention.OWN_CODE, A.attention.SEAM)
    assert p.train_loss is not None and p.train_loss == p.train_loss, "fine-tuning gave no finite loss"
    assert p.sweep_diff is not None and p.sweep_diff < 1e-5, f"the batched sweep differs from one-by-one by {p.sweep_diff}"
    # trained under bf16 autocast where the model's code allows it (the default on bf16 hardware), else in fp32
    assert p.train_precision == "bf16 autocast" or (p.arch.model_type in BF16_FAILS
                                                    and p.train_precision.startswith("fp32 (bf16 autocast fails")), \
        (arch.label, p.train_precision)
    assert set(p.families) == set(A.FAMILIES)
    for family, (measured, skipped, reason) in p.families.items():
        assert measured + skipped > 0
        assert skipped == 0 or reason, f"{family}: a claim skipped without a reason"
    assert sum(m for m, _, _ in p.families.values()) > 0


@pytest.mark.parametrize("label, why", [("FNet", "Fourier mixing"), ("Longformer", "window of keys"),
                                         ("SqueezeBERT", "leave no module"),
                                         ("Funnel", "map is 4x8 for 8 input tokens"),
                                         ("BigBird, block-sparse", "returns no attention maps")])
def test_refusals_name_architecture_reason_and_what_is_supported(tokenizer, label, why):
    from bertattn_bench.base.errors import ModelLoadError

    arch = next(a for a in A.MATRIX if a.label == label)
    with pytest.raises(ModelLoadError, match=why) as exc:
        A.build(arch, tokenizer)
    assert "DistilBERT" in str(exc.value) and "MPNet" in str(exc.value)


@pytest.mark.parametrize("label", ["DeBERTa-v2/v3", "MPNet", "XLNet", "ConvBERT"])
def test_own_code_models_take_the_module_path_and_bert_keeps_the_interface(tokenizer, label):
    """Own-code attention is read at the module that outputs the probabilities; BERT-like models keep the attention
    interface (the fallback must not make them slower)."""
    own = A.build(next(a for a in A.MATRIX if a.label == label), tokenizer)
    assert A.attention.site(own.model).path == A.attention.OWN_CODE
    bert = A.build(next(a for a in A.MATRIX if a.label == "BERT"), tokenizer)
    assert A.attention.site(bert.model).path == A.attention.INTERFACE


def test_modernbert_local_layer_is_read_with_its_window(tokenizer):
    """ModernBERT's second layer attends within a sliding window: the observed map is 0 outside it, as the eager
    model's own output_attentions (reading_diff compares them), and rows still sum to 1."""
    import torch

    loaded = A.build(next(a for a in A.MATRIX if a.label == "ModernBERT, local window of 5 tokens"), tokenizer)
    enc = tokenizer(["one two three four five six seven eight nine ten"], return_tensors="pt")
    seen = {}
    with torch.no_grad(), A.attention.attention_run(loaded.model, observe=lambda l, p: seen.__setitem__(l, p)):
        loaded.model(**enc)
    t = enc["input_ids"].shape[1]
    far = (torch.arange(t)[:, None] - torch.arange(t)[None, :]).abs() > 2
    assert float(seen[1][0][:, far].abs().max()) == 0.0
    assert float(seen[0][0][:, far].min()) > 0.0  # the global layer attends everywhere
    assert A.reading_diff(loaded, tokenizer) < 1e-6


def test_albert_layers_are_counted_per_call(tokenizer):
    """ALBERT's one attention module computes every layer: each call is given its own layer (3 layers, 2 groups)."""
    import torch

    loaded = A.build(next(a for a in A.MATRIX if a.label == "ALBERT, 3 layers in 2 groups"), tokenizer)
    seen = []
    enc = tokenizer(["a b c"], return_tensors="pt")
    for _ in range(2):  # the count restarts with every forward pass
        with torch.no_grad(), A.attention.attention_run(loaded.model, observe=lambda l, p: seen.append(l)):
            loaded.model(**enc)
    assert seen == [0, 1, 2, 0, 1, 2]


def test_roberta_positions_leave_room_for_the_padding_offset(tokenizer):
    """RoBERTa numbers positions from padding_idx + 1: 64 embeddings hold 62 positions (the passes cut to it)."""
    loaded = A.build(next(a for a in A.MATRIX if a.label == "RoBERTa"), tokenizer)
    assert loaded.info.max_positions == 64 - 1 - 1
    assert A.build(next(a for a in A.MATRIX if a.label == "BERT"), tokenizer).info.max_positions == 64


@pytest.mark.parametrize("label, prunable", [("BERT", True), ("DistilBERT", True), ("MPNet", False),
                                             ("ModernBERT", False), ("XLM", False), ("ALBERT", False)])
def test_head_pruning_says_where_it_cannot_remove_heads(tokenizer, label, prunable):
    """Removing heads from the weights (Michel §4's speed-up) knows BERT-like modules; elsewhere the speedup family
    skips with this reason (gates still mask heads)."""
    from bertattn_bench.engine import head_removal as head_pruning

    loaded = A.build(next(a for a in A.MATRIX if a.label == label), tokenizer)
    reason = head_pruning.cannot_prune(loaded.model)
    assert (reason is None) == prunable, reason
    if not prunable:
        assert "cannot be removed" in reason and "\n" not in reason


@pytest.mark.parametrize("label, types", [("BERT", True), ("MPNet", False), ("DeBERTa-v2/v3", False),
                                          ("ModernBERT", False), ("XLM-R XL", False), ("XLNet", False)])
def test_one_input_builder_gives_token_types_only_where_the_model_has_them(tokenizer, label, types):
    """batching.model_inputs: token types only where type_vocab_size >= 2 and the forward takes them; a task model
    wrapping the encoder asks the same question of its encoder."""
    from bertattn_bench.engine.batching import model_inputs

    loaded = A.build(next(a for a in A.MATRIX if a.label == label), tokenizer)
    enc = tokenizer(["a b"], ["c"], return_tensors="pt")
    got = model_inputs(loaded.model, enc)
    assert ("token_type_ids" in got) == types
    assert set(got) >= {"input_ids", "attention_mask"}
    loaded.model(**got)  # the model takes what it is given
