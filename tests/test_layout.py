"""The house rules the import linter cannot state (the others are contracts in pyproject.toml, run by
``lint-imports``): no module imports a private name of another, no module grows past 900 lines, no class past 400
and no function past 150; and rule 7
once more, by folder, so that a new module in ``review/`` is covered without a new contract line: ``io/`` and
``runs/`` never import ``review/`` (the report line is ``io.reports``, the run summary ``tally``), and ``review/``
imports only ``models``, ``errors``, ``io.jsonl``, ``io.ids``, ``io.made_with`` (what a report was made with),
``io.reports``, ``tally``, ``stats`` and itself."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "groundjudge"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_LINES = 900
MAX_CLASS_LINES = 400
MAX_FUNCTION_LINES = 150


def _module_name(path: Path, root: Path = PACKAGE.parent) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """``from groundjudge.x import _name`` lines of ``path`` (a relative import counts the same way)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        if node.level == 0 and not (module == "groundjudge" or module.startswith("groundjudge.")):
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                found.append(f"{path.relative_to(root)}:{node.lineno} imports {alias.name} from {module}")
    return found


def test_the_walk_finds_the_package() -> None:
    names = {_module_name(p) for p in MODULES}
    assert {"groundjudge.cli", "groundjudge.runs.local", "groundjudge.io.jsonl", "groundjudge.pipeline"} <= names


def test_no_module_imports_a_private_name_of_another() -> None:
    found = [line for path in MODULES for line in private_imports(path)]
    assert not found, "\n".join(found)


def test_the_private_import_check_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from groundjudge.cli.score import _given\nfrom os import _exit\nfrom groundjudge import __version__\n"
        "from .rows import _hidden\n"
    )
    assert private_imports(bad, tmp_path) == [
        "bad.py:1 imports _given from groundjudge.cli.score",
        "bad.py:4 imports _hidden from rows",
    ]


def groundjudge_imports(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str]]:
    """``(line, module)`` of each ``groundjudge`` module that ``path`` imports (``from x import y`` gives ``x.y``
    too, since ``y`` may be a module; a relative import is resolved against ``path``'s package)."""
    package = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name == "groundjudge" or name.startswith("groundjudge.")]


def _in(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def folder_import_breaches(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """Rule 7 by folder for ``path``: what it imports that its folder may not."""
    module = _module_name(path, root)
    found = []
    for line, name in groundjudge_imports(path, root):
        if _in(module, "groundjudge.io") and _in(name, "groundjudge.review"):
            why = "io/ never imports review/"
        elif _in(module, "groundjudge.runs") and _in(name, "groundjudge.review"):
            why = "runs/ never imports review/ (the report line is io.reports, the run summary tally)"
        elif (
            _in(module, "groundjudge.review")
            and not _in(
                name,
                "groundjudge.models",
                "groundjudge.errors",
                "groundjudge.io.jsonl",
                "groundjudge.io.ids",
                "groundjudge.io.labels",
                "groundjudge.io.made_with",
                "groundjudge.io.reports",
                "groundjudge.tally",
                "groundjudge.stats",
                "groundjudge.review",
            )
            and name not in ("groundjudge", "groundjudge.io")
        ):
            why = (
                "review/ imports only models, errors, io.jsonl, io.ids, io.labels, io.made_with, io.reports, tally, "
                "stats and itself"
            )
        else:
            continue
        found.append(f"{path.relative_to(root)}:{line} imports {name}: {why}")
    return found


def test_the_folders_import_what_rule_7_allows() -> None:
    found = [line for path in MODULES for line in folder_import_breaches(path)]
    assert not found, "\n".join(found)


def test_the_rule_7_check_can_fail(tmp_path: Path) -> None:
    for folder, text in {
        "io": "from groundjudge.review.summary import Summarizer\n",
        "runs": "from groundjudge.review.report import dumps\nfrom groundjudge.review import metrics\n"
        "from groundjudge.review.summary import Summarizer\nfrom groundjudge.io.reports import dumps\n"
        "from groundjudge.tally import Summarizer\n",
        "review": "from groundjudge.io.tables import read_rows\nfrom ..pipeline import Evaluator\n"
        "from groundjudge.io.reports import dumps\nfrom . import stats\nfrom groundjudge.tally import summarize\n",
    }.items():
        bad = tmp_path / "groundjudge" / folder / "bad.py"
        bad.parent.mkdir(parents=True)
        bad.write_text(text)
    breaches = [
        line
        for folder in ("io", "runs", "review")
        for line in folder_import_breaches(tmp_path / "groundjudge" / folder / "bad.py", tmp_path)
    ]
    assert [line.split(": ")[0] for line in breaches] == [
        "groundjudge/io/bad.py:1 imports groundjudge.review.summary",
        "groundjudge/io/bad.py:1 imports groundjudge.review.summary.Summarizer",
        "groundjudge/runs/bad.py:1 imports groundjudge.review.report",
        "groundjudge/runs/bad.py:1 imports groundjudge.review.report.dumps",
        "groundjudge/runs/bad.py:2 imports groundjudge.review",
        "groundjudge/runs/bad.py:2 imports groundjudge.review.metrics",
        "groundjudge/runs/bad.py:3 imports groundjudge.review.summary",
        "groundjudge/runs/bad.py:3 imports groundjudge.review.summary.Summarizer",
        "groundjudge/review/bad.py:1 imports groundjudge.io.tables",
        "groundjudge/review/bad.py:1 imports groundjudge.io.tables.read_rows",
        "groundjudge/review/bad.py:2 imports groundjudge.pipeline",
        "groundjudge/review/bad.py:2 imports groundjudge.pipeline.Evaluator",
    ]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_module_is_over_the_size_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.name} has {lines} lines; split it by job (see DEVELOPERS.md)"


def oversized(source: str) -> list[str]:
    """The classes over :data:`MAX_CLASS_LINES` and functions (methods and nested ones too) over
    :data:`MAX_FUNCTION_LINES` lines of ``source``, decorators and docstrings included, as ``"name: n lines"``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            n = (node.end_lineno or node.lineno) - first + 1
            limit = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else MAX_FUNCTION_LINES
            if n > limit:
                out.append(f"{node.name}: {n} lines")
    return out


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_class_or_function_is_over_its_size_limit(path: Path) -> None:
    assert oversized(path.read_text(encoding="utf-8")) == [], "split it by job (see DEVELOPERS.md, rule 10)"


def test_the_size_rule_counts_classes_functions_and_their_decorators() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    assert oversized(f"@dataclass\nclass Big:\n{body}\n") == [f"Big: {MAX_CLASS_LINES + 2} lines"]
    assert oversized(f"class Fits:\n{body[: body.rfind(chr(10))]}\n") == []
    steps = "\n".join(f"        y = {i}" for i in range(MAX_FUNCTION_LINES))
    assert oversized(f"class C:\n    def long(self):\n{steps}\n") == [f"long: {MAX_FUNCTION_LINES + 1} lines"]


def test_the_tests_mirror_the_package() -> None:
    """Each package folder has its test folder (DEVELOPERS.md, Tests): a change to groundjudge/X/ runs tests/X/."""
    tests = Path(__file__).resolve().parent
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    missing = [f"tests/{f}/" for f in folders if not any((tests / f).glob("test_*.py"))]
    assert not missing, f"package folders without their test folder: {missing}"
    unpackaged = [str(d.relative_to(tests)) for d in tests.iterdir() if d.is_dir() and any(d.glob("test_*.py"))]
    assert all((tests / d / "__init__.py").is_file() for d in unpackaged), "a test folder needs an __init__.py"


def serve_import_breaches(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The review service's rule (contract 13) by folder for ``path``: only ``cli/`` imports ``serve/``, and
    ``serve/`` imports only ``models``, ``errors``, ``atomic``, ``io``, ``review`` and itself."""
    module = _module_name(path, root)
    found = []
    for line, name in groundjudge_imports(path, root):
        if _in(name, "groundjudge.serve") and not _in(module, "groundjudge.serve", "groundjudge.cli"):
            why = "only cli/ imports serve/"
        elif (
            _in(module, "groundjudge.serve")
            and not _in(
                name,
                "groundjudge.models",
                "groundjudge.errors",
                "groundjudge.atomic",
                "groundjudge.io",
                "groundjudge.review",
                "groundjudge.serve",
            )
            and name != "groundjudge"
        ):
            why = "serve/ imports only models, errors, atomic, io, review and itself"
        else:
            continue
        found.append(f"{path.relative_to(root)}:{line} imports {name}: {why}")
    return found


def test_only_the_cli_imports_the_review_service() -> None:
    found = [line for path in MODULES for line in serve_import_breaches(path)]
    assert not found, "\n".join(found)


def test_the_review_service_check_can_fail(tmp_path: Path) -> None:
    for folder, text in {
        "review": "from groundjudge.serve import store\n",
        "serve": "from groundjudge.pipeline import Evaluator\nfrom groundjudge.review.html import render_html\n",
        "cli": "from groundjudge.serve.app import create_app\n",
    }.items():
        bad = tmp_path / "groundjudge" / folder / "bad.py"
        bad.parent.mkdir(parents=True)
        bad.write_text(text)
    breaches = [
        line.split(": ")[0]
        for folder in ("review", "serve", "cli")
        for line in serve_import_breaches(tmp_path / "groundjudge" / folder / "bad.py", tmp_path)
    ]
    assert breaches == [
        "groundjudge/review/bad.py:1 imports groundjudge.serve",
        "groundjudge/review/bad.py:1 imports groundjudge.serve.store",
        "groundjudge/serve/bad.py:1 imports groundjudge.pipeline",
        "groundjudge/serve/bad.py:1 imports groundjudge.pipeline.Evaluator",
    ]


# The builtin exceptions a module may raise where a protocol asks for them: a module's or object's __getattr__
# (AttributeError), json's default hook (TypeError), a Mapping's lookup (KeyError), an abstract method
# (NotImplementedError), an optional package that is not installed (ImportError, naming the extra), a line that
# cannot be reached (AssertionError). Every other error is a GroundjudgeError (DEVELOPERS.md, Errors); a bad argument is
# errors.ArgumentError, which is a ValueError too.
PROTOCOL_ERRORS = {"AttributeError", "TypeError", "KeyError", "NotImplementedError", "ImportError", "AssertionError"}
BUILTIN_ERRORS = {n for n in dir(builtins) if n.endswith("Error")} | {"Exception"}


def builtin_raises(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """``raise ValueError(...)`` and other builtin errors outside :data:`PROTOCOL_ERRORS` in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(exc, ast.Name) and exc.id in BUILTIN_ERRORS - PROTOCOL_ERRORS:
            found.append(f"{path.relative_to(root)}:{node.lineno} raises {exc.id}")
    return sorted(found, key=lambda line: int(line.split(":")[1].split()[0]))


def test_every_raised_error_is_a_groundjudge_error() -> None:
    found = [line for path in MODULES for line in builtin_raises(path)]
    assert not found, "\n".join(found)


def test_the_builtin_error_check_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "groundjudge" / "bad.py"
    bad.parent.mkdir()
    bad.write_text(
        "def f(x):\n    if x:\n        raise ValueError('no')\n    raise RuntimeError\n"
        "def g():\n    raise AttributeError('a protocol error')\n"
    )
    assert builtin_raises(bad, tmp_path) == [
        "groundjudge/bad.py:3 raises ValueError",
        "groundjudge/bad.py:4 raises RuntimeError",
    ]
