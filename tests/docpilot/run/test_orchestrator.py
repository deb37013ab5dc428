"""Which orchestrator `auto` picks: Prefect where a Prefect API is configured, else inline, without importing Prefect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from docpilot.run.orchestrator import START_A_SERVER, choose, configured_api

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
URL = "http://127.0.0.1:4200/api"


@pytest.fixture
def nowhere(tmp_path) -> dict[str, str]:
    """An environment with no Prefect API anywhere: an empty Prefect home, an empty folder."""
    home = tmp_path / "prefect-home"
    home.mkdir()
    return {"PREFECT_HOME": str(home)}


def test_nothing_configured_runs_inline_and_says_how_to_get_prefect(nowhere, tmp_path):
    chosen = choose("auto", environ=nowhere, cwd=tmp_path)
    assert chosen.orchestrator == "inline"
    assert chosen.reason == "no Prefect API is configured"
    assert chosen.other == START_A_SERVER and "prefect server start" in chosen.other


def test_an_api_in_the_environment_runs_under_prefect(nowhere, tmp_path):
    chosen = choose("auto", environ={**nowhere, "PREFECT_API_URL": URL}, cwd=tmp_path)
    assert (chosen.orchestrator, chosen.reason) == ("prefect", "a Prefect API is configured (PREFECT_API_URL)")
    assert "--orchestrator inline" in chosen.other


def test_an_api_in_the_active_profile_counts(nowhere, tmp_path):
    (Path(nowhere["PREFECT_HOME"]) / "profiles.toml").write_text(
        f'active = "local"\n[profiles.local]\nPREFECT_API_URL = "{URL}"\n[profiles.ephemeral]\n'
    )
    assert configured_api(nowhere, tmp_path) == "Prefect profile 'local'"
    assert configured_api({**nowhere, "PREFECT_PROFILE": "ephemeral"}, tmp_path) is None


@pytest.mark.parametrize(("name", "text", "where"), [
    (".env", f"PREFECT_API_URL={URL}\n", "PREFECT_API_URL in .env"),
    ("prefect.toml", f'[api]\nurl = "{URL}"\n', "api.url in prefect.toml"),
    ("pyproject.toml", f'[tool.prefect.api]\nurl = "{URL}"\n', "tool.prefect.api.url in pyproject.toml"),
])
def test_an_api_in_a_settings_file_of_the_working_folder_counts(nowhere, tmp_path, name, text, where):
    (tmp_path / name).write_text(text)
    assert configured_api(nowhere, tmp_path) == where
    assert choose("auto", environ=nowhere, cwd=tmp_path).orchestrator == "prefect"


def test_runs_that_need_prefect_run_under_it_without_an_api(nowhere, tmp_path):
    assert choose("auto", runner="dask", environ=nowhere, cwd=tmp_path).reason.startswith("--runner dask")
    assert choose("auto", scheduled=True, environ=nowhere, cwd=tmp_path).orchestrator == "prefect"
    forced = choose("prefect", environ=nowhere, cwd=tmp_path)
    assert forced.orchestrator == "prefect" and "temporary Prefect server" in forced.reason
    assert choose("inline", environ={**nowhere, "PREFECT_API_URL": URL}, cwd=tmp_path).orchestrator == "inline"


def _prefect_sees_an_api(env: dict[str, str], cwd: Path) -> bool:
    script = "from prefect.settings import PREFECT_API_URL; print(bool(PREFECT_API_URL.value()))"
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=cwd, capture_output=True, text=True,
                         check=True, timeout=120)
    return out.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize("where", ["nowhere", "environment", "profile", "prefect.toml", "pyproject.toml", ".env",
                                   "other profile"])
def test_the_choice_agrees_with_prefects_own_settings(nowhere, tmp_path, where):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | nowhere
    folder = tmp_path / "work"
    folder.mkdir()
    profiles = Path(nowhere["PREFECT_HOME"]) / "profiles.toml"
    if where == "environment":
        env["PREFECT_API_URL"] = URL
    elif where in ("profile", "other profile"):
        profiles.write_text(f'active = "local"\n[profiles.local]\nPREFECT_API_URL = "{URL}"\n[profiles.quiet]\n')
        if where == "other profile":
            env["PREFECT_PROFILE"] = "quiet"
    elif where == "prefect.toml":
        (folder / "prefect.toml").write_text(f'[api]\nurl = "{URL}"\n')
    elif where == "pyproject.toml":
        (folder / "pyproject.toml").write_text(f'[tool.prefect.api]\nurl = "{URL}"\n')
    elif where == ".env":
        (folder / ".env").write_text(f"PREFECT_API_URL={URL}\n")
    ours = configured_api(env, folder) is not None
    assert ours == _prefect_sees_an_api(env, folder) == (where not in ("nowhere", "other profile"))


def test_an_inline_eval_never_imports_prefect_nor_a_gate_only_one_the_http_client(tmp_path, nowhere):
    # The whole command, in a fresh interpreter: the CLI, the demo's config and golden set. DocPilot's own
    # assistant asks no one over HTTP in a gate-only run, so aiohttp (about 0.14 s to import) stays out too.
    script = (
        "import sys\n"
        "from docpilot.cli import main\n"
        "try:\n"
        "    main(['eval', '--gate-only', '--config', sys.argv[1], '--out', sys.argv[2]])\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        "import json\n"
        "print(json.dumps({'code': code, 'prefect': sorted(m for m in sys.modules if m.split('.')[0] == 'prefect'),\n"
        "                  'aiohttp': 'aiohttp' in sys.modules}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | nowhere
    out = subprocess.run(
        [sys.executable, "-c", script, str(ROOT / "configs" / "docpilot.yaml"), str(tmp_path / "r.json")],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "prefect": [], "aiohttp": False}, out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["orchestrator"], report["orchestrator_reason"]) == ("inline", "no Prefect API is configured")


def test_the_core_of_a_run_does_not_import_prefect():
    code = (
        "import sys\n"
        "from docpilot.run import evaluation, job, orchestrator, road\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'prefect'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"


def test_without_an_active_profile_prefects_own_default_applies(nowhere, tmp_path):
    (Path(nowhere["PREFECT_HOME"]) / "profiles.toml").write_text(
        f'[profiles.ephemeral]\nPREFECT_API_URL = "{URL}"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | nowhere
    assert configured_api(env, tmp_path) is None
    assert _prefect_sees_an_api(env, tmp_path) is False
