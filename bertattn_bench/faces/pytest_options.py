"""The pytest face's options, declared once: the entry point registers them as ``--bertattn-NAME``, the
:mod:`bertattn_bench.faces.short_options` plugin as ``--NAME``; both spellings land in one destination, read with
:func:`option`. Light: nothing but the table."""
from __future__ import annotations

# (name, argparse keywords): registered as --bertattn-NAME here, and as --NAME by short_options; one dest each
OPTIONS = [
    ("model", dict(action="append", default=None,
                   help="model to test: 'embedded' (default), a local folder, a Hugging Face name, or "
                        "'random:<model>[@seed]' (random-init twin). Repeatable. Env: BERTATTN_MODEL (comma-separated)")),
    ("data-dir", dict(default=None, help="folder with the data sets (env: BERTATTN_DATA_DIR)")),
    ("device", dict(default=None, help="auto (default: CUDA when present), cpu, cuda, cuda:N (env: BERTATTN_DEVICE)")),
    ("corpus", dict(action="append", default=[],
                    help="family=corpus[,corpus] e.g. dependency=ewt_dev,gum_dev (each family's corpora and default: "
                         "`bertattn-bench list --families`)")),
    # no argparse type or choices below: the runner checks each value with a one-line message naming the option
    # (exit 4), where argparse would print pytest's usage screen
    ("limit", dict(default=None, metavar="N", help="at most N examples per corpus (smoke runs; n is reported)")),
    ("batch-size", dict(default=32, metavar="N", help="examples per forward pass (default 32)")),
    ("claims-report", dict(default=None, metavar="DIR",
                           help="write claims.md, claims.csv, claims.json, run.json, the matrix and figures to DIR")),
    ("self-contained", dict(action="store_true",
                            help="--claims-report: embed the figures in matrix.html (one file to send; default: "
                                 "linked, figures/NAME.png)")),
    ("record-baseline", dict(default=None, metavar="DIR", nargs="?", const="",
                             help="record every measured claim value as the model's baseline (default DIR: the "
                                  "package's reference_numbers/baselines)")),
    ("compare-to", dict(default=None, metavar="MODEL_OR_JSON",
                        help="judge every model against another model's recorded baseline (a model name/slug or a "
                             "baseline JSON file): a claim that held there and does not hold here is a regression")),
    ("compare-fail-on", dict(default="lost", metavar="lost|flips|never",
                             help="what fails a --compare-to run: lost (default: a claim that clearly held there does "
                                  "not hold or is inconclusive here), flips (any verdict changed, either way), never (report only)")),
    ("offline", dict(action="store_true",
                     help="never download data: a corpus missing from the data folder stops the run at start-up "
                          "(env BERTATTN_OFFLINE=1; default: the default data folder is filled with what it lacks)")),
    ("task-model", dict(default=None, metavar="TASK",
                        help="the model is a sequence-classification model fine-tuned on TASK (mrpc, rte, sts-b, "
                             "sst-2, qnli): the fine-tuning families judge it as given instead of fine-tuning its "
                             "encoder (default: its config's finetuning_task; else it is measured as an encoder)")),
    ("eval-data", dict(action="append", default=[], metavar="TASK=SOURCE[,KEY=VALUE...]",
                       help="a task's evaluation data from a datasets folder (save_to_disk), a Parquet/CSV/JSON(L) "
                            "file or hub:NAME[:CONFIG] in the local datasets cache, instead of the shipped TSV; keys: "
                            "split=, train_split=, text=, text_pair=, label= (column names). Repeatable")),
    ("cache-dir", dict(default=None, help="pass-result cache (default .bertattn_cache; env BERTATTN_CACHE_DIR)")),
    ("no-cache", dict(action="store_true", help="recompute every pass; read and write no cache")),
    ("time-cores", dict(action="store_true",
                        help="recompute and time every pass even when the cache holds it (default: a cached pass "
                             "is loaded and not timed, so a warm re-run takes seconds)")),
    ("tier", dict(default=None, metavar="quick|regression|full",
                  help="budget (env BERTATTN_TIER): quick (default) = a smoke run of every family in minutes; "
                       "regression = the recorded tier (whole dev corpora, MRPC 3 epochs, five seeds; about an hour "
                       "cold on 2 cores, minutes from its cache); full = four GLUE tasks, seeds, the fine-tuned "
                       "twin (hours)")),
]


def dest(name: str) -> str:
    return "bertattn_" + name.replace("-", "_")


def add_options(parser, short: bool = False) -> None:
    """The options, as ``--bertattn-NAME`` or (``short``) as ``--NAME``, both into the same destination."""
    g = parser.getgroup("bertattn", "bertattn-bench claim benchmarks")
    for name, kwargs in OPTIONS:
        g.addoption(f"--{name}" if short else f"--bertattn-{name}", dest=dest(name), **kwargs)


def option(config, name: str):
    """An option's value whichever spelling gave it."""
    return config.getoption(dest(name))
