"""Nightly evals: the eval as a Prefect deployment on a cron schedule.

``nightly_eval`` is the flow a deployment runs. Its parameters are small and plain (a
configuration path, the set, the split, the runner), and it reads the configuration,
the golden set and the docs when the run starts, so each night measures the docs and
golden set as they are that night. It runs the eval flow as a subflow (which publishes
the scorecard artifact and carries the golden-set and model tags) and ends Failed when
a gate failed, so a failing night is visible, and alertable, in Prefect.

``nightly_deployment`` builds the deployment with its cron schedule (and
``configured_deployment`` the one of a configuration file, with its parameters and
tags); ``register_deployment`` applies it to the Prefect API and ``serve_deployment``
applies it and runs its flow runs in this process. ``configs/prefect.yaml`` declares the same deployment for
``prefect deploy`` and a work pool.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Literal
from uuid import UUID

from prefect import flow
from prefect.client.schemas.schedules import CronSchedule
from prefect.deployments.runner import RunnerDeployment
from prefect.schedules import Cron
from prefect.settings import PREFECT_API_URL
from prefect.states import Failed
from prefect.types.entrypoint import EntrypointType
from pydantic import ValidationError

from docpilot.errors import ConfigError, OrchestratorError
from docpilot.run.job import build_job

MAX_PARAMETER_BYTES = 512 * 1024
"""Prefect's cap on a deployment's parameters, as JSON."""

DEFAULT_NAME = "nightly"
"""Deployment name when none is given."""

RecordSet = Literal["golden", "adversarial"]
Split = Literal["dev", "test", "all"]
Runner = Literal["local", "dask"]


@flow(name="docpilot-nightly")
def nightly_eval(
    config: str | None = None,
    record_set: RecordSet = "golden",
    split: Split = "all",
    gate_only: bool = False,
    runner: Runner = "local",
    dask_address: str | None = None,
    workdir: str | None = None,
) -> dict:
    """A scheduled eval: read the configuration now, run the eval flow, fail when a gate failed.

    ``workdir`` is where relative paths in the configuration (docs, golden set, cache,
    reports) are read from; None keeps the process's working directory.
    """
    from docpilot.flows.plan import Options, plan
    from docpilot.tasks.artifacts import publish_trend
    from prefect.utilities.annotations import quote

    from docpilot.run.evaluation import evaluate

    with contextlib.chdir(workdir) if workdir else contextlib.nullcontext():
        job = build_job(config, record_set=record_set, split=split, gate_only=gate_only)
        planned = plan(job.config, Options(runner=runner, dask_address=dask_address, gate_only=gate_only,
                                           runtime=job.runtime, scheduled=True))
        report = evaluate(job, planned.executor)
        path = report.path
        publish_trend(quote(report), path)  # beside the scorecard the eval flow published
    outcome = {"verdict": report.verdict, "run_id": report.run_id, "report": str(Path(workdir or ".", path))}
    if report.verdict == "fail":
        failed = ", ".join(g.metric for g in report.gates if not g.passed) or "a gate"
        return Failed(message=f"{failed} failed; report {outcome['report']}", data=outcome)
    return outcome


def nightly_deployment(
    *,
    cron: str,
    name: str = DEFAULT_NAME,
    timezone: str = "UTC",
    parameters: dict | None = None,
    tags: list[str] | None = None,
) -> RunnerDeployment:
    """The deployment of ``nightly_eval`` on ``cron`` in ``timezone``, with its parameters checked."""
    _check_schedule(cron, timezone)
    parameters = parameters or {}
    _check_parameters(parameters)
    return nightly_eval.to_deployment(
        name=name,
        schedules=[Cron(cron, timezone=timezone)],
        parameters=parameters,
        tags=tags or [],
        description="DocPilot's scheduled eval: the golden set through every stage, a report and a verdict.",
        # Found by module, not by file, so any install of DocPilot can load it.
        entrypoint_type=EntrypointType.MODULE_PATH,
    )


def configured_deployment(
    config: str | None,
    *,
    cron: str,
    name: str = DEFAULT_NAME,
    timezone: str = "UTC",
    record_set: RecordSet = "golden",
    split: Split = "all",
    gate_only: bool = False,
    runner: Runner = "local",
    dask_address: str | None = None,
) -> RunnerDeployment:
    """The deployment that runs a configuration file (None: the default one) from the working folder.

    The configuration and the records are read now as well as at every run, so a
    mistake is an error today rather than a failed run tonight.
    """
    from docpilot.tasks.artifacts import run_tags

    job = build_job(config, record_set=record_set, split=split, gate_only=gate_only, check_corpus=False)
    parameters = {
        "config": str(Path(config).resolve()) if config else None,
        "record_set": record_set,
        "split": split,
        "gate_only": gate_only,
        "runner": runner,
        "dask_address": dask_address,
        "workdir": str(Path.cwd()),
    }
    # Each run tags itself with that night's hash of the golden set; the deployment names it only.
    tags = ["docpilot", "scheduled", *run_tags(job, runner=runner, fingerprint=False)]
    return nightly_deployment(cron=cron, name=name, timezone=timezone, parameters=parameters, tags=tags)


def require_api() -> str:
    """The configured Prefect API's URL; a schedule lives on a server, so there must be one."""
    url = PREFECT_API_URL.value()
    if not url:
        raise OrchestratorError(
            "a schedule is kept by a Prefect server, and none is configured (PREFECT_API_URL is not set)\n"
            "  fix: run `prefect server start` and `export PREFECT_API_URL=http://127.0.0.1:4200/api`"
        )
    return url


def register_deployment(deployment: RunnerDeployment) -> UUID:
    """Apply the deployment (and its schedule) to the Prefect API; returns its id."""
    require_api()
    return deployment.apply()


def serve_deployment(deployment: RunnerDeployment) -> None:
    """Apply the deployment and run its scheduled flow runs in this process until stopped.

    One run at a time: a night that runs long delays the next instead of overlapping it.
    """
    from prefect import serve

    require_api()
    serve(deployment, limit=1)


def _check_schedule(cron: str, timezone: str) -> None:
    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"].removeprefix("Value error, ")
        field = "--timezone" if any("timezone" in str(e["loc"]) for e in exc.errors()) else "--cron"
        value = timezone if field == "--timezone" else cron
        hint = (
            "use an IANA time zone name such as UTC or Europe/Berlin"
            if field == "--timezone"
            else "five fields: minute hour day-of-month month day-of-week, such as '0 2 * * *' for 02:00 daily"
        )
        raise ConfigError(f"{field} {value!r}: {problem}", hint=hint) from None


def _check_parameters(parameters: dict) -> None:
    try:
        size = len(json.dumps(parameters).encode("utf-8"))
    except TypeError as exc:
        raise ConfigError(f"deployment parameters must be plain JSON values: {exc}",
                          hint="pass paths and names, not objects") from None
    if size > MAX_PARAMETER_BYTES:
        raise ConfigError(
            f"deployment parameters take {size} bytes as JSON, over Prefect's {MAX_PARAMETER_BYTES}",
            hint="pass a configuration file path instead of its contents",
        )
