"""The eval's token check against real servers: a `docpilot serve` process and the eval's command line."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from docpilot.api.token import check_token
from docpilot.cli import main
from docpilot.errors import ConfigError
from docpilot.server.app import create_app, serve_in_thread
from tests.docpilot.run.test_remote import DATA, TOKEN, HeldModel, _workspace

ROOT = DATA.parents[2]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from docpilot.cli import main; main(prog_name='docpilot')", *args]


@pytest.fixture(scope="module")
def served_with_token(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """A real `docpilot serve` that requires TOKEN and logs each request; yields its URL and its log."""
    tmp_path = tmp_path_factory.mktemp("served")
    env = {**os.environ, "DOCPILOT_SERVER_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "serve.log"
    command = _cli("serve", "--port", "0", "--docs", str(DATA / "docs"), "--workers", "1", "--access-log")
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield found.group(1), log
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)


def _asks(log: Path) -> list[str]:
    """The access log's lines for `POST /v1/ask`: every request the server took there."""
    return [line for line in log.read_text().splitlines() if '"POST /v1/ask' in line]


def _asks_after(log: Path, before: int, timeout_s: float = 10.0) -> list[str]:
    """The access lines after the first ``before``, once there is one: a line is written as its reply leaves."""
    deadline = time.monotonic() + timeout_s
    while len(asks := _asks(log)) <= before and time.monotonic() < deadline:
        time.sleep(0.02)
    return asks[before:]


# Regression: with no token or a wrong one, every question ran into a 401 and the run
# stored a report of errored rows (recall@8 0.000); the hint's "Bearer" was redacted.
@pytest.mark.parametrize(
    ("token", "says"),
    [(None, "DOCPILOT_SERVER_TOKEN is not set"), ("not-the-servers-token", "refused the token in DOCPILOT_SERVER_TOKEN")],
)
def test_eval_against_a_server_that_refuses_its_token_exits_2_before_any_question(
    served_with_token, tmp_path, monkeypatch, token, says
):
    url, log = served_with_token
    monkeypatch.delenv("DOCPILOT_SERVER_TOKEN", raising=False)
    if token is not None:
        monkeypatch.setenv("DOCPILOT_SERVER_TOKEN", token)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "report.json"
    before = len(_asks(log))
    result = CliRunner().invoke(main, ["eval", "--runtime", "server", "--url", url, "--docs", str(DATA / "docs"),
                                       "--golden", str(DATA / "golden.yaml"), "--out", str(out)])  # fmt: skip
    asks = _asks_after(log, before)
    assert result.exit_code == 2, result.output
    assert says in result.stderr and "Traceback" not in result.stderr
    # The fix as printed, whole: how to set the token and the header it travels in.
    assert "export DOCPILOT_SERVER_TOKEN='<token>'" in result.stderr
    assert "`Authorization: Bearer <token>`" in result.stderr
    assert len(asks) == 1 and '" 401' in asks[0]  # the one check; no question was sent
    assert not out.exists()


def test_the_token_check_asks_no_question_and_passes_the_right_token():
    model = HeldModel()  # would hold any question it was asked
    with serve_in_thread(create_app(_workspace(), model, token=TOKEN)) as base:
        check_token(base, TOKEN)
        with pytest.raises(ConfigError, match="refused the token") as refused:
            check_token(base, "wrong")
        with pytest.raises(ConfigError, match="is not set"):
            check_token(base, "")
        assert httpx.get(f"{base}/healthz").json()["in_flight"] == 0
    assert "wrong" not in str(refused.value)


def test_the_token_check_passes_a_server_without_auth_and_names_one_that_is_down():
    with serve_in_thread(create_app(_workspace(), HeldModel(), token=None)) as base:
        check_token(base, None)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ConfigError, match="cannot reach the server"):
        check_token(f"http://127.0.0.1:{port}")
