"""Shared fixtures for the unit tests: a tiny BERT built from a config (no weights) and the embedded tokenizer."""
import atexit
import os
import shutil
import tempfile

# the unit tests read files through `datasets` (a user's eval set as JSON or CSV), which converts each into an Arrow
# copy under its cache: a folder of this process's own, removed when it ends, not the user's ~/.cache/huggingface
_DATASETS_CACHE = tempfile.mkdtemp(prefix="bertattn-tests-datasets-")
atexit.register(shutil.rmtree, _DATASETS_CACHE, True)
os.environ["HF_DATASETS_CACHE"] = _DATASETS_CACHE

import pytest  # noqa: E402
import torch  # noqa: E402
import torch._dynamo  # noqa: F401,E402

import bertattn_bench.engine.model  # noqa: F401,E402
import bertattn_bench.faces.pytest_session  # noqa: F401,E402

# pytester's in-process runs (runpytest_inprocess) drop the modules first imported inside them when they end. Loading
# a model imports torch._dynamo, whose import registers torch operator libraries that cannot be registered twice, so
# the next run that loads one failed (RuntimeError: Only a single TORCH_LIBRARY ...); and a test that patches the
# package's model loader patched a module object an earlier run had dropped, while the run imported a fresh one.
# Both happened wherever no earlier test had imported these (tests/test_startup_errors.py alone, or with
# tests/test_api.py after it). Imported once here, they stay for every in-process run.

# every JSON document a test writes (claims.json, run.json, baselines, matrix.json; also in the pytest subprocesses
# the tests start) is validated against its shipped schema when written: a mismatch fails that test (issue 37)
os.environ.setdefault("BERTATTN_VALIDATE_OUTPUTS", "1")
# ... and in this process, where the tests call the library below the faces (which read the variable)
from bertattn_bench.base.documents import validate_outputs  # noqa: E402

validate_outputs(True)


def pytest_configure(config):
    """Under pytest-xdist (``.ci/run`` runs the unit tests with ``-n auto``) each worker takes its share of the cores
    for torch, as a benchmark session's worker does: two workers of two threads on two cores ran the torch-heavy tests
    up to ten times slower."""
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers:
        from bertattn_bench.faces.pytest_session import worker_threads

        torch.set_num_threads(worker_threads(os.cpu_count() or 1, int(workers)))


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    from bertattn_bench.engine.model import embedded_model_path

    return AutoTokenizer.from_pretrained(str(embedded_model_path()))


@pytest.fixture(scope="session")
def tiny(tokenizer):
    """A 2-layer, 4-head BERT with random weights (seed 0) and the embedded model's tokenizer."""
    from transformers import BertConfig

    from bertattn_bench.engine.model import model_from_config

    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    return model_from_config(config, tokenizer, "tiny", "tiny", seed=0, device="cpu")


@pytest.fixture
def sentences():
    return [["The", "cat", "sat", "on", "the", "mat", "."],
            ["Unbelievably", ",", "tokenization", "splits", "words"],
            ["Short"],
            ["A", "much", "longer", "sentence", "with", "several", "words", "in", "it", "again", "."]]


def planted(b, h, t, fill):
    """A (b, h, t, t) attention tensor with rows built by ``fill(query) -> key``: one-hot maps with known answers."""
    probs = torch.zeros(b, h, t, t)
    for q in range(t):
        probs[:, :, q, fill(q)] = 1.0
    return probs


def pytest_addoption(parser):
    parser.addoption("--matrix-screenshot", default=None, metavar="PATH",
                     help="tests/test_matrix_browser.py: also write the screenshot of the regression view to PATH")
