"""Settings read from options or environment variables (never hard-coded paths)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import BenchError, DataError

DATA_DIR_ENV = "BERTATTN_DATA_DIR"
MODEL_ENV = "BERTATTN_MODEL"
DEVICE_ENV = "BERTATTN_DEVICE"
SEED_ENV = "BERTATTN_SEED"
SEEDS_ENV = "BERTATTN_SEEDS"
TIER_ENV = "BERTATTN_TIER"
CACHE_ENV = "BERTATTN_CACHE_DIR"
PRECISION_ENV = "BERTATTN_FT_PRECISION"
ALLOW_DOWNLOAD_ENV = "BERTATTN_ALLOW_DOWNLOAD"
ASSUME_SHAPE_ENV = "BERTATTN_ASSUME_SHAPE"
PRUNE_EXACT_ENV = "BERTATTN_PRUNE_EXACT"
DATA_HOME_ENV = "BERTATTN_DATA_HOME"  # the default data folder (``data fetch``'s destination), when set
DATA_MIRROR_ENV = "BERTATTN_DATA_MIRROR"
RAW_HOST_ENV = "BERTATTN_RAW_HOST"  # tests: the base URL serving raw files per commit (owner/name/COMMIT/PATH)
ARCHIVE_HOST_ENV = "BERTATTN_ARCHIVE_HOST"  # tests: the base URL serving archives per commit (owner/name/tar.gz/COMMIT)
OFFLINE_ENV = "BERTATTN_OFFLINE"
VALIDATE_OUTPUTS_ENV = "BERTATTN_VALIDATE_OUTPUTS"
SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
FUZZ_EXAMPLES_ENV = "BERTATTN_FUZZ_EXAMPLES"

# Every environment variable the package reads, and what it means: the one table (read them with env()).
ENVIRONMENT = {
    DATA_DIR_ENV: "the data folder (--data-dir)",
    DATA_HOME_ENV: "the default data folder (data fetch's destination; default ~/.cache/bertattn-bench/data)",
    DATA_MIRROR_ENV: "a mirror base URL holding the data folder's layout (data fetch --mirror)",
    RAW_HOST_ENV: "base URL of the host of raw files per commit (default the real one; tests point it at loopback)",
    ARCHIVE_HOST_ENV: "base URL of the host of per-commit archives (default the real one; tests point it at loopback)",
    OFFLINE_ENV: "1: never download data; a missing corpus stops a run at start-up (--offline)",
    "XDG_CACHE_HOME": "the user cache folder the default data folder sits in",
    MODEL_ENV: "models to test, comma-separated (--model)",
    DEVICE_ENV: "auto, cpu, cuda, cuda:N (--device)",
    SEED_ENV: "training seed of the probes and of the fine-tunes a tier trains with one seed (default 0)",
    SEEDS_ENV: "how many training seeds, from BERTATTN_SEED on, each seed-dependent family trains (default: the "
               "tier's: quick 1, regression 5 for MRPC, 3 for the probes and ARCT)",
    TIER_ENV: "quick, regression, full (--tier)",
    CACHE_ENV: "the pass and checkpoint cache folder (--cache-dir)",
    PRECISION_ENV: "fine-tuning precision: auto, bf16, fp32, recipe",
    ALLOW_DOWNLOAD_ENV: "1: let transformers download a hub model",
    ASSUME_SHAPE_ENV: "judge claims naming a paper model's heads on a model of another shape",
    PRUNE_EXACT_ENV: "1: recompute head importance before every pruning step also in the regression tier",
    VALIDATE_OUTPUTS_ENV: "1: validate every JSON document against its shipped schema as it is written (the tests)",
    SUMMARY_ENV: "a file the Markdown job summary is appended to (GitHub Actions sets it)",
    FUZZ_EXAMPLES_ENV: "the readers' property tests: generated bad inputs per reader (tests only; default 40)",
    "CI": "set: no progress bars",
    "HF_HUB_OFFLINE": "set: say so when a hub model is missing (read, never set)",
    "TRANSFORMERS_OFFLINE": "as HF_HUB_OFFLINE",
}


def env(name: str, default: str = "") -> str:
    """The value of one of :data:`ENVIRONMENT`'s variables (``default`` when unset); a name not in the table is a
    bug, not a setting."""
    if name not in ENVIRONMENT:
        raise KeyError(f"{name}: not in settings.ENVIRONMENT (add it there with its meaning)")
    return os.environ.get(name, default)


def _flag(name: str) -> bool:
    return env(name).strip().lower() in ("1", "true", "yes")


def from_environment() -> dict:
    """Every run setting the environment gives, read once, as :class:`~bertattn_bench.runner.options.RunOptions`
    fields (only those set; a face lays its options over them). Called by the faces only: below them every setting
    is an argument, so a run's values depend on its options and its provenance records them all."""
    out: dict = {}
    for field_name, name in (("data_dir", DATA_DIR_ENV), ("device", DEVICE_ENV), ("tier", TIER_ENV),
                             ("cache_dir", CACHE_ENV), ("assume_shape", ASSUME_SHAPE_ENV)):
        if env(name).strip():
            out[field_name] = env(name).strip()
    if "data_dir" in out:
        out["data_dir_source"] = DATA_DIR_ENV
    out["data_home"] = str(default_data_home())
    models = [m for m in env(MODEL_ENV).split(",") if m]
    if models:
        out["models"] = models
    if env(SEED_ENV).strip():
        out["seed"] = training_seed()
    if env(SEEDS_ENV).strip():
        out["n_seeds"] = seed_count()
    if env(PRECISION_ENV).strip():
        out["precision"] = env(PRECISION_ENV).strip().lower()  # checked by RunOptions.check
    if env(PRUNE_EXACT_ENV).strip() == "1":
        out["prune_exact"] = True
    if _flag(ALLOW_DOWNLOAD_ENV):
        out["allow_download"] = True
    if env("HF_HUB_OFFLINE") or env("TRANSFORMERS_OFFLINE"):
        out["hub_offline"] = True
    if env(OFFLINE_ENV).strip() not in ("", "0"):
        out["offline"] = True  # no data download
    if env(DATA_MIRROR_ENV).strip():
        out["data_mirror"] = env(DATA_MIRROR_ENV).strip()
    out["progress"] = not env("CI")
    return out


def default_data_home() -> Path:
    """Where ``data fetch`` puts the corpora and runs look when neither --data-dir nor $BERTATTN_DATA_DIR is given:
    ``$BERTATTN_DATA_HOME``, else ``${XDG_CACHE_HOME:-~/.cache}/bertattn-bench/data``."""
    home = env(DATA_HOME_ENV)
    if home:
        return Path(home).expanduser()
    return builtin_data_home(env("XDG_CACHE_HOME") or None)


def builtin_data_home(cache_home: str | None = None) -> Path:
    """The default data folder with no variable set: ``~/.cache/bertattn-bench/data`` (``cache_home``: the XDG
    cache folder a face read)."""
    return Path(cache_home or Path.home() / ".cache").expanduser() / "bertattn-bench" / "data"


def seed_count() -> int:
    """How many training seeds each seed-dependent family trains (``$BERTATTN_SEEDS``), a whole number >= 1."""
    value = env(SEEDS_ENV).strip()
    try:
        n = int(value)
    except ValueError:
        raise DataError(f"{SEEDS_ENV}={value!r}: not a whole number (how many training seeds, e.g. {SEEDS_ENV}=5)") \
            from None
    if n < 1:
        raise DataError(f"{SEEDS_ENV}={value!r}: at least one seed")
    return n


def training_seed(default: int = 0) -> int:
    """The seed of trained measurements (probe initialisation, training order, held-out split) from
    ``$BERTATTN_SEED``; ``default`` when unset. The data samples keep their own seed, so n does not move with it:
    runs under several seeds measure how far a trained value moves (scripts/probe_spread.py)."""
    value = env(SEED_ENV).strip()
    if not value:
        return default
    try:
        seed = int(value)
    except ValueError:
        raise DataError(f"{SEED_ENV}={value!r}: not an integer (a training seed, e.g. {SEED_ENV}=1)") from None
    if seed < 0:
        raise DataError(f"{SEED_ENV}={value!r}: a seed must be >= 0")
    return seed


def explicit_data_dir(option: str | None = None) -> tuple[str, str] | None:
    """(value, where it came from) of a data folder named by ``--data-dir`` or ``$BERTATTN_DATA_DIR``; None when
    neither names one (the default data folder is used: the only one a run may fill by fetching)."""
    if option:
        return option, "--data-dir"
    value = env(DATA_DIR_ENV)
    return (value, DATA_DIR_ENV) if value else None


def resolve_data_dir(option: str | None = None) -> Path:
    """The data directory from ``--data-dir`` or ``$BERTATTN_DATA_DIR`` (it must exist and hold files: it is read as
    given, never written), else the default data folder (:func:`default_data_home`; a run fetches what it lacks
    there unless offline)."""
    named = explicit_data_dir(option)
    if named is None:
        return default_data_home().resolve()
    return check_data_dir(*named)


def check_data_dir(value: str, source: str = "--data-dir") -> Path:
    """A data folder named by ``source`` (``--data-dir``, ``$BERTATTN_DATA_DIR``, ``data_dir=``): it must exist and
    hold files (it is read as given, never written). Reads no variable: the runner's check of what a face passed."""
    path = Path(value).expanduser()
    if not path.is_dir():
        raise DataError(f"{source}={value!r}: no such directory")
    if not any(path.iterdir()):
        raise DataError(f"{source}={value!r}: the directory is empty")
    return path.resolve()


def data_hosts() -> tuple[str | None, str | None]:
    """(raw-file host, archive host) base URLs named by ``$BERTATTN_RAW_HOST`` / ``$BERTATTN_ARCHIVE_HOST`` (tests:
    loopback servers with the real hosts' URL layouts); None for the real one (``manifest.Hosts.of``)."""
    return env(RAW_HOST_ENV) or None, env(ARCHIVE_HOST_ENV) or None


def data_file(data_dir: Path, relative: str) -> Path:
    path = data_dir / relative
    if not path.exists():
        raise DataError(f"missing data file {path} (looked under the data directory {data_dir}; "
                        f"set --data-dir / {DATA_DIR_ENV} to the folder that holds {relative.split('/')[0]}/)")
    return path


# --- option checks: each raises a one-line BenchError naming the option; the pytest plugin and the CLI turn it
# into a usage error (exit status 4) at start-up, before any model or data is loaded.

def whole_number(option: str, value) -> int | None:
    """An option's text as an int (None and ints pass through): ``--limit abc`` is one line naming the option, not
    argparse's usage screen. Its range is :func:`positive_int`'s to check."""
    if value is None or isinstance(value, int):
        return value
    text = str(value).strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        raise _not_positive(option, value)
    return int(text)


def positive_int(option: str, value) -> int | None:
    """``value`` as an int >= 1 (None stays None: the option was not given)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _not_positive(option, value)
    return value


def _not_positive(option: str, value) -> BenchError:
    return BenchError(f"{option} {value}: must be a whole number >= 1")


def parse_random_model(name: str, prefix: str = "random:") -> tuple[str, int] | None:
    """``random:<model>[@seed]`` -> (model, seed); None for a name without the prefix."""
    if not name.startswith(prefix):
        return None
    base, at, seed_text = name[len(prefix):].partition("@")
    if at and not seed_text.strip().lstrip("-").isdigit():
        raise BenchError(f"--model {name}: the seed after '@' must be a whole number (e.g. {prefix}{base or 'embedded'}@0)")
    return base, int(seed_text) if at else 0


def parse_corpus_options(entries: list[str], known: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """``--corpus family=a,b`` entries -> {family: [corpus, ...]}; ``known`` maps each family to its corpora."""
    chosen: dict[str, list[str]] = {}
    for entry in entries:
        fam, eq, names = entry.partition("=")
        if not eq:
            raise BenchError(f"--corpus {entry}: expected family=corpus[,corpus] (e.g. dependency=ewt_dev,gum_dev)")
        if fam not in known:
            raise BenchError(f"--corpus {entry}: unknown family {fam!r}; known: {', '.join(known)}")
        corpora = [c.strip() for c in names.split(",") if c.strip()]
        if not corpora:
            raise BenchError(f"--corpus {entry}: name at least one {fam} corpus; known: {', '.join(known[fam])}")
        unknown = [c for c in corpora if c not in known[fam]]
        if unknown:
            raise BenchError(f"--corpus {entry}: unknown {fam} corpus {', '.join(unknown)}; "
                             f"known: {', '.join(known[fam])}")
        if fam in chosen:
            raise BenchError(f"--corpus {entry}: {fam} is already given (--corpus {fam}={','.join(chosen[fam])}); "
                             f"name all its corpora in one option")
        chosen[fam] = corpora
    return chosen


def output_dir(option: str, value: str | None) -> Path | None:
    """A folder the run may write into at the end: it is a folder, or can be created (checked before the work)."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise BenchError(f"{option} {value}: is a file, not a folder (name a folder; it is created if missing)")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise BenchError(f"{option} {value}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BenchError(f"{option} {value}: {parent} is not writable")
    return path
