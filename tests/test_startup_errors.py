"""Every bad option or model stops the run at start-up: one line naming the option, pytest's usage-error exit status
(4), no test run. Most cases run pytest in-process on a one-test benchmark (pytester); the last ones run the real
`pytest benchmarks` and the CLI in a subprocess, as a user would."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USAGE_ERROR = 4

BENCH_MODULE = """
FAMILY = "dependency"

def test_claim(bench, target):
    raise AssertionError("must not run: the options are bad")
"""


@pytest.fixture
def bench_dir(pytester, monkeypatch, tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    for corpus in ("ud_english_ewt/en_ewt-ud-dev.conllu", "ud_english_gum/en_gum-ud-dev.conllu"):  # the corpora the
        (data / corpus).parent.mkdir()  # tests name exist (a missing one stops the run: test_data_manifest.py)
        (data / corpus).write_text("x")
    monkeypatch.setenv("BERTATTN_DATA_DIR", str(data))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for var in ("BERTATTN_DEVICE", "BERTATTN_MODEL"):
        monkeypatch.delenv(var, raising=False)
    pytester.makeconftest('pytest_plugins = ["bertattn_bench.faces.pytest_plugin", "bertattn_bench.faces.short_options"]')
    pytester.makepyfile(test_bench=BENCH_MODULE)
    return pytester


def bad_model_folder(tmp: Path, config_text: str) -> Path:
    from bertattn_bench.engine.model import embedded_model_path

    folder = tmp / "bad_model"
    folder.mkdir()
    for f in embedded_model_path().iterdir():
        if f.is_file() and f.name != "config.json":
            (folder / f.name).symlink_to(f)
    (folder / "config.json").write_text(config_text)
    return folder


def one_error_line(result) -> str:
    lines = [ln for ln in (result.outlines + result.errlines) if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR: ")]
    assert len(errors) == 1, lines
    assert not any("Traceback" in ln or "INTERNALERROR" in ln for ln in lines), lines
    assert result.ret == USAGE_ERROR, lines
    return errors[0][len("ERROR: "):]


BAD_OPTIONS = [
    (["--device", "nonsense"], "--device nonsense: not a device; use one of auto, cpu, cuda, cuda:N"),
    (["--device", "tpu"], "--device tpu: not a device"),
    (["--device", "cuda:x"], "--device cuda:x: not a device"),
    (["--batch-size", "0"], "--batch-size 0: must be a whole number >= 1"),
    (["--batch-size", "-5"], "--batch-size -5: must be a whole number >= 1"),
    (["--limit", "0"], "--limit 0: must be a whole number >= 1"),
    (["--limit", "-3"], "--limit -3: must be a whole number >= 1"),
    (["--corpus", "dependency="], "--corpus dependency=: name at least one dependency corpus; known: ewt_dev"),
    (["--corpus", "dependency=,"], "--corpus dependency=,: name at least one dependency corpus"),
    (["--corpus", "dependency"], "--corpus dependency: expected family=corpus[,corpus]"),
    (["--corpus", "nosuch=ewt_dev"], "--corpus nosuch=ewt_dev: unknown family 'nosuch'"),
    (["--corpus", "dependency=ewt_dev,wikitext2"], "--corpus dependency=ewt_dev,wikitext2: unknown dependency corpus wikitext2"),
    (["--corpus", "dependency=ewt_dev", "--corpus", "dependency=gum_dev"], "--corpus dependency=gum_dev: dependency is already given (--corpus dependency=ewt_dev)"),
    (["--model", "random:embedded@x"], "--model random:embedded@x: the seed after '@' must be a whole number"),
    (["--model", "embedded", "--model", "random:@1.5"], "--model random:@1.5: the seed after '@' must be a whole number"),
    (["--compare-to", "nosuchmodel"], "--compare-to nosuchmodel: no recorded baseline by that name or path (recorded: "),
]


@pytest.mark.parametrize("args,message", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_bad_option_is_one_line_and_exit_4(bench_dir, args, message):
    line = one_error_line(bench_dir.runpytest_inprocess(*args))
    assert line.startswith(message), line


def test_unavailable_accelerators_are_refused(bench_dir):
    import torch

    if not torch.backends.mps.is_available():
        assert "Apple MPS is not available" in one_error_line(bench_dir.runpytest_inprocess("--device", "mps"))
    if not torch.cuda.is_available():
        assert "CUDA is not available" in one_error_line(bench_dir.runpytest_inprocess("--device", "cuda"))
    else:
        n = torch.cuda.device_count()
        assert f"has {n} CUDA device(s)" in one_error_line(bench_dir.runpytest_inprocess("--device", f"cuda:{n}"))


def test_bad_device_from_the_environment(bench_dir, monkeypatch):
    monkeypatch.setenv("BERTATTN_DEVICE", "gpu0")
    assert one_error_line(bench_dir.runpytest_inprocess()).startswith("--device gpu0: not a device")


def test_report_folder_that_is_a_file(bench_dir, tmp_path):
    target = tmp_path / "claims.md"
    target.write_text("")
    line = one_error_line(bench_dir.runpytest_inprocess(f"--claims-report={target}"))
    assert line == f"--claims-report {target}: is a file, not a folder (name a folder; it is created if missing)"
    below = one_error_line(bench_dir.runpytest_inprocess(f"--claims-report={target / 'out'}"))
    assert below == f"--claims-report {target / 'out'}: {target} is a file, not a folder"


def test_compare_to_a_file_that_is_not_a_baseline(bench_dir, tmp_path):
    bad = tmp_path / "b.json"
    bad.write_text("[1, 2]")
    assert one_error_line(bench_dir.runpytest_inprocess(f"--compare-to={bad}")) == \
        f"baseline {bad}: not a baseline file (no \"results\" object)"


@pytest.mark.parametrize("config_text,message", [
    ("garbage{", "config.json line 1 column 1: not valid JSON (Expecting value)"),
    ('{"hidden_size": 8,\n "x": }', "config.json line 2 column 7: not valid JSON (Expecting value)"),
    ('{"hidden_size": 8}', 'config.json has no "model_type" (not a transformers model config)'),
])
def test_garbage_model_config_is_named_at_startup(bench_dir, tmp_path, config_text, message):
    folder = bad_model_folder(tmp_path, config_text)
    for name in (str(folder), f"random:{folder}"):
        line = one_error_line(bench_dir.runpytest_inprocess(f"--model={name}"))
        assert line == f"--model {folder}: {folder}/config.json " + message.split("config.json ", 1)[1], line
        assert "Hugging Face cache" not in line


def test_unknown_hub_name_is_one_error_not_a_failure_per_test(bench_dir):
    result = bench_dir.runpytest_inprocess("--model", "no-such-org/no-such-model")
    line = one_error_line(result)
    assert line.startswith("--model no-such-org/no-such-model: could not load model 'no-such-org/no-such-model'")
    result.assert_outcomes()  # nothing ran, nothing failed
    assert "(HF_HUB_OFFLINE is set)" in line  # the face read HF_HUB_OFFLINE=1 (bench_dir) and passed it down


def test_the_engine_says_offline_as_told_not_from_the_environment(monkeypatch):
    """engine.model reads no environment (not even huggingface_hub's constants): "offline" in a load error is the
    argument the face passed, read once by base.settings."""
    from bertattn_bench.base.errors import BenchError
    from bertattn_bench.engine.model import load_config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for offline in (False, True):
        with pytest.raises(BenchError) as err:
            load_config("no-such-org/no-such-model", offline=offline)
        assert ("(HF_HUB_OFFLINE is set)" in str(err.value)) is offline, str(err.value)


def test_a_good_model_is_loaded_once_and_kept(bench_dir, monkeypatch):
    from bertattn_bench.engine import model

    calls = []
    monkeypatch.setattr(model, "load_model", lambda name, device=None, **kw: calls.append(name) or object())
    bench_dir.makepyfile(test_bench="""
FAMILY = "dependency"

def test_claim(bench, target):
    assert bench.model(target.model) is bench.models[target.model]
""")
    result = bench_dir.runpytest_inprocess("--corpus", "dependency=ewt_dev,gum_dev")
    result.assert_outcomes(passed=2)
    assert calls == ["embedded"]


def _run(*args, env_extra=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "BERTATTN_DATA_DIR": str(ROOT / "fixtures"), **(env_extra or {})}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("args,message", [
    (["-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "--limit", "0"], "ERROR: --limit 0: must be a whole number >= 1"),
    (["-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "-n", "2", "--model", "random:embedded@x"],
     "ERROR: --model random:embedded@x: the seed after '@' must be a whole number (e.g. random:embedded@0)"),
    (["-m", "bertattn_bench", "compare", "--model", "embedded", "--against", "nosuchmodel"],
     "ERROR: --compare-to nosuchmodel: no recorded baseline by that name or path"),
    (["-m", "bertattn_bench", "record", "--batch-size", "-5"], "ERROR: --batch-size -5: must be a whole number >= 1"),
    # not argparse's usage screen (pytest.main()'s "usage: ... error: argument --limit: invalid int value")
    (["-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "--limit", "abc"], "ERROR: --limit abc: must be a whole number >= 1"),
    (["-m", "bertattn_bench", "run", "--tier", "foo"], "ERROR: --tier 'foo': expected one of quick, regression, full"),
    (["-m", "bertattn_bench", "run", "--compare-fail-on", "sometimes"],
     "ERROR: --compare-fail-on sometimes: expected one of lost, flips, never"),
])
def test_real_command_lines_stop_with_one_line(args, message):
    proc = _run(*args)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == USAGE_ERROR, lines
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    assert len(errors) == 1 and errors[0].startswith(message), lines
    assert not any("Traceback" in ln for ln in lines), lines
    # checked before pytest's banner and collection (stop 54): the one line is the whole output
    assert not any("test session starts" in ln or "collected" in ln for ln in lines), lines


@pytest.mark.slow
def test_a_selection_of_no_claim_says_so():
    """``-k`` with a typo: pytest's exit 5 (no test selected) with one line saying what to run, not a bare
    "196 deselected"."""
    proc = _run("-m", "bertattn_bench", "run", "-k", "dependecy", "-p", "no:cacheprovider", "-q")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "bertattn-bench: 'dependecy' selects none of the" in proc.stdout
    assert "bertattn-bench list -k EXPR" in proc.stdout
