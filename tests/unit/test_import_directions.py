"""The house as drawn in docs/architecture.md ("Packages and the directions they import"): every import between
Flotilla's packages goes down the table below, no package cycle exists, and no controller module imports
another. Imports inside functions and under ``TYPE_CHECKING`` count like any other."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "flotilla"

_BASE = {"kube", "files", "signals"}
_LIBS = _BASE | {"jsonpath", "api", "observability", "storage", "checkpoints", "interpreter"}
_DECISIONS = ["cluster", "scheduler", "policy", "failover", "propagation", "display"]
_CORE = _LIBS | set(_DECISIONS) | {"client", "dashboard", "apiserver", "runtime", "controllers", "agent"}

#: package -> the packages it may import (besides itself); the order of this table is the order of the layers
ALLOWED: dict[str, set[str]] = {
    # the base: pure helpers and small process utilities, importing nothing of Flotilla
    "kube": set(),
    "files": set(),
    "signals": set(),
    # libraries
    "jsonpath": {"kube"},
    "api": {"kube"},
    "observability": {"kube"},
    "storage": {"kube", "files", "observability"},
    "checkpoints": {"kube", "files"},
    "interpreter": {"kube", "api", "jsonpath"},
    # decision packages: pure functions, each may use the ones before it
    "cluster": {"kube", "api", "jsonpath", "interpreter"},
    "scheduler": {"kube", "api", "cluster"},
    "policy": {"kube", "api", "jsonpath", "interpreter", "cluster", "scheduler"},
    "failover": {"kube", "api", "jsonpath", "interpreter", "checkpoints", "cluster", "scheduler", "policy"},
    "propagation": {"kube", "api", "jsonpath", "interpreter", "checkpoints", "cluster", "scheduler", "policy",
                    "failover"},
    "display": {"kube", "api", "jsonpath", "interpreter", "checkpoints", "cluster", "scheduler", "policy",
                "failover", "propagation"},
    # the machinery that talks the API
    "client": {"kube", "api", "files", "observability"},
    "dashboard": _LIBS | set(_DECISIONS) | {"client"},
    "apiserver": _LIBS | set(_DECISIONS) | {"client", "dashboard"},
    "runtime": _LIBS | set(_DECISIONS) | {"client"},
    "controllers": _LIBS | set(_DECISIONS) | {"client", "runtime"},
    "agent": _LIBS | set(_DECISIONS) | {"client", "runtime"},
    # the product's commands
    "cli": _CORE,
    # tools outside the core: they may import it, it never imports them
    "member": _CORE | {"cli"},
    "local": _CORE | {"cli", "member"},
    "bench": _CORE | {"cli", "member", "local"},
    "reliability": _CORE | {"cli", "member", "local", "bench"},
    # the entry point assembles everything
    "main": _CORE | {"cli", "member", "local", "bench", "reliability"},
}


def _package(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) == 1 else rel.parts[0]


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import of a Flotilla module in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = _module(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "flotilla":  # from flotilla import x: x is a package or module of its own
                for alias in node.names:
                    if (SRC / alias.name).is_dir() or (SRC / f"{alias.name}.py").is_file():
                        yield node.lineno, f"flotilla.{alias.name}"
            else:
                yield node.lineno, module


def _sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.name != "__init__.py" or p.parent != SRC)


def _edges() -> Iterator[tuple[Path, int, str, str, str]]:
    """(file, line, its package, imported package, imported module) for imports between Flotilla's packages."""
    for path in _sources():
        pkg = _package(path)
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] != "flotilla" or len(parts) < 2:
                continue
            target = parts[1]
            if target != pkg:
                yield path, line, pkg, target, module


def test_every_package_is_in_the_table() -> None:
    packages = {_package(p) for p in _sources()} - {"__init__"}
    assert packages <= set(ALLOWED), f"add these packages to ALLOWED and docs/architecture.md: " \
                                     f"{sorted(packages - set(ALLOWED))}"


def test_the_table_has_no_cycle() -> None:
    order = list(ALLOWED)
    for i, pkg in enumerate(order):
        later = set(order[i:])
        assert not ALLOWED[pkg] & later, f"{pkg} may import a package of its own layer or above: " \
                                          f"{sorted(ALLOWED[pkg] & later)}"


def test_imports_go_down_the_table() -> None:
    wrong = [f"{path.relative_to(SRC.parent)}:{line}: {pkg} imports {module}"
             for path, line, pkg, target, module in _edges() if target not in ALLOWED.get(pkg, set())]
    assert not wrong, "imports against the directions in docs/architecture.md:\n" + "\n".join(wrong)


def test_no_controller_imports_another_controller() -> None:
    wrong = []
    for path in sorted((SRC / "controllers").glob("*.py")):
        for line, module in _imports(path):
            if module.startswith("flotilla.controllers.") or module == "flotilla.controllers":
                wrong.append(f"{path.relative_to(SRC.parent)}:{line}: imports {module}")
    assert not wrong, "controllers share code through flotilla.runtime, never each other:\n" + "\n".join(wrong)


def test_the_base_package_imports_nothing_of_flotilla() -> None:
    wrong = [f"{path.relative_to(SRC.parent)}:{line}: {module}"
             for path in sorted((SRC / "kube").glob("*.py")) for line, module in _imports(path)
             if module.startswith("flotilla.") and not module.startswith("flotilla.kube")]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("package", _DECISIONS)
def test_decision_packages_do_no_io(package: str) -> None:
    """Decision packages are pure: no client, server, store, network or process modules."""
    forbidden = ("flotilla.client", "flotilla.apiserver", "flotilla.storage", "flotilla.runtime", "asyncio",
                 "aiohttp", "socket", "subprocess", "sqlite3")
    wrong = [f"{path.relative_to(SRC.parent)}:{line}: {module}"
             for path in sorted((SRC / package).rglob("*.py")) for line, module in _imports(path)
             if module.startswith(forbidden)]
    assert not wrong, "\n".join(wrong)
