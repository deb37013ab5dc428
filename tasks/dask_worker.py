"""What each worker process of the cluster DocPilot starts sets up first (a Dask preload).

The cluster closes its workers, then its scheduler, which lives in the eval's process.
A worker whose heartbeat is on its way as the scheduler goes logs the failure at
ERROR, with two tracebacks, after the run has finished and printed its verdict. In a
cluster started for one run, a scheduler that stops answering is that cluster
closing, so the workers do not log it. A cluster given by ``--dask-address`` is its
owner's, and its workers log as they are set to.
"""

from __future__ import annotations

import logging

HEARTBEAT_FAILED = "Failed to communicate with scheduler during heartbeat."
"""What ``distributed.worker`` logs when a heartbeat finds no scheduler."""


def _not_a_failed_heartbeat(record: logging.LogRecord) -> bool:
    return record.msg != HEARTBEAT_FAILED


def dask_setup(worker) -> None:
    """Run by Dask in each worker process before the worker starts."""
    logging.getLogger("distributed.worker").addFilter(_not_a_failed_heartbeat)
