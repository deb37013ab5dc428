"""Secrets out of every stored or shown text: configured keys, key shapes, URL credentials and query values."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.config.redact import MARK, redact, redact_data, redact_url
from docpilot.errors import ModelError
from docpilot.models.wire import excerpt
from docpilot.retrieval.embedders import OpenAIEmbedder
from tests.conftest import DATA


def test_url_credentials_and_query_values_go_names_stay():
    url = "http://admin:pw@host.example/v1?api-key=K3Y&version=2"
    assert redact_url(url) == f"http://{MARK}@host.example/v1?api-key={MARK}&version={MARK}"
    text = redact(f"cannot reach {url}: refused")
    assert "admin" not in text and "pw@" not in text and "K3Y" not in text and "host.example/v1" in text


@pytest.mark.parametrize(
    "text",
    [
        "HTTP 401: Incorrect API key provided: sk-proj-abcdef123456",
        "Authorization: Bearer abc.def-123456",
        '{"api_key": "hunter2-but-longer"}',
        "token=plainvalue&other=1",
        "key VVetiLB3B5qscvnwZ1syQ7dUxAIhHDNs65SMbtg32qw rejected",  # the shape of secrets.token_urlsafe(32)
        "key 043ae649f09feda4fd1c2e45784cda2fa29c1529afb7e2f9 rejected",  # the shape of secrets.token_hex(24)
        "ghp_abcdefghijklmnop1234 is revoked",
    ],
)
def test_key_shaped_strings_are_redacted(text):
    redacted = redact(text)
    assert MARK in redacted
    for secret in ("abcdef123456", "abc.def-123456", "hunter2", "plainvalue", "abcdefghijklmnop1234"):
        assert secret not in redacted


# Regression: redaction ran after the cut to 200 characters, so a configured key that
# was not sk-shaped, or a padded one, leaked its first characters.
def test_the_configured_key_is_redacted_before_the_cut(monkeypatch):
    key = "tok-SECRET-" + "z" * 40
    monkeypatch.setenv("DOCPILOT_API_KEY", f"  {key}  ")
    reply = "x" * 180 + f" provided: {key}"  # the cut at 200 falls inside the key
    assert "tok-SECR" not in excerpt(reply) and "SECRET" not in redact(reply)


def test_ordinary_text_is_left_alone():
    text = "recall@8 fell to 0.41 on guide/install#pip with model gpt-4o-mini and Meta-Llama-3-8B-Instruct"
    assert redact(text) == text


def test_data_is_redacted_throughout():
    data = {"model": {"base_url": "http://u:p@h/v1?k=v", "name": "m"}, "list": ["sk-abcdefghij"], "n": 3}
    assert redact_data(data) == {
        "model": {"base_url": f"http://{MARK}@h/v1?k={MARK}", "name": "m"}, "list": [MARK], "n": 3,
    }


class _Echo(BaseHTTPRequestHandler):
    """An embeddings service that refuses the key and quotes it back, as some do."""

    def do_POST(self):  # noqa: N802 - the http.server name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"error": f"invalid key {self.headers.get('authorization', '')}"}).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


# Regression: the embedder's errors were not redacted at all.
def test_an_embedder_error_carries_no_key():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://user:pass@127.0.0.1:{server.server_port}/v1"
        embedder = OpenAIEmbedder(model="e", base_url=base, api_key="sk-test-SECRET12", retries=0)
        with pytest.raises(ModelError) as caught:
            embedder.embed(["hello"])
    finally:
        server.shutdown()
    message = str(caught.value)
    assert "HTTP 401" in message and "SECRET12" not in message and "pass@" not in message


# Regression: credentials in base_url were written verbatim into the report's config.
def test_a_report_stores_no_url_credentials(tmp_path):
    out = tmp_path / "r.json"
    pipeline = DATA / "pipeline"
    result = CliRunner().invoke(main, [
        "eval", "--docs", str(pipeline / "docs"), "--golden", str(pipeline / "golden.yaml"), "--orchestrator",
        "inline", "--gate-only", "--out", str(out), "--base-url", "http://admin:pw@127.0.0.1:9/v1?api-key=QQSECRET",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    stored = out.read_text()
    assert "QQSECRET" not in stored and "admin:pw" not in stored and "127.0.0.1:9/v1" in stored


def test_an_error_on_the_command_line_shows_no_url_credentials(tmp_path):
    pipeline = DATA / "pipeline"
    result = CliRunner().invoke(main, [
        "eval", "--docs", str(pipeline / "docs"), "--golden", str(pipeline / "golden.yaml"), "--orchestrator",
        "inline", "--runtime", "server", "--url", "http://admin:PWSECRET@127.0.0.1:9",
        "--out", str(tmp_path / "r.json"),
    ])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "PWSECRET" not in result.output and "127.0.0.1:9" in result.stderr
