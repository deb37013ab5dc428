"""`docpilot schedule`: the eval as a Prefect deployment on a cron schedule."""

from __future__ import annotations

import json

import click

from docpilot.cli import main
from docpilot.cli._errors import handle_errors


@main.command("schedule")
@click.option("--cron", required=True, help="When to run, as a cron expression such as '0 2 * * *' (02:00 daily).")
@click.option("--name", default="nightly", show_default=True, help="Deployment name.")
@click.option("--timezone", default="UTC", show_default=True, help="IANA time zone the cron expression is read in.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True),
              help="Configuration file (YAML); read again at the start of every run.")
@click.option(
    "--set", "record_set", type=click.Choice(["golden", "adversarial"]), default="golden", show_default=True,
    help="Run the golden set, or the attack probes (adversarial).",
)
@click.option("--split", type=click.Choice(["dev", "test", "all"]), default="all", show_default=True)
@click.option("--gate-only", is_flag=True, help="Retrieval only: call no model, report retrieval metrics.")
@click.option("--runner", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="dask: run each night's shards on a Dask cluster.")
@click.option("--dask-address", help="Dask scheduler for --runner dask; without it a local cluster is started.")
@click.option("--register-only", is_flag=True,
              help="Register the deployment and its schedule, then exit (for CI, or to check them); "
                   "runs start only while `docpilot schedule` serves the deployment.")
@click.option("--json", "as_json", is_flag=True, help="With --register-only: print the deployment as JSON.")
@handle_errors
def schedule_command(
    cron, name, timezone, config_path, record_set, split, gate_only, runner, dask_address, register_only, as_json,
):
    """Run the eval on a cron schedule, as a Prefect deployment served by this process.

    Needs a Prefect server (PREFECT_API_URL). Without --register-only the command
    keeps running and starts each scheduled run; stop it with Ctrl-C.
    """
    from docpilot.extras import require_extra

    if dask_address and runner != "dask":
        raise click.UsageError("--dask-address names the scheduler of --runner dask; add --runner dask")
    # Checked before flows.schedule is imported: without Prefect that import is a traceback.
    require_extra("prefect", "docpilot schedule (a Prefect deployment)")
    if runner == "dask":
        require_extra("dask", "docpilot schedule --runner dask")
    from docpilot.tasks import quiet_prefect

    quiet_prefect()  # before Prefect is first imported
    from docpilot.flows.schedule import (
        configured_deployment,
        register_deployment,
        require_api,
        serve_deployment,
    )

    require_api()
    deployment = configured_deployment(
        config_path, cron=cron, name=name, timezone=timezone, record_set=record_set, split=split,
        gate_only=gate_only, runner=runner, dask_address=dask_address,
    )
    if not register_only:
        serve_deployment(deployment)
        return
    deployment_id = register_deployment(deployment)
    described = {"id": str(deployment_id), "name": f"docpilot-nightly/{name}", "cron": cron, "timezone": timezone,
                 "parameters": deployment.parameters, "tags": deployment.tags}
    if as_json:
        click.echo(json.dumps(described, indent=2))
    else:
        click.echo(f"registered docpilot-nightly/{name} ({deployment_id}): '{cron}' in {timezone}")
        click.echo(f"run it now: prefect deployment run 'docpilot-nightly/{name}'")
