"""`docpilot serve`: who it refuses to serve openly, and a real server process end to end."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.errors import ConfigError
from docpilot.server.auth import is_loopback, server_token

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "tests" / "data" / "pipeline" / "docs"
TOKEN = "cli-test-token-0123456789"


@pytest.fixture(autouse=True)
def _workdir(tmp_path, monkeypatch):
    """An empty working directory: no config file is picked up, and the index is saved there."""
    monkeypatch.chdir(tmp_path)


def _serve(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["serve", *args], env=env)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_hosts(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com", "docs.internal"])
def test_reachable_hosts(host):
    assert not is_loopback(host)


def test_no_auth_is_refused_on_a_public_host_with_exit_2():
    result = _serve("--host", "0.0.0.0", "--no-auth", "--docs", str(DOCS))
    assert result.exit_code == 2
    assert "--no-auth is refused on host '0.0.0.0'" in result.stderr and "127.0.0.1" in result.stderr
    assert "Traceback" not in result.output


def test_auth_without_a_token_is_refused_with_how_to_set_it(monkeypatch):
    monkeypatch.delenv("DOCPILOT_SERVER_TOKEN", raising=False)
    result = _serve("--docs", str(DOCS))
    assert result.exit_code == 2
    assert "DOCPILOT_SERVER_TOKEN is not set" in result.stderr and "export DOCPILOT_SERVER_TOKEN=" in result.stderr


def test_the_token_policy():
    assert server_token("127.0.0.1", no_auth=True, env={}) is None
    assert server_token("0.0.0.0", no_auth=False, env={"DOCPILOT_SERVER_TOKEN": f" {TOKEN} "}) == TOKEN
    with pytest.raises(ConfigError):
        server_token("0.0.0.0", no_auth=False, env={"DOCPILOT_SERVER_TOKEN": "  "})


def test_a_port_in_use_is_exit_2():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _serve("--no-auth", "--port", str(port), "--docs", str(DOCS))
    assert result.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in result.stderr


def test_a_missing_docs_folder_is_exit_2(tmp_path):
    result = _serve("--no-auth", "--docs", str(tmp_path / "missing"))
    assert result.exit_code == 2 and "docs folder does not exist" in result.stderr


def test_a_served_process_requires_its_token_and_stops_cleanly(tmp_path):
    env = {**os.environ, "DOCPILOT_SERVER_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "serve.log"
    command = [sys.executable, "-c", "from docpilot.cli import main; main(prog_name='docpilot')",
               "serve", "--port", "0", "--docs", str(DOCS), "--max-concurrency", "5"]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        url = found.group(1)
        assert "bearer token required" in log.read_text() and TOKEN not in log.read_text()
        health = httpx.get(f"{url}/healthz").json()
        assert health["auth"] == "bearer" and health["max_concurrency"] == 5
        question = {"question": "How do I install Acme?", "stream": False}
        assert httpx.post(f"{url}/v1/ask", json=question).status_code == 401
        answered = httpx.post(f"{url}/v1/ask", json=question, headers={"Authorization": f"Bearer {TOKEN}"})
        assert answered.status_code == 200 and answered.json()["citations"]["citations"] == ["index#install"]
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=15)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status says how it ended.
    assert code in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in log.read_text() and "Traceback" not in log.read_text()


def _start(tmp_path, *args: str) -> tuple[subprocess.Popen, str, Path]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "serve.log"
    command = [sys.executable, "-c", "from docpilot.cli import main; main(prog_name='docpilot')",
               "serve", "--port", "0", "--no-auth", "--docs", str(DOCS), *args]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return process, found.group(1), log


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


# Regression: bm25s's tqdm bars started tqdm's monitor thread while the index was built, so
# a server whose index was new saw a thread running and declined to fork its workers.
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process tree from /proc")
def test_workers_answer_together_and_die_with_the_first_process_even_on_kill_9(tmp_path):
    process, url, log = _start(tmp_path, "--workers", "2", "--max-concurrency", "4")
    try:
        assert "over 2 workers" in log.read_text()
        deadline = time.monotonic() + 30
        while len(workers := _children(process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(workers) == 2, log.read_text()  # the first process supervises them
        health = httpx.get(f"{url}/healthz").json()
        assert health["max_concurrency"] == 4
        question = {"question": "How do I install Acme?", "stream": False}
        with httpx.Client() as client:  # new connections: the kernel spreads them over both sockets
            statuses = {client.post(f"{url}/v1/ask", json=question, headers={"Connection": "close"}).status_code
                        for _ in range(20)}  # fmt: skip
        assert statuses == {200}
    finally:
        process.kill()
        process.wait(timeout=15)
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers)


# Regression: a token sent in a query string was written to the access log.
def test_the_access_log_keeps_query_values_out(tmp_path):
    process, url, log = _start(tmp_path, "--access-log", "--workers", "1")
    try:
        assert httpx.get(f"{url}/healthz?token=SECRET-in-query&x=1").status_code == 200
        deadline = time.monotonic() + 10
        while "/healthz" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
    text = log.read_text()
    assert "/healthz?token=" in text and "SECRET-in-query" not in text


# Regression: at the common file limit of 1,024, 1,100 half-open connections stopped the server.
def test_under_a_low_file_limit_the_connection_cap_stays_below_it_and_healthz_answers(tmp_path):
    import resource

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "serve.log"
    command = [sys.executable, "-c", "from docpilot.cli import main; main(prog_name='docpilot')",
               "serve", "--port", "0", "--no-auth", "--docs", str(DOCS), "--workers", "1"]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
                                   preexec_fn=low_limit)  # fmt: skip
    stalled = []
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        url = found.group(1)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        for _ in range(600):  # more than the file limit allows
            sock = socket.create_connection((host, int(port)))
            sock.sendall(b"GET /hea")
            stalled.append(sock)
        assert httpx.get(f"{url}/healthz", headers={"Connection": "close"}, timeout=10).status_code == 200
        assert process.poll() is None
    finally:
        for sock in stalled:
            sock.close()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)


# A missing index is built, with its progress shown, before the workers fork; on a terminal
# the progress is a rich bar, whose refresh thread must be gone by then.
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process tree from /proc")
def test_a_new_index_shows_its_build_on_a_terminal_and_the_workers_still_fork(tmp_path):
    import pty
    import threading

    config = tmp_path / "docpilot.yaml"
    config.write_text("retrieval:\n  retriever: hybrid\n  embedder: static\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "serve.log"
    command = [sys.executable, "-c", "from docpilot.cli import main; main(prog_name='docpilot')",
               "serve", "--port", "0", "--no-auth", "--docs", str(DOCS), "--config", str(config),
               "--workers", "2", "--max-concurrency", "2"]  # fmt: skip
    terminal, stderr = pty.openpty()
    shown = bytearray()
    done = threading.Event()

    def read_terminal() -> None:
        # Stops when told, and the descriptor is closed only after it has: a reader left
        # blocked on a closed descriptor would read from whatever file next reuses its number.
        with contextlib.suppress(OSError):  # EIO once every copy of the other end is closed
            while not done.is_set():
                if select.select([terminal], [], [], 0.05)[0]:
                    if not (chunk := os.read(terminal, 4096)):
                        return
                    shown.extend(chunk)

    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=stderr, env=env, cwd=tmp_path)
    os.close(stderr)
    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, (log.read_text(), bytes(shown))
            time.sleep(0.05)
        deadline = time.monotonic() + 30
        while len(workers := _children(process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(workers) == 2, (log.read_text(), bytes(shown))
        assert httpx.get(f"{found.group(1)}/healthz").status_code == 200
        assert b"embed" in shown and b"Traceback" not in shown
    finally:
        process.kill()
        process.wait(timeout=15)
        done.set()
        reader.join(timeout=5)
        assert not reader.is_alive()
        os.close(terminal)
