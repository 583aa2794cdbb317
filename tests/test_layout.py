"""The house rules the import linter cannot state (the others are contracts in pyproject.toml, run by
``lint-imports``): no module imports a private name of another, and no module grows past 900 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "groundjudge"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_LINES = 900


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
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


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_module_is_over_the_size_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.name} has {lines} lines; split it by job (see DEVELOPERS.md)"


def test_the_tests_mirror_the_package() -> None:
    """Each package folder has its test folder (DEVELOPERS.md, Tests): a change to groundjudge/X/ runs tests/X/."""
    tests = Path(__file__).resolve().parent
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    missing = [f"tests/{f}/" for f in folders if not any((tests / f).glob("test_*.py"))]
    assert not missing, f"package folders without their test folder: {missing}"
    unpackaged = [str(d.relative_to(tests)) for d in tests.iterdir() if d.is_dir() and any(d.glob("test_*.py"))]
    assert all((tests / d / "__init__.py").is_file() for d in unpackaged), "a test folder needs an __init__.py"
