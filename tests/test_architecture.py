"""The shape of the code: packages by noun, arrows one way, no cycles, one road through the eval.

These read the source tree itself (its ``import`` statements, those inside functions
included) rather than trust a diagram, so the architecture in docs/architecture.md
stays true as code lands.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from tests.conftest import ROOT
from tests.support.tree_copy import copy_tree, edit_source

PROJECT = {"docpilot": "docpilot", "metrics": "docpilot.metrics", "tasks": "docpilot.tasks", "flows": "docpilot.flows"}
"""The project's folders at the top of the repository, each with the package it installs as."""
MAX_TOP_LEVEL = 12

LAYERS: list[tuple[str, frozenset[str]]] = [
    ("infrastructure", frozenset({
        "docpilot", "docpilot.errors", "docpilot.schema", "docpilot.json_schema", "docpilot.extras",
        "docpilot.codebase", "docpilot.processes", "docpilot.progress", "docpilot.clock", "docpilot.cache",
        "docpilot.redact", "docpilot.userfiles", "docpilot.net", "docpilot.metrics",
    })),
    ("config, golden sets, corpus", frozenset({"docpilot.config", "docpilot.golden", "docpilot.corpus"})),
    ("retrieval, models", frozenset({"docpilot.retrieval", "docpilot.models"})),
    ("assistant, the API's shapes, targets, telemetry", frozenset({"docpilot.assistant", "docpilot.api", "docpilot.targets", "docpilot.telemetry"})),
    ("eval, server, reports", frozenset({
        "docpilot.run", "docpilot.server", "docpilot.reports", "docpilot.history", "docpilot.field",
    })),
    ("readouts, improve, drafting", frozenset({"docpilot.readout", "docpilot.improve", "docpilot.drafting"})),
    ("cli and the Prefect/Dask integration", frozenset({"docpilot.cli", "docpilot.__main__", "docpilot.tasks", "docpilot.flows"})),
]
"""The packages, bottom to top: a package imports only packages of its own layer or below,
and within a layer no two packages import each other, directly or through others."""


def modules_of(root: Path) -> dict[str, Path]:
    """Every project module under ``root``, by dotted name."""
    found = {}
    for folder, package in PROJECT.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = [package, *path.relative_to(root / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an imported name lives in: the longest known prefix."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


_READ: dict[tuple[str, str, str], object] = {}
"""What a check read from a source text, by the check's name, its argument and the text: the checks run
on the checkout and on copies of it, and a file's text tells all they read of it."""


def _read_once(check: str, path: Path, argument: str, read):
    """``read(tree)`` of the source at ``path``, parsed once per distinct text for the ``check`` and ``argument``."""
    text = path.read_text()
    key = (check, argument, text)
    if key not in _READ:
        _READ[key] = read(ast.parse(text, str(path)))
    return _READ[key]


def _imported_names(tree: ast.AST, package: str) -> list[str]:
    """Every name an ``import`` of ``tree`` imports, those inside functions included, relative ones made absolute."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from docpilot.run import progress` imports docpilot.run.progress, not the package alone.
            names += [f"{base}.{alias.name}" for alias in node.names] + [base]
    return names


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules ``module`` imports anywhere in its body, function bodies included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for name in _read_once("imports", path, package, lambda tree: _imported_names(tree, package)):
        target = _resolve(name, modules)
        if target is not None and target != module and not module.startswith(target + "."):
            found.add(target)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Which project modules each project module under ``root`` imports."""
    modules = modules_of(root)
    return {module: _imports(module, path, modules) for module, path in modules.items()}


def package_of(module: str) -> str:
    """The unit the layers are drawn between: a package of docpilot, a top-level module, or a top package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "docpilot" else parts[0]


def package_graph(graph: dict[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """Package → imported package → the module arrows that make that import."""
    packages: dict[str, dict[str, set[str]]] = {package_of(m): {} for m in graph}
    for module, targets in graph.items():
        for target in targets:
            if package_of(target) != package_of(module):
                packages[package_of(module)].setdefault(package_of(target), set()).add(f"{module} -> {target}")
    return packages


def find_cycle(graph: dict[str, Iterable[str]]) -> list[str] | None:
    """One cycle in a graph, as the path around it, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def layer_problems(root: Path) -> list[str]:
    """What breaks the layers in the tree under ``root``: unplaced packages, upward imports, package cycles."""
    packages = package_graph(import_graph(root))
    level = {package: n for n, (_, members) in enumerate(LAYERS) for package in members}
    problems = [f"{package} is in no layer: add it to LAYERS" for package in sorted(packages) if package not in level]
    for package, targets in sorted(packages.items()):
        for target, arrows in sorted(targets.items()):
            if package in level and target in level and level[target] > level[package]:
                problems.append(
                    f"{package} ({LAYERS[level[package]][0]}) imports {target} ({LAYERS[level[target]][0]}), "
                    f"a layer above it: {', '.join(sorted(arrows))}"
                )
    cycle = find_cycle(packages)
    if cycle:
        problems.append("package cycle: " + " -> ".join(cycle))
    return problems


MODULES = modules_of(ROOT)


def test_no_import_cycle_between_project_modules():
    assert find_cycle(import_graph(ROOT)) is None


def test_packages_keep_their_layers_and_form_no_cycle():
    assert layer_problems(ROOT) == []


def test_the_layer_check_fails_on_a_package_cycle_in_a_copy(tmp_path):
    tree = copy_tree(tmp_path / "tree")
    assert layer_problems(tree) == []  # the copy holds as the checkout does
    # corpus sits beside config in its layer, so this import is allowed alone; with
    # config's own import of corpus below, the two packages form a cycle.
    edit_source(tree, "docpilot/corpus/sidecar.py", "from __future__ import annotations\n",
                "from __future__ import annotations\n\nimport docpilot.config.model  # noqa: F401\n")
    edit_source(tree, "docpilot/config/ranges.py", "from __future__ import annotations\n",
                "from __future__ import annotations\n\n\ndef _chunks():\n    from docpilot.corpus import chunking\n\n    return chunking\n")
    problems = layer_problems(tree)
    assert len(problems) == 1 and problems[0].startswith("package cycle: "), problems
    assert "docpilot.config" in problems[0] and "docpilot.corpus" in problems[0]


def test_the_layer_check_fails_on_an_upward_import_in_a_copy(tmp_path):
    tree = copy_tree(tmp_path / "tree")
    # An import inside a function counts: retrieval reaching up into the eval.
    edit_source(tree, "docpilot/retrieval/fusion.py", "from __future__ import annotations\n",
                "from __future__ import annotations\n\n\ndef _shards():\n    from docpilot.run.job import shards\n\n    return shards\n")
    problems = layer_problems(tree)
    assert problems[0] == (
        "docpilot.retrieval (retrieval, models) imports docpilot.run (eval, server, reports), a layer above it: "
        "docpilot.retrieval.fusion -> docpilot.run.job"
    )
    # The eval imports retrieval, so the upward arrow also closes a cycle between packages.
    assert len(problems) == 2 and problems[1].startswith("package cycle: ")


def test_the_layer_check_fails_on_a_package_in_no_layer(tmp_path):
    tree = copy_tree(tmp_path / "tree")
    (tree / "docpilot" / "extra").mkdir()
    (tree / "docpilot" / "extra" / "__init__.py").write_text('"""A package nobody placed."""\n')
    assert layer_problems(tree) == ["docpilot.extra is in no layer: add it to LAYERS"]


def test_arrows_point_one_way():
    for module, targets in import_graph(ROOT).items():
        layer = package_of(module)
        for target in targets:
            into = package_of(target)
            if layer == "docpilot.metrics":
                assert target in ("docpilot.schema", "docpilot.errors") or into == layer, (module, target)
            if layer not in ("docpilot.cli", "docpilot.tasks", "docpilot.flows"):
                assert into not in ("docpilot.tasks", "docpilot.flows"), \
                    f"{module} imports {target}: the core never calls the orchestrator"
            if layer == "docpilot.tasks":
                assert into != "docpilot.flows", (module, target)


def test_the_core_has_few_top_level_modules():
    top = [p.name for p in (ROOT / "docpilot").glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(top) <= MAX_TOP_LEVEL, top


# One road (docs/architecture.md): one entry point to an eval, the run's state in the run,
# and the stage order written in one function.

RUN = "docpilot/run"

MEMOS = {"docpilot.run.job._PARSED": "record files parsed, by path and content digest: a memo of a pure read"}
"""Module-level containers of docpilot/run/ that are allowed, each a memo of a pure function, and why."""

ROAD = {
    "ask": ("assistant.answer", "assistant.rank"),
    "render": ("render",),
    "score": ("score", "build_rows"),
}
"""The steps of a record's way whoever answers, each by the names of the functions that do it."""

IN_PROCESS = {
    "retrieve": ("rank", "lookup_rankings", "retriev"),
    "prime": ("prime",),
    "model": ("lookup_turns", "send_turns", "model_shard"),
}
"""The steps DocPilot's own assistant takes in this process to answer (retrieve → prime → model)."""

PLANNERS = ("docpilot.run.assistants.assistant_for", "docpilot.flows.plan.")
"""Where a run's runtime may be read: who answers is chosen once (``assistant_for``), and the planner checks
the user's options against it (``flows.plan``)."""

_CONTAINERS = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "WeakValueDictionary", "WeakSet",
               "WeakKeyDictionary", "ChainMap", "Counter"}


def _functions(tree: ast.AST) -> Iterable[ast.FunctionDef | ast.AsyncFunctionDef]:
    return (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))


def entry_points(root: Path) -> list[str]:
    """The public functions of docpilot/run/ that take a job and give a report: the ways into an eval."""
    found = []
    for path in sorted((root / RUN).glob("*.py")):
        module = ast.parse(path.read_text(), str(path))
        for node in module.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
                continue
            takes_job = any(a.arg == "job" for a in node.args.args + node.args.kwonlyargs)
            gives_report = node.returns is not None and "Report" in ast.unparse(node.returns)
            if takes_job and gives_report:
                found.append(f"{path.stem}.{node.name}")
    return found


def run_registries(root: Path) -> list[str]:
    """Module-level containers in docpilot/run/ (a dict, list or set a run could be kept in), but the memos
    and a module's ``__all__``."""
    found = []
    for path in sorted((root / RUN).glob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) and node.value is not None else []
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            shown = isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp)
            called = isinstance(value, ast.Call) and ast.unparse(value.func).rpartition(".")[2] in _CONTAINERS
            for target in targets:
                name = f"docpilot.run.{path.stem}.{ast.unparse(target)}"
                if (shown or called) and name not in MEMOS and not ast.unparse(target).startswith("__"):
                    found.append(name)
    return found


def stage_orders(root: Path, steps: dict[str, tuple[str, ...]]) -> list[str]:
    """Every function of the project that calls a function of each of ``steps``: each one writes their order."""
    found = []
    for module, path in sorted(modules_of(root).items()):
        for function, called in _read_once("calls", path, "", _calls_by_function):
            if all(any(word in name for name in called for word in words) for words in steps.values()):
                found.append(f"{module}.{function}")
    return found


def _calls_by_function(tree: ast.AST) -> list[tuple[str, set[str]]]:
    """Each function of ``tree`` (nested ones too, in walk order) with what it calls, as ``ast.unparse`` writes it;
    a nested function's calls count for the functions around it as well."""
    written = {node: ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return [(function.name, {written[n] for n in ast.walk(function) if isinstance(n, ast.Call)})
            for function in _functions(tree)]


def runtime_tests(root: Path) -> list[str]:
    """Functions of the eval, the CLI and the flows that compare a runtime to a string (``runtime == "server"``),
    but the planners."""
    found = []
    for module, path in sorted(modules_of(root).items()):
        if package_of(module) not in ("docpilot.run", "docpilot.cli", "docpilot.flows", "docpilot.tasks"):
            continue
        for function in _functions(ast.parse(path.read_text(), str(path))):
            name = f"{module}.{function.name}"
            for node in ast.walk(function):
                if isinstance(node, ast.Compare) and "runtime" in ast.unparse(node.left) and any(
                        isinstance(c, ast.Constant) and isinstance(c.value, str) for c in node.comparators):
                    if not name.startswith(PLANNERS):
                        found.append(name)
                    break
    return found


def limiters(root: Path) -> list[str]:
    """Where the eval bounds what is in flight: every semaphore made in docpilot/run/ or its integrations."""
    found = []
    for module, path in sorted(modules_of(root).items()):
        if package_of(module) not in ("docpilot.run", "docpilot.flows", "docpilot.tasks"):
            continue
        for function in _functions(ast.parse(path.read_text(), str(path))):
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and ast.unparse(node.func).rpartition(".")[2] in (
                        "Semaphore", "BoundedSemaphore"):
                    found.append(f"{module}.{function.name}")
    return found


HTTPX_KEPT = {
    "docpilot.api.token": "one blocking request that checks a server's token",
    "docpilot.models.local": "the local model server's blocking health check",
    "docpilot.retrieval.embedders": "the embeddings client, which asks for vectors, not answers",
    "docpilot.tasks.prefect_server": "the blocking health check of the Prefect server a run starts",
}
"""Modules that may speak httpx: none of them asks an assistant a question (every asker speaks aiohttp)."""


def http_stacks(root: Path) -> dict[str, set[str]]:
    """Each HTTP client library the project imports (aiohttp, httpx, requests, urllib3) → the modules importing it."""
    found: dict[str, set[str]] = {}
    for module, path in sorted(modules_of(root).items()):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                top = name.partition(".")[0]
                if top in ("aiohttp", "httpx", "requests", "urllib3"):
                    found.setdefault(top, set()).add(module)
    return found


def test_an_eval_has_one_entry_point():
    assert entry_points(ROOT) == ["evaluation.evaluate"]


def test_no_module_of_the_eval_keeps_runs():
    assert run_registries(ROOT) == []


def test_the_stage_order_is_written_once():
    assert stage_orders(ROOT, ROAD) == ["docpilot.run.road.travel"]
    assert stage_orders(ROOT, IN_PROCESS) == ["docpilot.run.assistants.answer"]


def test_who_answers_is_chosen_once_and_every_question_holds_the_one_limiter():
    assert runtime_tests(ROOT) == []
    assert limiters(ROOT) == ["docpilot.run.limiter.loop"]


def test_every_asker_speaks_one_http_client_stack():
    stacks = http_stacks(ROOT)
    assert set(stacks) == {"aiohttp", "httpx"}
    assert stacks["httpx"] <= set(HTTPX_KEPT), sorted(stacks["httpx"] - set(HTTPX_KEPT))
    assert {"docpilot.models.openai", "docpilot.api.client", "docpilot.targets.ask"} <= stacks["aiohttp"]


def test_the_client_stack_check_fails_on_an_asker_speaking_httpx_in_a_copy(tmp_path):
    tree = copy_tree(tmp_path / "tree")
    edit_source(tree, "docpilot/targets/ask.py", "import aiohttp\n", "import aiohttp\nimport httpx\n")
    assert "docpilot.targets.ask" in http_stacks(tree)["httpx"] - set(HTTPX_KEPT)


def test_the_road_checks_fail_on_a_second_entry_point_a_registry_and_a_second_road_in_a_copy(tmp_path):
    tree = copy_tree(tmp_path / "tree")
    assert (entry_points(tree), run_registries(tree), stage_orders(tree, ROAD), runtime_tests(tree),
            limiters(tree)) == (["evaluation.evaluate"], [], ["docpilot.run.road.travel"], [],
                                ["docpilot.run.limiter.loop"])  # the copy holds as the checkout does
    # A second way in: the variants' own evaluate, as run_variants was.
    edit_source(tree, "docpilot/run/variants.py", "from __future__ import annotations\n",
                "from __future__ import annotations\n\n\ndef run_variants(job, variants) -> Report:\n"
                "    return join(job, variants)\n")
    assert entry_points(tree) == ["evaluation.evaluate", "variants.run_variants"]
    # A table of the runs open in this process, as context.py's _RUNS was.
    edit_source(tree, "docpilot/run/context.py", "from __future__ import annotations\n",
                "from __future__ import annotations\n\n_RUNS: dict[str, object] = {}\n_WORKERS = OrderedDict()\n")
    assert run_registries(tree) == ["docpilot.run.context._RUNS", "docpilot.run.context._WORKERS"]
    # A second road: the stage order written again, for the lead, as wiring.leading did.
    edit_source(tree, "docpilot/run/variants.py", "from __future__ import annotations\n",
                "from __future__ import annotations\n\n\ndef _lead(ws, traces):\n"
                "    road.rank_shard(ws, traces)\n    road.prime_shard(ws, traces)\n"
                "    road.lookup_turns(ws, traces)\n    run.assistant.answer(run, traces)\n    road.render_shard(ws, traces)\n"
                "    return road.build_rows(traces)\n")
    assert stage_orders(tree, ROAD) == ["docpilot.run.road.travel", "docpilot.run.variants._lead"]
    assert stage_orders(tree, IN_PROCESS) == ["docpilot.run.assistants.answer",
                                              "docpilot.run.variants._lead"]
    # "Who answers" tested again outside the planner, as road.travel did.
    edit_source(tree, "docpilot/run/road.py", "    check_running(run)\n",
                "    check_running(run)\n    if run.job.runtime == \"server\":\n        pass\n")
    assert runtime_tests(tree) == ["docpilot.run.road.travel"]
    # A second limiter: a semaphore per shard, as the server runtime's was.
    edit_source(tree, "docpilot/run/remote.py", "    async def one(trace: Trace)",
                "    gate = asyncio.Semaphore(8)\n\n    async def one(trace: Trace)")
    assert limiters(tree) == ["docpilot.run.limiter.loop", "docpilot.run.remote.ask_all"]


def test_every_core_module_imports_without_prefect():
    core = sorted(m for m in MODULES if package_of(m) not in ("docpilot.tasks", "docpilot.flows")
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


def test_no_import_changes_the_environment():
    modules = sorted(m for m in MODULES if not m.endswith("__main__"))
    code = (
        "import importlib, os\n"
        "before = dict(os.environ)\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))\n"
        "print(','.join(changed))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DASK_", "DO_NOT_TRACK"))}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env=env)
    assert result.returncode == 0, result.stderr
    assert len(modules) > 100 and result.stdout.strip() == ""
