"""What a Prefect run leaves behind besides the report file: its scorecard as an artifact, and tags.

The scorecard artifact is the run's Markdown summary (verdict, metrics with their
moves since the previous comparable run, failed gates, failing records) and the path
of the report it came from. It is published under one key, so the artifact's history
in Prefect is the history of the nightly numbers. Tags say which golden set and which
model a flow run measured, so runs can be filtered by them.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE

from docpilot.reports.report import file_fingerprint
from docpilot.run.job import EvalJob
from docpilot.schema import Report

SCORECARD_KEY = "docpilot-scorecard"
"""Artifact key of the scorecard; one key keeps every run's scorecard as a version of it."""

TREND_KEY = "docpilot-trend"
"""Artifact key of the trend: the headline metrics over the stored runs, their moves and the drift check."""


def run_tags(job: EvalJob, *, runner: str = "local", fingerprint: bool = True) -> list[str]:
    """Flow-run tags of an eval: golden set (name and content hash), model, set, split, and runner.

    ``fingerprint`` False leaves out the golden set's hash, for tags that outlive one run.
    """
    golden = Path(job.golden)
    tags = [f"golden:{golden.name}"]
    if fingerprint:
        tags.append(f"golden-sha256:{file_fingerprint(golden)[:8]}")
    if job.gate_only:
        tags.append("gate-only")  # no model runs, so none is named
    else:
        tags.append(f"model:{job.config.model.provider}/{job.config.model.name}")
    tags += [f"set:{job.set}", f"split:{job.split}", f"runner:{runner}"]
    return tags


def scorecard_markdown(report: Report, path: str) -> str:
    """The scorecard artifact's text: the run's Markdown summary, then where its report is."""
    # Imported here: an inline run, which publishes nothing, need not load them.
    from docpilot.readout.markdown import render_markdown
    from docpilot.readout.outcomes import prepare_readout

    summary = render_markdown(prepare_readout(report, report_path=path))
    where = Path(path).resolve()
    return f"{summary}\nReport: [`{where}`]({where.as_uri()})\n"


@task(name="publish-scorecard", cache_policy=NONE)
def publish_scorecard(report: Report, path: str) -> UUID:
    """Publish the run's scorecard as a Markdown artifact under ``SCORECARD_KEY``."""
    return create_markdown_artifact(
        key=SCORECARD_KEY,
        markdown=scorecard_markdown(report, path),
        description=f"{report.verdict}: run {report.run_id}, report {path}",
    )


@task(name="publish-trend", cache_policy=NONE)
def publish_trend(report: Report, path: str) -> UUID | None:
    """Publish the series' history up to this run (``docpilot history --markdown``) under ``TREND_KEY``.

    Nothing is published for a report outside its folder's run index.
    """
    from docpilot.history.markdown import run_history_markdown

    markdown = run_history_markdown(path)
    if markdown is None:
        return None
    return create_markdown_artifact(key=TREND_KEY, markdown=markdown,
                                    description=f"trend up to run {report.run_id} ({report.verdict})")
