"""A `docpilot serve` of one's own: started on a free loopback port, stopped when done.

An eval in the server runtime that was given no URL measures a server it starts
itself. By default that server is a child process, so its work and the eval's do not
share one interpreter and the times are those a deployment would show; ``in_process``
serves from a thread instead, quicker to start, for tests. The child dies with the
process that started it, even when that one is killed outright (``docpilot.processes``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

from docpilot.api.schema import TOKEN_VARIABLE
from docpilot.config.loading import ENV_PREFIX, SECRET_VARIABLES, public_config
from docpilot.config.model import Config
from docpilot.errors import ConfigError
from docpilot.processes import scratch_folder, start_child, stop_child, wait_until_ready

_READY = re.compile(r"listening on (http://\S+)")


@contextlib.contextmanager
def local_server(
    config: Config,
    *,
    host: str = "127.0.0.1",
    max_concurrency: int = 32,
    in_process: bool = False,
    start_timeout_s: float = 60.0,
) -> Iterator[str]:
    """Serve ``config`` on a free loopback port without auth; yields the base URL, stops the server after.

    The server is a ``docpilot serve`` child process, or with ``in_process`` a thread of
    this one. A child that cannot start raises ConfigError with what it said.
    """
    from docpilot.server.auth import is_loopback

    if not is_loopback(host):
        raise ConfigError(
            f"a local server runs without auth, so only on loopback; got host {host!r}", hint="use 127.0.0.1"
        )
    if in_process:
        from docpilot.assistant.workspace import open_workspace
        from docpilot.models.registry import build_model
        from docpilot.server.app import create_app, serve_in_thread

        workspace = open_workspace(config)
        model = build_model(config.model, corpus=workspace.corpus)
        app = create_app(workspace, model, token=None, max_concurrency=max_concurrency)
        with serve_in_thread(app, host=host) as url:
            yield url
        return
    # Removed here when the block ends, or by the eval's watcher should this process be killed.
    folder = scratch_folder("docpilot-serve-")
    try:
        config_path = Path(folder) / "docpilot.yaml"
        config_path.write_text(yaml.safe_dump(public_config(config), sort_keys=False), encoding="utf-8")
        log_path = Path(folder) / "serve.log"
        command = [
            sys.executable, "-c", "from docpilot.cli import main; main(prog_name='docpilot')",
            "serve", "--host", host, "--port", "0", "--no-auth",
            "--config", str(config_path), "--max-concurrency", str(max_concurrency),
        ]  # fmt: skip
        with log_path.open("wb") as log:
            # It dies with this process, however that ends; its workers die with it in turn.
            process = start_child(command, stdout=log, stderr=subprocess.STDOUT, env=_child_env())
        try:
            yield _wait_ready(process, log_path, start_timeout_s)
        finally:
            stop_child(process)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _child_env() -> dict[str, str]:
    # The config file already holds every option the parent resolved; option variables
    # left in the environment would override it a second time.
    def is_option(name: str) -> bool:
        if not name.startswith(ENV_PREFIX) or name in SECRET_VARIABLES:
            return False
        rest = name[len(ENV_PREFIX):]
        return "__" in rest or rest.lower() in Config.model_fields

    env = {name: value for name, value in os.environ.items() if not is_option(name) and name != TOKEN_VARIABLE}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    return env


def _wait_ready(process: subprocess.Popen, log_path: Path, timeout_s: float) -> str:
    # The child binds port 0 itself (`--port 0`) and prints the address it got.
    def said() -> str:
        return log_path.read_text(encoding="utf-8", errors="replace")

    def failed(state: str) -> ConfigError:
        tail = "\n    ".join(said().strip().splitlines()[-8:]) or "(no output)"
        return ConfigError(
            f"the local server {state}; it said:\n    {tail}",
            hint="run `docpilot serve --no-auth` with the same options to see the problem",
        )

    def listening() -> str | None:
        found = _READY.search(said())
        return found.group(1) if found else None

    return wait_until_ready(
        process, listening, timeout_s=timeout_s, interval_s=0.02,
        exited=lambda status: failed(f"exited with status {status}"),
        timed_out=lambda: failed("did not start in time"),
    )
