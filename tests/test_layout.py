"""The package's shape: no import circle (module-level or inside functions), every sub-package shipped in the
wheel, and the pytest entry point light (no torch, transformers or pandas imported by loading it)."""
import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = "bertattn_bench"


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted((ROOT / PKG).rglob("*.py")):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = p
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (every import statement, at any depth of the file)."""
    mods = modules()
    graph = {}
    for name, path in mods.items():
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                stem = ".".join((base[: len(base) - node.level + 1] if node.level else []) + (
                    [node.module] if node.module else []))
                deps.update(f"{stem}.{a.name}" if f"{stem}.{a.name}" in mods else stem for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert "bertattn_bench.runner.session" in graph["bertattn_bench.faces.pytest_session"]  # the checker sees imports
    assert cycles(graph) == []


def test_the_checker_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The floors, lowest first: a module imports from its own floor and the floors below, never from one above.
FLOORS = ("base", "claims", "engine", "data", "training", "families", "report", "runner", "faces")


def floor_of(module: str) -> int:
    """The floor of a package module: its first sub-package; the package's ``__init__`` and ``__main__`` (the lazy
    API names and ``python -m``) stand with the faces."""
    parts = module.split(".")
    return FLOORS.index(parts[1]) if len(parts) > 1 and parts[1] in FLOORS else len(FLOORS) - 1


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if floor_of(d) > floor_of(m))


def test_no_module_imports_from_a_higher_floor():
    graph = import_graph()
    assert set(FLOORS) == {m.split(".")[1] for m in graph if m.count(".") >= 1 and not m.endswith("__main__")}
    assert upward_imports(graph) == []


def test_the_floor_checker_finds_a_planted_upward_import():
    graph = {f"{PKG}.claims.stats": {f"{PKG}.base.errors"}, f"{PKG}.engine.attention": {f"{PKG}.runner.cache"}}
    assert upward_imports(graph) == [f"{PKG}.engine.attention -> {PKG}.runner.cache"]


def test_the_engine_imports_no_face():
    """No floor below the faces imports a face (the pytest plugin, its session, the command line, the API)."""
    graph = import_graph()
    faces = {m for m in graph if m.startswith(f"{PKG}.faces.")}
    for m, deps in graph.items():
        if not m.startswith(f"{PKG}.faces.") and m not in (PKG, f"{PKG}.__main__"):
            assert not deps & faces, m


def test_every_sub_package_is_in_the_wheel():
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / PKG).rglob("__init__.py")}
    assert found <= declared, f"add to pyproject's packages: {sorted(found - declared)}"


def test_loading_the_entry_point_imports_nothing_heavy():
    code = ("import sys, bertattn_bench.faces.pytest_plugin, bertattn_bench.faces.short_options; "
            "print(sorted(m for m in ('torch', 'transformers', 'pandas', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_environment_variables_are_read_in_one_place():
    """settings.env() over settings.ENVIRONMENT is the one reader; no other module reads os.environ / getenv (the
    GPU worker assignment takes the environment as an argument, defaulting to os.environ)."""
    offenders = []
    for name, path in modules().items():
        if name in (f"{PKG}.base.settings",):
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if ("os.environ.get(" in code or "os.getenv(" in code or "os.environ[" in code) and "environ=" not in code:
                offenders.append(f"{path.relative_to(ROOT)}:{i}")
    assert offenders == []
    import pytest

    from bertattn_bench.base import settings

    with pytest.raises(KeyError, match="not in settings.ENVIRONMENT"):
        settings.env("BERTATTN_NO_SUCH_VARIABLE")


def test_a_k_word_for_a_model_does_not_catch_its_twin_or_another_family():
    """Test ids: -k minilm selects the embedded model's tests, not its random-init twin's (random0); the timing
    selection of the README catches no coref test."""
    from bertattn_bench.runner.plan import Target, model_id

    assert model_id("embedded") == "minilm" and model_id("random:embedded") == "random0"
    assert model_id("random:embedded@3") == "random3" and "minilm" not in Target("random:embedded", "ewt_dev", "x").id
    assert model_id("/models/my-bert") == "my-bert"


SETTINGS_READERS = {"env", "training_seed", "from_environment", "resolve_data_dir", "explicit_data_dir", "default_data_home"}
# Modules below the faces that still read the environment, each with why (issue 44: every other setting is an
# argument, filled by a face from base.settings.from_environment):
ENVIRONMENT_ALLOWED = {
    f"{PKG}.base.settings",  # the one reader
}


def environment_reads(path: Path) -> list[str]:
    """Where a module reads the environment: os.environ / os.getenv, or a call of a settings reader."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") and \
                isinstance(node.value, ast.Name) and node.value.id == "os":
            out.append(f"{path.name}:{node.lineno} os.{node.attr}")
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in SETTINGS_READERS:
                out.append(f"{path.name}:{node.lineno} {name}()")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("huggingface_hub") and any(
                a.name == "constants" or a.name.startswith("HF_") for a in node.names):
            # the hub library's constants are its reading of the environment (HF_HUB_OFFLINE, HF_HOME, ...)
            out.append(f"{path.name}:{node.lineno} huggingface_hub constants")
    return out


def test_only_the_faces_read_the_environment():
    """No module below the faces reads os.environ or calls env() / training_seed() / from_environment(): a setting
    that changes a value is an option of the run (RunOptions), recorded in its provenance."""
    offenders = {name: reads for name, path in modules().items()
                 if not name.startswith(f"{PKG}.faces.") and name not in ENVIRONMENT_ALLOWED
                 and (reads := environment_reads(path))}
    assert offenders == {}


def test_the_environment_check_finds_a_planted_read(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("import os\nfrom x import env\n\ndef f():\n    return os.environ.get('A'), env('B'), 1\n")
    assert sorted(environment_reads(planted)) == ["m.py:5 env()", "m.py:5 os.environ"]
    planted.write_text("def f():\n    from huggingface_hub import constants\n    return constants.HF_HUB_OFFLINE\n")
    assert environment_reads(planted) == ["m.py:2 huggingface_hub constants"]
    planted.write_text("def f(seed=None):\n    return seed\n")
    assert environment_reads(planted) == []


SHARED_FAMILY_MODULES = ("common",)  # the families floor's shared modules: no family owns them


def family_of(module: str) -> str | None:
    """The family a module of the families floor belongs to: its module or package under ``families`` (None for the
    floor's shared modules)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "families" and parts[2] not in SHARED_FAMILY_MODULES else None


def cross_family_imports(graph: dict[str, set[str]]) -> set[str]:
    return {f"{m} -> {d}" for m, deps in graph.items() for d in deps
            if family_of(m) and family_of(d) and family_of(m) != family_of(d)}


# Issue 44: no family imports another; what several share (reducers, sweep scoring, bounds) lives below them
# (claims.stats, training.sweeps) or in the families floor's shared package ``families.common``, which no family owns.
CROSS_FAMILY_TO_MOVE: set[str] = set()  # emptied by issue 44 (the moves to families/common/); it stays empty


def test_no_family_imports_another_beyond_the_known_moves():
    found = cross_family_imports(import_graph())
    assert found - CROSS_FAMILY_TO_MOVE == set(), "a new import across families: move the shared code below them"


def test_the_shared_modules_import_no_family():
    """families.common is below the families: its modules import none of them (else a family would reach another
    through it)."""
    graph = import_graph()
    shared = {m for m in graph if m.startswith(f"{PKG}.families.") and not family_of(m) and m != f"{PKG}.families"}
    assert f"{PKG}.families.common.surface_stats" in shared
    assert {f"{m} -> {d}" for m in shared for d in graph[m] if family_of(d)} == set()


def test_the_family_checker_finds_a_planted_import():
    graph = {f"{PKG}.families.probes.run": {f"{PKG}.families.syntax", f"{PKG}.families.probes.models",
                                            f"{PKG}.engine.attention"}}
    assert cross_family_imports(graph) == {f"{PKG}.families.probes.run -> {PKG}.families.syntax"}


CHECKOUT_ONLY = ("fixtures", "tests", "scripts")  # folders of the checkout that the wheel does not carry


def checkout_reads(path: Path) -> list[str]:
    """Where a module names a folder of the checkout that the wheel does not carry: a string constant that is a path
    into one of them (``"fixtures/..."``, ``"tests/..."``), or the fixtures folder's own name."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                node.value == "fixtures" or node.value.replace("\\", "/").startswith(
                    tuple(f"{d}/" for d in CHECKOUT_ONLY))):
            out.append(f"{path.name}:{node.lineno} {node.value!r}")
    return out


def test_the_package_reads_no_folder_the_wheel_does_not_carry():
    """The installed package never reaches into the checkout's fixtures/, tests/ or scripts/ (issue 44: the
    architecture matrix and its toy data, which read fixtures/, are tests/architecture_matrix.py)."""
    offenders = {name: reads for name, path in modules().items() if (reads := checkout_reads(path))}
    assert offenders == {}


def test_the_checkout_check_finds_a_planted_read(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("from pathlib import Path\nF = Path(__file__).parents[2] / 'fixtures' / 'x.conllu'\n"
                       "G = 'fixtures/coref/a.conllu'\nH = 'no fixtures here'\nI = {'tests': 3}\nJ = 'tests/x.py'\n")
    assert sorted(checkout_reads(planted)) == ["m.py:2 'fixtures'", "m.py:3 'fixtures/coref/a.conllu'",
                                              "m.py:6 'tests/x.py'"]


def test_each_family_lives_in_the_module_named_as_users_select_it():
    """Issue 44: ``-k dependency`` / ``--corpus disable=...`` name the modules that hold them (families/dependency.py,
    families/prune/run.py, ...; were syntax.py, disabling.py, pruning/, arct_trained.py)."""
    from bertattn_bench.claims.registry import families

    wrong = {name: fam.prepare.__module__ for name, fam in families().items()
             if fam.prepare.__module__ not in (f"{PKG}.families.{name}", f"{PKG}.families.{name}.run")}
    assert wrong == {}


def leaf_names(paths) -> dict[str, set[str]]:
    """Module (or sub-package) leaf name -> the floors where it occurs."""
    out: dict[str, set[str]] = {}
    for name in paths:
        parts = name.split(".")
        if len(parts) >= 3:
            out.setdefault(parts[-1], set()).add(parts[1])
    return out


def test_no_module_name_is_shared_across_floors():
    """A name means one thing: no two floors hold a module (or sub-package) of the same name (were data.coref and
    families.coref, data.framenet and families.framenet, data.arct and families.arct, engine.norms and
    families.norms)."""
    shared = {leaf: floors for leaf, floors in leaf_names(list(modules())).items() if len(floors) > 1}
    assert shared == {}


def test_the_shared_name_check_finds_a_planted_clash():
    assert leaf_names([f"{PKG}.data.coref", f"{PKG}.families.coref"]) == {"coref": {"data", "families"}}


def test_each_face_is_a_thin_adapter():
    """Issue 44: a face translates (options in, the runner's plan and finish out): each module at most ~200 lines
    (pytest_session.py was 352, cli.py 259)."""
    long = {name: n for name, path in modules().items() if name.startswith(f"{PKG}.faces.")
            and (n := len(path.read_text(encoding="utf-8").splitlines())) > 220}
    assert long == {}


def passed_assignments(path: Path) -> list[str]:
    """Where a module assigns a claim outcome's ``passed`` (``x.passed = ...``, ``passed=...`` in a call)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [f"{path.name}:{node.lineno}" for t in targets
                    for a in ast.walk(t) if isinstance(a, ast.Attribute) and a.attr == "passed"]
        elif isinstance(node, ast.Call):
            out += [f"{path.name}:{node.lineno}" for k in node.keywords if k.arg == "passed"]
    return out


def test_passed_is_decided_in_one_module():
    """Issue 62: a claim's check is measure, judge, check (claims/checks.py); its ``passed`` is assigned there and
    nowhere else in the package."""
    where = {name: hits for name, path in modules().items() if (hits := passed_assignments(path))}
    assert set(where) == {f"{PKG}.claims.checks"}, where


def test_the_passed_check_finds_a_planted_assignment(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("def f(out, O):\n    out.passed = True\n    return O(passed=False)\n")
    assert passed_assignments(planted) == ["m.py:2", "m.py:3"]
    planted.write_text("def f(out):\n    return out.passed\n")
    assert passed_assignments(planted) == []


def private_imports(path: Path) -> list[str]:
    """``from <module of the package> import _name``: a private name used across modules."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(PKG)):
            out += [f"{path.name}:{node.lineno} {a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_no_private_name_is_imported_across_modules():
    """Issue 62: a name a module keeps to itself (a leading underscore) is not imported by another; one that others
    need is public."""
    assert {name: hits for name, path in modules().items() if (hits := private_imports(path))} == {}


def test_the_private_import_check_finds_a_planted_one(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("from .ud import _blocks, check\nfrom __future__ import annotations\nfrom os import _exit\n")
    assert private_imports(planted) == ["m.py:1 _blocks"]


MAX_LINES = 450  # issue 62: no module of the package longer; a family over ~300 lines becomes a package split by job


def long_modules(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Modules under ``root`` longer than ``limit`` lines (path relative to ``root`` -> lines)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out[path.relative_to(root).as_posix()] = n
    return out


def test_no_module_is_over_the_line_limit():
    """Issue 62: every module of the package at most MAX_LINES lines, with no exception (the last long one,
    families/framenet.py, is a package split by job)."""
    assert long_modules(ROOT / PKG) == {}


def test_the_line_limit_check_finds_a_planted_long_module(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "at_limit.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "short.py").write_text('"""doc"""\n')
    assert long_modules(tmp_path) == {"sub/long.py": MAX_LINES + 1}


# Issue 62, the family template: a family past ~300 lines is a package whose modules are named by job, the same names
# in every family (the set is what the packages use: keep it small); each decorator's job in its own module; the
# pass's modules never import the claims or the figures (the cache key follows the pass: editing a metric re-runs no
# pass).
FAMILY_JOBS = {
    "constants",  # names and numbers the other modules share
    "run",  # the pass: its result, its reducer where it is small, the @family prepare
    "reduce",  # the pass's reducers and result, where run.py would be long
    "measure", "maps",  # what the pass computes from the maps or the models (explain, prune; patterns)
    "data", "models",  # the pass's own inputs and trained models (probes)
    "metrics",  # the claims' @metric functions
    "figures",  # the @figure writers
}
# parts of a pass named for what they compute (no decorator: the job rule below holds them to that)
FAMILY_OWN_PARTS = {"arct": {"adversarial", "cues", "tokens"}, "gradient": {"mlm_head"}, "probes": {"structural"},
                    "gates": {"roles_read"}}
DECORATOR_JOB = {"family": "run", "metric": "metrics", "figure": "figures"}
ONE_FILE_FAMILY_MAX = 300
CLAIM_SIDE = {"metrics", "figures"}


def _decorators(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        for d in getattr(node, "decorator_list", []):
            f = d.func if isinstance(d, ast.Call) else d
            out.add(getattr(f, "id", getattr(f, "attr", "")))
    return out & set(DECORATOR_JOB)


def template_faults(families_dir: Path, shared=SHARED_FAMILY_MODULES) -> list[str]:
    """Where the families under ``families_dir`` leave the template: a one-file family over ONE_FILE_FAMILY_MAX
    lines, a package module not named by a job, a decorator outside its job's module, a pass module importing the
    claims or the figures."""
    faults = []
    for path in sorted(families_dir.glob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if path.name != "__init__.py" and n > ONE_FILE_FAMILY_MAX:
            faults.append(f"{path.name}: {n} lines in one file (a package by job past {ONE_FILE_FAMILY_MAX})")
    for pkg in sorted(p for p in families_dir.iterdir() if (p / "__init__.py").exists() and p.name not in shared):
        for path in sorted(pkg.glob("*.py")):
            job, where = path.stem, f"{pkg.name}/{path.name}"
            if job == "__init__":
                continue
            if job not in FAMILY_JOBS | FAMILY_OWN_PARTS.get(pkg.name, set()):
                faults.append(f"{where}: not a job name")
            tree = ast.parse(path.read_text(encoding="utf-8"))
            faults += [f"{where}: holds @{d} ({DECORATOR_JOB[d]}.py's job)" for d in sorted(_decorators(tree))
                       if DECORATOR_JOB[d] != job]
            if job not in CLAIM_SIDE:
                imported = {node.module if node.module else a.name for node in ast.walk(tree)
                            if isinstance(node, ast.ImportFrom) and node.level == 1 for a in node.names}
                faults += [f"{where}: imports {m} (the pass's key would follow it)" for m in sorted(imported & CLAIM_SIDE)]
    return faults


def test_every_family_follows_the_template():
    assert template_faults(ROOT / PKG / "families") == []


def test_the_template_check_finds_a_planted_mixed_module(tmp_path):
    fam = tmp_path / "fam"
    fam.mkdir()
    (fam / "__init__.py").write_text("from .run import *  # noqa\n")
    (fam / "run.py").write_text("@family('fam')\ndef prepare(): ...\n\n@metric('m')\ndef m(pr): ...\n")  # mixed
    (fam / "helpers.py").write_text("x = 1\n")  # not a job
    (fam / "reduce.py").write_text("from .metrics import frame_heads\nfrom . import figures\n")  # the key follows them
    (fam / "metrics.py").write_text("from .reduce import R\n\n@metric('m')\ndef m(pr): ...\n")  # as it should be
    (fam / "figures.py").write_text("@registry.figure('f')\ndef f(prs, d): ...\n")
    (tmp_path / "long.py").write_text("x = 1\n" * (ONE_FILE_FAMILY_MAX + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * ONE_FILE_FAMILY_MAX)
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "__init__.py").write_text("")
    (tmp_path / "common" / "anything.py").write_text("@metric('x')\ndef x(pr): ...\n")  # shared: not a family
    assert template_faults(tmp_path) == [
        f"long.py: {ONE_FILE_FAMILY_MAX + 1} lines in one file (a package by job past {ONE_FILE_FAMILY_MAX})",
        "fam/helpers.py: not a job name",
        "fam/reduce.py: imports figures (the pass's key would follow it)",
        "fam/reduce.py: imports metrics (the pass's key would follow it)",
        "fam/run.py: holds @metric (metrics.py's job)"]
