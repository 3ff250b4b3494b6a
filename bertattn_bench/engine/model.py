"""Model loading: a Hugging Face hub name, a local folder, the embedded default, or a random-init twin (what a
loaded model is, :class:`ModelInfo` and :class:`LoadedModel`, is :mod:`.model_info`, named here as well).

Every model is loaded with the project's attention implementation (``attention.ATTN_IMPLEMENTATION``, eager
maths with a reading/intervention point) and put in ``eval()`` mode. Failures name the model and say how to fix
them; there is never a silent fallback to another model.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from ..base.errors import BenchError, ModelLoadError, one_line
from ..base.settings import ALLOW_DOWNLOAD_ENV, parse_random_model
from . import attention
from .model_info import (
    DEVICE_TYPES,
    EMBEDDED,
    EMBEDDED_NAME,
    RANDOM_PREFIX,
    GivenTask,
    LoadedModel,
    ModelInfo,
    as_given_names,
    choose_device,
    embedded_model_path,
    is_classifier_config,
    is_classifier_object,
    slugify,
)

__all__ = ["DEVICE_TYPES", "EMBEDDED", "EMBEDDED_NAME", "RANDOM_PREFIX", "GivenTask", "LoadedModel", "ModelInfo",
           "as_given_names", "choose_device", "embedded_model_path", "is_classifier_config", "is_classifier_object",
           "slugify", "baseline_slugs", "Hub", "LOCAL_ONLY", "load_model", "load_config", "verify_attention_observed",
           "weights_digest", "measured_copy", "wrap_model", "model_from_config", "random_twin"]


def _resolve_source(name: str) -> tuple[str, str, str]:
    """Return (source for from_pretrained, readable name, slug)."""
    if name in (None, "", EMBEDDED):
        return str(embedded_model_path()), f"{EMBEDDED}:{EMBEDDED_NAME}", EMBEDDED_NAME
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"--model {name!r}: the folder exists but has no config.json (not a saved model)")
        return str(path.resolve()), str(path), slugify(path.resolve().name)
    if name.startswith((".", "/", "~")):
        raise ModelLoadError(f"--model {name!r}: no such folder")
    return name, name, slugify(name.replace("/", "--"))




def baseline_slugs(names) -> list[str]:
    """The slugs whose baselines a run of ``names`` records (a random-init twin and a model object record none; a
    name that does not resolve is left to the model's load error)."""
    out = []
    for name in names:
        if isinstance(name, str) and not name.startswith(RANDOM_PREFIX):
            try:
                out.append(_resolve_source(name)[2])
            except BenchError:
                continue
    return out


@dataclass(frozen=True)
class Hub:
    """How hub names resolve: from the local Hugging Face cache only, unless the run allows downloads (its
    allow_download option, $BERTATTN_ALLOW_DOWNLOAD=1 as the face read it: no retries against an unreachable hub on
    offline machines, an explicit opt-in where a network exists); ``offline``: the hub is known offline
    (HF_HUB_OFFLINE), which a load error says."""

    allow_download: bool = False
    offline: bool = False

    def kwargs(self) -> dict:
        return {"local_files_only": not self.allow_download}


LOCAL_ONLY = Hub()


def _check_folder(source: str, name: str) -> None:
    """A local model folder: its config.json must be a JSON object naming a model_type (the real cause first, not
    a misleading "not in the Hugging Face cache")."""
    import json

    config = Path(source) / "config.json"
    if not Path(source).is_dir() or not config.is_file():
        return
    try:
        doc = json.loads(config.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelLoadError(f"--model {name}: {config} is not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ModelLoadError(f"--model {name}: {config} line {exc.lineno} column {exc.colno}: not valid JSON "
                             f"({exc.msg})") from None
    if not isinstance(doc, dict) or "model_type" not in doc:
        raise ModelLoadError(f"--model {name}: {config} has no \"model_type\" (not a transformers model config)")


def _folder_error(name: str, source: str, exc: Exception) -> ModelLoadError:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return ModelLoadError(f"--model {name}: loading the folder {source} failed: {type(exc).__name__}: {first}")


def _load_tokenizer(source: str, name: str, hub: Hub = LOCAL_ONLY):
    from transformers import AutoTokenizer

    _check_folder(source, name)
    tok = _from_source(AutoTokenizer.from_pretrained, source, name, hub=hub)
    if not getattr(tok, "is_fast", False):
        raise ModelLoadError(f"--model {name!r}: a fast tokenizer is needed (word_ids() maps pieces to words)")
    return tok


def _from_source(load, source: str, name: str, hub_name: str | None = None, hub: Hub = LOCAL_ONLY, **kwargs):
    """``load(source, **kwargs)`` (a ``from_pretrained``), any failure turned into the project's error: a folder's
    (what the folder lacks) where ``source`` exists on disk, else the hub's (offline, not in the local cache)."""
    try:
        return load(source, **kwargs, **hub.kwargs())
    except Exception as exc:
        if Path(source).exists():
            raise _folder_error(name, source, exc) from exc
        raise _hub_error(hub_name or name, exc, hub.offline) from exc


def _hub_error(name: str, exc: Exception, offline: bool = False) -> ModelLoadError:
    """``offline``: the run's own reading of HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE (``base.settings``, passed down by
    the face as ``hub_offline``); this floor reads no environment, not even through the hub library's constants."""
    return ModelLoadError(
        f"could not load model {name!r}: it is not a local folder and its weights are not in the Hugging Face "
        f"cache{' (HF_HUB_OFFLINE is set)' if offline else ''}. Provide weights: on a machine with network run "
        f"`hf download {name} --local-dir DIR` (or `save_pretrained(DIR)`), copy DIR here and pass `--model DIR`; "
        f"or, where this machine has network, set {ALLOW_DOWNLOAD_ENV}=1 to let transformers download it. "
        f"Underlying error: {one_line(exc, 300)}"
    )


def _max_positions(model, tok) -> int:
    """Longest input the position embeddings take: RoBERTa-style embeddings number positions from padding_idx + 1
    (roberta-base: 514 embeddings, 512 positions), so ``max_position_embeddings`` alone overstates it."""
    cfg = model.config
    n = int(getattr(cfg, "max_position_embeddings", 0) or 0)
    if n <= 0:  # relative positions only (XLNet says -1): the tokenizer's limit
        n = int(tok.model_max_length)
    for name, mod in model.named_modules():
        weight, pad = getattr(mod, "weight", None), getattr(mod, "padding_idx", None)
        # nn.Embedding, or I-BERT's QuantEmbedding: a (positions, dim) table with a padding index
        if name.endswith("position_embeddings") and isinstance(weight, torch.Tensor) and weight.dim() == 2 \
                and isinstance(pad, int):
            n = min(n, int(weight.shape[0]) - pad - 1)
    return n


def _info(model, tok, name: str, slug: str, source: str, device: torch.device, seed: int | None) -> ModelInfo:
    cfg = model.config
    has_mlm = any(type(m).__name__.endswith(("LMPredictionHead", "LMHead")) for m in model.modules())
    return ModelInfo(
        name=name,
        slug=slug,
        n_layers=int(cfg.num_hidden_layers),
        n_heads=attention.site(model).n_heads,  # the softmax heads (ConvBERT: its self-attention heads only)
        max_positions=_max_positions(model, tok),
        has_mlm_head=has_mlm,
        attn_implementation=f"{attention.ATTN_IMPLEMENTATION} (eager softmax(QK^T/sqrt(d)+mask))",
        device=str(device),
        cls_token_id=int(tok.cls_token_id),
        sep_token_id=int(tok.sep_token_id),
        pad_token_id=int(tok.pad_token_id),
        random_init_seed=seed,
        source=source,
        extra={"model_class": type(model).__name__, "hidden_size": int(getattr(cfg, "hidden_size", 0)),
               "config_sha256": hashlib.sha256(cfg.to_json_string(use_diff=False).encode()).hexdigest()[:16],
               "lowercases": tok.tokenize("The Cat") == tok.tokenize("the cat")},
    )


def load_model(name: str | None = EMBEDDED, device: str | None = None, with_mlm_head: bool = False,
               allow_download: bool = False, offline: bool = False, task: str | None = None) -> LoadedModel:
    """Load a BERT-like encoder for attention analysis.

    ``name``: ``embedded`` (default), a local folder, a hub name, or ``random:<any of those>[@seed]`` for the
    randomly initialised twin of that model's config (the negative control; weights never loaded).
    ``allow_download``: let transformers download a hub model; ``offline``: the hub is known offline (said in errors).
    ``task``: the model is a sequence-classification model fine-tuned on this task, judged as given (its head is
    kept: :class:`GivenTask`); a checkpoint without a classification head is refused.
    """
    hub = Hub(allow_download, offline)
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM

    dev = choose_device(device)
    attention.register()
    name = name or EMBEDDED
    if name.startswith(RANDOM_PREFIX):
        try:
            base, seed = parse_random_model(name, RANDOM_PREFIX)
        except BenchError as exc:
            raise ModelLoadError(str(exc)) from None
        source, base_name, base_slug = _resolve_source(base or EMBEDDED)
        _check_folder(source, base_name)
        config = _from_source(AutoConfig.from_pretrained, source, base_name, hub=hub)
        tok = _load_tokenizer(source, base_name, hub)
        return model_from_config(config, tok, f"random-init({base_name})@{seed}", f"random-init-{base_slug}-seed{seed}",
                                 seed=seed, device=device, with_mlm_head=with_mlm_head, source=source)
    source, readable, slug = _resolve_source(name)
    tok = _load_tokenizer(source, readable, hub)
    if task is not None:
        return _load_task_model(source, name, readable, slug, task, dev, hub, tok)
    cls = AutoModelForMaskedLM if with_mlm_head else AutoModel
    # float32 whatever the checkpoint's dtype (transformers 5 keeps it by default): statistics need the precision
    model, loading = _from_source(cls.from_pretrained, source, name, readable, hub,
                                  attn_implementation=attention.ATTN_IMPLEMENTATION, dtype=torch.float32,
                                  output_loading_info=True)
    prefix = getattr(model, "base_model_prefix", "")
    missing_head = [k for k in loading.get("missing_keys", []) if not k.startswith(prefix + ".")]
    if with_mlm_head and missing_head:  # transformers would silently give a randomly initialised head
        raise ModelLoadError(f"--model {name!r}: the checkpoint has no masked-LM head weights "
                             f"(missing {missing_head[:3]}...); claims that need an MLM head cannot use it")
    return _finish(model, tok, readable, slug, source, dev, None)


def _load_task_model(source, name, readable, slug, task, dev, hub, tok) -> LoadedModel:
    from transformers import AutoModelForSequenceClassification

    clf, loading = _from_source(AutoModelForSequenceClassification.from_pretrained, source, name, readable, hub,
                                attn_implementation=attention.ATTN_IMPLEMENTATION, dtype=torch.float32,
                                output_loading_info=True)
    prefix = getattr(clf, "base_model_prefix", "")
    head = [k for k in loading.get("missing_keys", []) if not k.startswith(prefix + ".")]
    if head:  # transformers would silently give a randomly initialised head: that is not the user's model
        raise ModelLoadError(f"--model {name!r} --task-model {task}: the checkpoint has no classification head "
                             f"(missing {sorted(head)[:3]}): it is not a fine-tuned {task} classifier (leave out "
                             f"--task-model to measure its encoder)")
    return _given(clf.eval().to(dev), tok, readable, slug, source, dev, task)


def _given(clf, tok, name, slug, source, dev, task, digest: str | None = None) -> LoadedModel:
    name, slug = as_given_names(name, slug, task)
    digest = digest or weights_digest(clf)
    loaded = _finish(clf.base_model, tok, name, slug, source, dev, None)
    cfg = clf.config
    loaded.task = GivenTask(task, clf, digest, int(cfg.num_labels), getattr(cfg, "problem_type", None),
                            source or "object")
    loaded.info.extra.update({"as_given": task, "classifier_sha256": digest, "classifier_class": type(clf).__name__})
    return loaded


def load_config(name: str | None = EMBEDDED, allow_download: bool = False, offline: bool = False):
    """The config of a model :func:`load_model` would load (no weights read); errors as its."""
    from transformers import AutoConfig

    source, readable, _ = _resolve_source(name or EMBEDDED)
    _check_folder(source, readable)
    return _from_source(AutoConfig.from_pretrained, source, readable, hub=Hub(allow_download, offline))


def _finish(model, tok, name, slug, source, dev, seed) -> LoadedModel:
    import transformers

    transformers.logging.set_verbosity_error()  # e.g. "sequence longer than max length" while counting pieces
    model.eval().to(dev)
    attention.attention_modules(model, int(model.config.num_hidden_layers))  # refuses unsupported models early
    info = _info(model, tok, name, slug, source, dev, seed)
    verify_attention_observed(model, tok, info)
    return LoadedModel(model=model, tokenizer=tok, info=info)


def verify_attention_observed(model, tok, info: ModelInfo) -> None:
    """One forward pass on a short pair: every layer's attention must reach the observer (a model whose attention
    is computed in its own code never calls the registered function, and its statistics would silently stay 0),
    and every real query's row must sum to 1 over the real keys. A model that fails is refused, never measured."""
    from .batching import model_inputs

    enc = model_inputs(model, tok("The cat sat.", "It was tired.", return_tensors="pt").to(info.device))
    seen: dict[int, torch.Tensor] = {}
    arch = type(model).__name__
    try:
        with torch.inference_mode(), attention.attention_run(model, observe=lambda l, p: seen.__setitem__(l, p)):
            model(**enc)
    except Exception as exc:  # e.g. a model that needs inputs a text encoder does not give (bbox, language ids)
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        if getattr(model.config, "model_type", None) in attention.OWN_ATTENTION:  # the known reason, not the symptom
            raise ModelLoadError(attention.unsupported(model)) from None
        raise ModelLoadError(attention.unsupported(model, f"a forward pass on a text pair failed ({type(exc).__name__}: "
                                                          f"{first})")) from None
    if len(seen) != info.n_layers:
        raise ModelLoadError(attention.unsupported(
            model, f"attention was observed in {len(seen)} of {info.n_layers} layers: "
                   f"{attention.own_attention_reason(model)}"))
    real = enc["attention_mask"][0].bool()
    for layer, probs in seen.items():
        sums = probs[0][:, real][:, :, real].sum(-1)
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
            raise ModelLoadError(f"{arch} ({info.name}): layer {layer + 1}'s attention rows do not sum to 1 over the "
                                 f"real tokens (max deviation {float((sums - 1).abs().max()):.3g}): refused")


def weights_digest(model: torch.nn.Module) -> str:
    """sha256 over a model's parameters and buffers (names, dtypes, shapes, bytes): what makes an in-memory model
    the same model for the cache, whatever object holds it."""
    h = hashlib.sha256()
    for name, t in sorted({**dict(model.named_parameters()), **dict(model.named_buffers())}.items()):
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def measured_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A float32 copy of ``model`` in the project's attention implementation, as :func:`load_model` gives a model it
    loads; ``model`` itself is never touched. Models whose code follows transformers' attention interface switch
    implementation on the copy; the others (MPNet, DeBERTa, RoFormer, ...: their code cannot switch after loading)
    are built again from a copy of their config with the implementation set, and the copy's weights loaded into
    them (every parameter and buffer, strictly), which is what loading them by name does."""
    import copy

    attention.register()
    ours = attention.ATTN_IMPLEMENTATION
    clone = copy.deepcopy(model).to(dtype=torch.float32)
    if getattr(clone, "_supports_attention_backend", False):  # the others only log that they cannot switch
        try:
            clone.set_attn_implementation(ours)
        except Exception:  # noqa: BLE001 - rebuilt below
            pass
    if getattr(clone.config, "_attn_implementation", None) == ours:
        return clone
    config = copy.deepcopy(clone.config)
    try:
        rebuilt = type(clone)._from_config(config, attn_implementation=ours, dtype=torch.float32)
        missing, unexpected = rebuilt.load_state_dict(clone.state_dict(), strict=False)
    except Exception as exc:  # a model whose code offers no attention interface at all (docs/architectures.md)
        raise ModelLoadError(attention.unsupported(clone, f"it cannot be rebuilt with attention implementation "
                                                          f"{ours!r} ({type(exc).__name__}: {str(exc)[:200]})")) from None
    persistent = {k for k, _ in rebuilt.named_buffers()} - set(rebuilt.state_dict())
    missing = [k for k in missing if k not in persistent]
    if missing or unexpected:
        raise ModelLoadError(f"{type(clone).__name__}: rebuilding it with attention implementation {ours!r} left "
                             f"weights unmatched (missing {missing[:3]}, unexpected {unexpected[:3]})")
    return rebuilt.to(next(clone.parameters()).device)


def wrap_model(model: torch.nn.Module, tokenizer, name: str | None = None, device: str | None = None,
               task: str | None = None) -> LoadedModel:
    """A model object the caller holds (a notebook's, a training loop's), measured as a loaded one would be.

    The caller's object is left as it is: a copy (float32, eval mode, the project's attention implementation) is
    measured. A task model (``...ForSequenceClassification``, ``...ForMaskedLM``) is measured through its encoder
    (``model.base_model``), unless ``task`` names the task a classifier is judged on as given (its head kept). Its name is ``name`` or ``object:<the config's name or path>``; its slug and the cache
    key carry a digest of its weights, so two objects with the same weights share cached passes and a changed
    weight is never served a stale one."""

    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):  # said first: what the object is
        raise ModelLoadError(f"model={type(model).__name__} object: not a model (expected a name, a folder, a "
                             f"transformers model object with tokenizer=..., or a LoadedModel)")
    if tokenizer is None:
        raise ModelLoadError("an in-memory model needs its tokenizer: pass tokenizer=... beside model=...")
    if task is not None:  # a task model judged as given: the whole model is copied, head included
        if getattr(model, "base_model", model) is model or not hasattr(model.config, "num_labels"):
            raise ModelLoadError(f"task={task!r}: {type(model).__name__} is not a sequence-classification model "
                                 f"(leave out task= to measure it as an encoder)")
        measured = measured_copy(model).eval()
    else:
        measured = measured_copy(getattr(model, "base_model", model))
    digest = weights_digest(measured)
    base = name or f"object:{getattr(measured.config, '_name_or_path', '') or type(model).__name__}"
    slug = f"{slugify(Path(base.split(':', 1)[-1]).name or type(model).__name__)}-w{digest[:10]}"
    dev = choose_device(device)
    loaded = (_given(measured.to(dev), tokenizer, base, slug, "", dev, task, digest) if task is not None
              else _finish(measured, tokenizer, base, slug, "", dev, None))
    loaded.info.extra["weights_sha256"] = digest
    return loaded


def model_from_config(config, tokenizer, name: str, slug: str, seed: int = 0, device: str | None = None,
                      with_mlm_head: bool = False, source: str = "config") -> LoadedModel:
    """A randomly initialised model of ``config`` (the negative control; tiny models in the unit tests)."""
    import copy

    from transformers import AutoModel, AutoModelForMaskedLM

    attention.register()
    config = copy.deepcopy(config)  # never change the caller's config
    torch.manual_seed(seed)
    cls = AutoModelForMaskedLM if with_mlm_head else AutoModel
    try:
        model = cls.from_config(config, attn_implementation=attention.ATTN_IMPLEMENTATION)
    except Exception as exc:  # a config transformers cannot build (or no masked-LM class for it): one line
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ModelLoadError(f"{name}: building a {getattr(config, 'model_type', '?')} model from its config failed: "
                             f"{type(exc).__name__}: {first}") from None
    return _finish(model, tokenizer, name, slug, source, choose_device(device), seed)


def random_twin(loaded: LoadedModel, seed: int = 0) -> LoadedModel:
    """The randomly initialised twin of ``loaded`` (same config, normal init seeded by ``seed``): the same model,
    name and slug as ``load_model(f"random:{name}@{seed}")``, so caches keyed by it are shared."""
    info = loaded.info
    if info.random_init_seed is not None:
        return loaded
    return model_from_config(loaded.model.config, loaded.tokenizer, f"random-init({info.name})@{seed}",
                             f"random-init-{info.slug}-seed{seed}", seed=seed, device=info.device, source=info.source)
