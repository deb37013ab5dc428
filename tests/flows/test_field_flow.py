"""The nightly field run: yesterday's log, named by its date, scored as a Prefect flow run on a real server."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml

from docpilot.errors import ConfigError
from tests.support.field_log import APP_MAPPING, make_turns, write_app_log

pytestmark = pytest.mark.slow  # a Prefect server, and the demo docs opened

ROOT = Path(__file__).resolve().parents[2]


def test_the_nightly_flow_scores_yesterdays_log_and_history_lists_it(prefect_api, tmp_path):
    from click.testing import CliRunner
    from docpilot.flows.field import field_deployment, nightly_field

    from docpilot.cli import main

    yesterday = (date.today() - timedelta(days=1)).isoformat()
    (tmp_path / "logs").mkdir()
    write_app_log(make_turns()[:60], tmp_path / "logs" / f"{yesterday}.jsonl")
    (tmp_path / "docpilot.yaml").write_text(yaml.safe_dump({
        "corpus": {"docs": str(ROOT / "docs")}, "reports_dir": "reports", "logs": {"app": APP_MAPPING}}))
    found = nightly_field(config="docpilot.yaml", log="logs/{yesterday}.jsonl", workdir=str(tmp_path))
    assert found["log"] == f"logs/{yesterday}.jsonl" and found["turns"] == 60
    saved = json.loads(Path(found["report"]).read_text())
    assert saved["run_id"] == found["run_id"] and saved["summary"]["turns"] == 60
    listed = CliRunner().invoke(main, ["field-history", "--reports", str(tmp_path / "reports")])
    assert listed.exit_code == 0 and f"logs/{yesterday}.jsonl | 60 |" in listed.output
    deployment = field_deployment(cron="0 6 * * *", parameters={"config": "docpilot.yaml"})
    assert deployment.name == "field-nightly" and deployment.parameters == {"config": "docpilot.yaml"}


def test_a_log_template_naming_another_field_is_a_config_error():
    from docpilot.flows.field import log_of

    assert log_of("logs/{yesterday}.csv", date(2026, 3, 1)) == Path("logs/2026-02-28.csv")
    with pytest.raises(ConfigError, match="only {yesterday} and {today}"):
        log_of("logs/{day}.jsonl", date(2026, 3, 1))
