"""Start the local cluster a run starts, and have each worker send a heartbeat to an address
where no scheduler listens, as a heartbeat does when the cluster's scheduler has just
closed. Whatever the workers log goes to this process's standard error.

    python -m tests.support.heartbeat_to_nowhere [--without-preload]
"""

from __future__ import annotations

import socket
import sys


async def heartbeat_to_nowhere(dask_worker, address: str) -> None:
    """Run on a worker: its real heartbeat, sent to ``address``, then its scheduler back."""
    import dask

    scheduler = dask_worker.scheduler
    dask_worker.scheduler = dask_worker.rpc(address)
    try:
        with dask.config.set({"distributed.comm.timeouts.connect": "0.5s"}):
            await dask_worker.heartbeat()
    finally:
        dask_worker.scheduler = scheduler


def main(argv: list[str]) -> None:
    from distributed import Client, LocalCluster
    from docpilot.flows.dask import local_cluster_options

    options = local_cluster_options()
    if "--without-preload" in argv:
        del options["preload"]
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        nowhere = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    with LocalCluster(**options) as cluster, Client(cluster) as client:
        client.run(heartbeat_to_nowhere, address=nowhere)


if __name__ == "__main__":
    main(sys.argv[1:])
