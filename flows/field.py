"""Nightly field runs: yesterday's production log scored as a Prefect deployment on a cron schedule.

``nightly_field`` is the flow a deployment runs. Its parameters are plain: a
configuration path, the log's path with ``{yesterday}`` (or ``{today}``) standing for
the date as ``YYYY-MM-DD``, the mapping under ``logs:`` that reads it, and a working
folder. It reads the configuration and the docs when the run starts and writes the
field report under ``reports_dir``, where ``docpilot field-history`` lists it.
``field_deployment`` builds the deployment with its cron schedule.
"""

from __future__ import annotations

import contextlib
from datetime import date, timedelta
from pathlib import Path

from docpilot.flows.schedule import _check_schedule
from prefect import flow
from prefect.deployments.runner import RunnerDeployment
from prefect.schedules import Cron
from prefect.types.entrypoint import EntrypointType

from docpilot.config.loading import load_config
from docpilot.errors import ConfigError
from docpilot.field.run import save_field_run


def log_of(template: str, today: date) -> Path:
    """The log a run reads: ``template`` with ``{yesterday}`` and ``{today}`` as ISO dates."""
    try:
        return Path(template.format(yesterday=(today - timedelta(days=1)).isoformat(), today=today.isoformat()))
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"log {template!r} names {exc} where only {{yesterday}} and {{today}} are read",
                          hint="write the date as {yesterday}, such as logs/{yesterday}.jsonl") from None


@flow(name="docpilot-field-nightly")
def nightly_field(
    config: str | None = None,
    log: str = "logs/{yesterday}.jsonl",
    mapping: str | None = None,
    workdir: str | None = None,
) -> dict:
    """Score yesterday's log (``log`` with its date filled in) and write its field report; what it found."""
    with contextlib.chdir(workdir) if workdir else contextlib.nullcontext():
        path = log_of(log, date.today())
        report, saved = save_field_run(load_config(config), path, mapping)
    largest = report["gaps"][0] if report["gaps"] else None
    return {"run_id": report["run_id"], "log": str(path), "report": str(Path(workdir or ".", saved)),
            "turns": report["summary"].get("turns"),
            "largest_gap": None if largest is None else {"label": largest["label"], "verdict": largest["verdict"],
                                                         "asks": largest["asks"]}}


def field_deployment(*, cron: str, name: str = "field-nightly", timezone: str = "UTC",
                     parameters: dict | None = None) -> RunnerDeployment:
    """The deployment of ``nightly_field`` on ``cron`` in ``timezone``."""
    _check_schedule(cron, timezone)
    return nightly_field.to_deployment(
        name=name, schedules=[Cron(cron, timezone=timezone)], parameters=parameters or {},
        description="DocPilot's field run: yesterday's production log scored without gold, and its coverage gaps.",
        entrypoint_type=EntrypointType.MODULE_PATH,
    )
