"""A Prefect run leaves its scorecard as an artifact and is tagged with its golden set and model."""

from __future__ import annotations

from pathlib import Path

import pytest
from docpilot.tasks.artifacts import SCORECARD_KEY, run_tags, scorecard_markdown
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

from docpilot.reports.report import file_fingerprint
from tests.support.evals import run_eval
from tests.support.pipeline_jobs import pipeline_job

pytestmark = pytest.mark.slow


def _scorecards() -> list:
    with get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[SCORECARD_KEY])))


@pytest.fixture(scope="module")
def published(prefect_api, tmp_path_factory):
    """A full Prefect run against the shared server, its scorecard artifact and its flow run."""
    job = pipeline_job(tmp_path_factory.mktemp("artifacts"))
    report = run_eval(job, "prefect")
    path = report.path
    (artifact,) = [a for a in _scorecards() if report.run_id in (a.description or "")]
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(artifact.flow_run_id)
    return job, report, path, artifact, flow_run


def test_a_prefect_run_publishes_its_scorecard(published):
    _, report, path, artifact, flow_run = published
    assert artifact.key == SCORECARD_KEY and artifact.type == "markdown"
    assert f"DocPilot: {report.verdict.upper()}" in artifact.data
    assert "`recall@8`" in artifact.data and "`answer_f1`" in artifact.data
    assert str(Path(path).resolve()) in artifact.data
    assert flow_run.name and artifact.flow_run_id == flow_run.id


def test_the_flow_run_is_tagged_with_the_golden_set_and_the_model(published):
    job, _, _, _, flow_run = published
    expected = {
        "golden:golden.yaml",
        f"golden-sha256:{file_fingerprint(job.golden)[:8]}",
        "model:extractive/extractive-v1",
        "split:all",
        "runner:local",
    }
    assert expected <= set(flow_run.tags)


def test_an_inline_run_publishes_nothing(prefect_api, tmp_path):
    before = len(_scorecards())
    run_eval(pipeline_job(tmp_path, gate_only=True), "inline")
    assert len(_scorecards()) == before


def test_a_gate_only_run_names_no_model(tmp_path):
    tags = run_tags(pipeline_job(tmp_path, gate_only=True), runner="dask")
    assert "gate-only" in tags and "runner:dask" in tags
    assert not any(tag.startswith("model:") for tag in tags)
    assert not any(tag.startswith("golden-sha256:") for tag in run_tags(pipeline_job(tmp_path), fingerprint=False))


def test_the_scorecard_links_its_report(tmp_path):
    report = run_eval(pipeline_job(tmp_path, gate_only=True), "inline")
    path = report.path
    text = scorecard_markdown(report, path)
    where = Path(path).resolve()
    assert text.startswith("### ") and f"[`{where}`]({where.as_uri()})" in text
