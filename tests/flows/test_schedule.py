"""Nightly evals: the deployment and its cron schedule are registered, and the scheduled flow runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner
from docpilot.flows.schedule import (
    MAX_PARAMETER_BYTES,
    nightly_deployment,
    nightly_eval,
    register_deployment,
    require_api,
)
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.settings import PREFECT_API_URL, temporary_settings

from docpilot.cli import main
from docpilot.errors import ConfigError, OrchestratorError
from tests.conftest import ROOT
from tests.support.pipeline_jobs import PIPELINE

pytestmark = pytest.mark.slow

PREFECT_YAML = ROOT / "configs" / "prefect.yaml"


def _read_deployment(name: str):
    with get_client(sync_client=True) as client:
        return client.read_deployment_by_name(name)


def _config_file(folder, **extra) -> str:
    settings = {
        "corpus": {"docs": str(PIPELINE / "docs")},
        "golden": str(PIPELINE / "golden.yaml"),
        "cache_dir": str(folder / "cache"),
        "reports_dir": "reports",  # relative: read from the run's working folder
        **extra,
    }
    path = folder / "docpilot.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return str(path)


def test_the_deployment_and_its_schedule_are_registered(prefect_api, tmp_path):
    parameters = {"config": _config_file(tmp_path), "gate_only": True, "workdir": str(tmp_path)}
    deployment = nightly_deployment(cron="0 2 * * *", name="registered", timezone="Europe/Berlin",
                                    parameters=parameters, tags=["docpilot"])
    deployment_id = register_deployment(deployment)
    stored = _read_deployment("docpilot-nightly/registered")
    assert stored.id == deployment_id
    (schedule,) = stored.schedules
    assert schedule.schedule.cron == "0 2 * * *" and schedule.schedule.timezone == "Europe/Berlin"
    assert schedule.active
    assert stored.parameters == parameters and stored.tags == ["docpilot"]
    assert stored.entrypoint == "docpilot.flows.schedule.nightly_eval"


def test_the_command_registers_a_deployment(prefect_api, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _config_file(tmp_path)
    result = CliRunner().invoke(main, [
        "schedule", "--cron", "30 1 * * 1-5", "--name", "weekdays", "--timezone", "UTC", "--config", config,
        "--split", "dev", "--gate-only", "--register-only", "--json",
    ])
    assert result.exit_code == 0, result.output
    described = json.loads(result.output)
    stored = _read_deployment("docpilot-nightly/weekdays")
    assert str(stored.id) == described["id"]
    assert stored.schedules[0].schedule.cron == "30 1 * * 1-5"
    assert stored.parameters["split"] == "dev" and stored.parameters["gate_only"] is True
    assert stored.parameters["workdir"] == str(tmp_path)
    assert {"golden:golden.yaml", "gate-only", "scheduled"} <= set(stored.tags)


def test_prefect_deploy_registers_the_project_deployment(prefect_api, tmp_path):
    with get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name="docpilot", type="process"), overwrite=True)
    # `{{ $PWD }}` in prefect.yaml is the folder deploy runs from, as a shell would set it.
    env = dict(os.environ, PREFECT_HOME=str(tmp_path), PWD=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all", "--prefect-file", str(PREFECT_YAML)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    declared = yaml.safe_load(PREFECT_YAML.read_text(encoding="utf-8"))["deployments"][0]["schedules"][0]
    stored = _read_deployment("docpilot-nightly/nightly")
    schedule = stored.schedules[0].schedule
    assert (schedule.cron, schedule.timezone) == (declared["cron"], declared["timezone"])
    assert stored.work_pool_name == "docpilot" and stored.entrypoint == "flows/schedule.py:nightly_eval"
    assert stored.pull_steps == [{"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}]


def test_a_scheduled_run_reads_its_config_and_reports(prefect_api, tmp_path):
    outcome = nightly_eval(config=_config_file(tmp_path), gate_only=True, workdir=str(tmp_path))
    assert outcome["verdict"] == "pass"
    assert (tmp_path / "reports" / f"{outcome['run_id']}.json").is_file()


def test_a_scheduled_run_publishes_the_trend_beside_the_scorecard(prefect_api, tmp_path):
    from docpilot.tasks.artifacts import TREND_KEY
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    config = _config_file(tmp_path)
    nightly_eval(config=config, gate_only=True, workdir=str(tmp_path))
    outcome = nightly_eval(config=config, gate_only=True, workdir=str(tmp_path))
    with get_client(sync_client=True) as client:
        trends = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[TREND_KEY])))
    (trend,) = [a for a in trends if outcome["run_id"] in (a.description or "")]
    assert trend.type == "markdown" and "## DocPilot history" in trend.data
    assert "2 of the series' 2 comparable runs" in trend.data and "| `recall@8` |" in trend.data


def test_a_scheduled_run_fails_when_a_gate_fails(prefect_api, tmp_path):
    config = _config_file(tmp_path, gates={"recall@8": "> 1"})
    state = nightly_eval(config=config, gate_only=True, workdir=str(tmp_path), return_state=True)
    assert state.is_failed() and "recall@8 failed" in state.message


@pytest.mark.parametrize(("cron", "timezone", "flag"), [
    ("0 2 * *", "UTC", "--cron"),
    ("every night", "UTC", "--cron"),
    ("0 2 * * *", "Mars/Olympus", "--timezone"),
])
def test_a_bad_schedule_names_the_option(cron, timezone, flag):
    with pytest.raises(ConfigError, match=f"^{flag} ") as caught:
        nightly_deployment(cron=cron, timezone=timezone)
    assert "fix:" in str(caught.value)


def test_parameters_over_prefects_cap_are_refused():
    with pytest.raises(ConfigError, match="over Prefect's"):
        nightly_deployment(cron="0 2 * * *", parameters={"config": "x" * MAX_PARAMETER_BYTES})


def test_a_schedule_needs_a_prefect_server():
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        with pytest.raises(OrchestratorError, match="PREFECT_API_URL is not set"):
            require_api()
