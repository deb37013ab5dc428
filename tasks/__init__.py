"""Prefect tasks: a shard of records down the road per task run, and the artifacts a run leaves.

``quiet_prefect`` is called before Prefect is first imported (by the planner, when it
chooses Prefect, and by the commands that schedule runs): no telemetry, no INFO
chatter, and a temporary server that does not record task runs it would be stopped in
the middle of recording. Importing this package changes nothing.
"""

import os

QUIET = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_LOGGING_ROOT_LEVEL": "ERROR",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    # Read when distributed is first imported, in this process and in the worker
    # processes it starts: without it, closing a cluster logs a page of worker shutdowns.
    "DASK_LOGGING__DISTRIBUTED": "error",
}
"""Prefect's and Dask's settings for a run, where the user set none."""


def quiet_prefect() -> None:
    """Set ``QUIET`` in this process's environment, each where the user set no value of their own."""
    for name, value in QUIET.items():
        os.environ.setdefault(name, value)
