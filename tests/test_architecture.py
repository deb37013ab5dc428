"""The shape of the code: packages by noun, arrows one way, no cycles, modules that fit in one read.

These read the source tree itself (its ``import`` statements, those inside functions
included) rather than trust a diagram, so the architecture in docs/architecture.md
stays true as code lands.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PROJECT = ("docpilot", "metrics", "tasks", "flows")
MAX_LINES = 400
MAX_TOP_LEVEL = 12


def _modules() -> dict[str, Path]:
    found = {}
    for package in PROJECT:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module an imported name lives in: the longest known prefix."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


def _imports(module: str, path: Path) -> set[str]:
    """Project modules ``module`` imports anywhere in its body, function bodies included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from docpilot.run import progress` imports docpilot.run.progress, not the package alone.
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in names:
            target = _resolve(name)
            if target is not None and target != module and not module.startswith(target + "."):
                found.add(target)
    return found


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _cycle() -> list[str] | None:
    """One import cycle between project modules, as the path around it, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(GRAPH):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_no_import_cycle_between_project_modules():
    assert _cycle() is None


def test_arrows_point_one_way():
    for module, targets in GRAPH.items():
        layer = module.split(".")[0]
        for target in targets:
            into = target.split(".")[0]
            if layer == "metrics":
                assert target == "docpilot.schema" or into == "metrics" or target == "docpilot.errors", (module, target)
            if layer == "docpilot" and not module.startswith("docpilot.cli"):
                assert into not in ("tasks", "flows"), f"{module} imports {target}: the core never calls the orchestrator"
            if layer == "tasks":
                assert into != "flows", (module, target)


def test_the_core_has_few_top_level_modules_and_none_too_long():
    top = [p.name for p in (ROOT / "docpilot").glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(top) <= MAX_TOP_LEVEL, top
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_every_core_module_imports_without_prefect():
    core = sorted(m for m in MODULES if m.split(".")[0] in ("docpilot", "metrics")
                  and not m.startswith("docpilot.cli") and not m.endswith("__main__"))
    code = (
        "import importlib, sys\n"
        f"for name in {core!r}:\n"
        "    importlib.import_module(name)\n"
        "print(','.join(sorted(m for m in sys.modules if m == 'prefect' or m.startswith('prefect.'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(core) > 40 and result.stdout.strip() == ""
