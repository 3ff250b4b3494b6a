"""The command-line wrappers build the pytest command lines the README documents."""
import pytest

from bertattn_bench.__main__ import pytest_args


def test_record_adds_the_record_option():
    args = pytest_args(["record", "--model", "embedded"])
    assert args[-1] == "--record-baseline" and "--model" in args and args[0].endswith("benchmarks")


def test_compare_names_model_a():
    args = pytest_args(["compare", "--model", "random:embedded", "--against", "embedded"])
    assert args[args.index("--compare-to") + 1] == "embedded"


def test_compare_without_model_a_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        pytest_args(["compare", "--model", "random:embedded"])
    assert exc.value.code == 4
    assert capsys.readouterr().err == "ERROR: python -m bertattn_bench: compare needs --against MODEL_A (see --help)\n"


def test_unknown_command_is_one_line_exit_4(capsys):
    with pytest.raises(SystemExit) as exc:
        pytest_args(["recrod"])
    err = capsys.readouterr().err
    assert exc.value.code == 4 and err.count("\n") == 1 and "invalid choice: 'recrod'" in err
