"""Prefect tasks: one per stage, each over a shard of records, each a thin call into the core.

Importing this package quiets Prefect before it is first imported: no telemetry, no
INFO chatter, and a temporary server that does not record task runs it would be
stopped in the middle of recording.
"""

import os

for _name, _value in {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_LOGGING_ROOT_LEVEL": "ERROR",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
}.items():
    os.environ.setdefault(_name, _value)
