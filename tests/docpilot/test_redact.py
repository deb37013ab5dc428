"""Secrets out of every stored or shown text, and only secrets: ids, paths and digests stay as written."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.errors import ModelError
from docpilot.models.wire import excerpt
from docpilot.redact import MARK, redact, redact_config, redact_url
from docpilot.retrieval.embedders import OpenAIEmbedder
from tests.conftest import DATA
from tests.support.openai_server import Reply


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
        "Incorrect API key provided: sk-proj-********************abcd",  # a key the service shows masked
        "x-api-key: plainvalue",
        "OPENAI_API_KEY=abcdef123456 is not valid",
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


SHA256 = hashlib.sha256(b"docs").hexdigest()
SHA1 = hashlib.sha1(b"docs").hexdigest()  # noqa: S324 - the shape of a digest, not a use of one


# Regression: the shape patterns took page names, docs paths, section ids and hex
# fingerprints for keys: `api-reference`, `tok_examples` and any 40- or 64-hex digest.
@pytest.mark.parametrize("text", [
    "api-reference", "key-concepts", "docs/tok_examples", "guide/api-reference#auth", "guide/api-v2-migration#step-1",
    f"corpus {SHA256} is not the served one", f"commit {SHA1}", f"record 'q1': {SHA256[:12]} index",
    "max_tokens=512 was reached", "Token budget exhausted", "Basic authentication failed",
    "gold entry guide/auth: no such section", "run 20260101T000000Z-7aa9cb", "ReadTheDocsConfigurationV2Example",
    "uuid 123e4567-e89b-12d3-a456-426614174000", "Install-Guide-For-Version-2-and-Above-On-Linux",
])
def test_ids_paths_and_digests_are_not_key_shaped(text):
    assert redact(text) == text


def test_the_config_loses_url_credentials_query_values_and_secret_fields_only():
    data = {"model": {"base_url": "http://u:p@h/v1?k=v", "name": "m"},
            "retrieval": {"reference_pages": ["api-reference", "key-concepts"], "index_dir": f"idx/{SHA256}"},
            "corpus": {"docs": "docs/tok_examples"}, "server": {"token": "s3cret"}, "n": 3}
    assert redact_config(data) == {
        "model": {"base_url": f"http://{MARK}@h/v1?k={MARK}", "name": "m"},
        "retrieval": {"reference_pages": ["api-reference", "key-concepts"], "index_dir": f"idx/{SHA256}"},
        "corpus": {"docs": "docs/tok_examples"}, "server": {"token": MARK}, "n": 3,
    }
    # For a fingerprint, the query values stay (they may be settings) and the credentials go.
    assert redact_config(data, queries=False)["model"]["base_url"] == f"http://{MARK}@h/v1?k=v"


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


def _eval(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["eval", "--orchestrator", "inline", *args], env=env)


# Regression: a stored report's config read `reference_pages: ['[redacted]', '[redacted]']`
# and `docs/[redacted]` for a docs folder named tok_examples, and a digest in a path was cut out.
def test_a_stored_report_keeps_page_names_paths_and_digests(tmp_path):
    docs = tmp_path / "docs" / "tok_examples"
    docs.mkdir(parents=True)
    for page in (DATA / "pipeline" / "docs").rglob("*.md"):
        target = docs / page.relative_to(DATA / "pipeline" / "docs")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(page.read_bytes())
    index_dir = tmp_path / "index" / SHA256
    config = tmp_path / "docpilot.yaml"
    config.write_text("retrieval:\n  reference_pages: [api-reference, key-concepts]\n"
                      f"  index_dir: {index_dir}\ncorpus:\n  docs: {docs}\n", encoding="utf-8")
    out = tmp_path / "r.json"
    result = _eval("--config", str(config), "--golden", str(DATA / "pipeline" / "golden.yaml"), "--gate-only",
                   "--out", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["config"]["retrieval"]["reference_pages"] == ["api-reference", "key-concepts"]
    assert report["config"]["retrieval"]["index_dir"] == str(index_dir)
    assert report["config"]["corpus"]["docs"] == str(docs)
    assert "guide/auth#tokens" in {section for row in report["rows"] for section in row["retrieved"]}
    assert MARK not in out.read_text(encoding="utf-8")


# Regression: an error quoting a page id or a fingerprint was stored as `guide/[redacted]#…`
# and `[redacted]`; the configured key it also quotes must still go, whatever its shape.
@pytest.mark.slow
def test_a_row_error_keeps_ids_and_digests_and_loses_the_configured_key(tmp_path, openai_server):
    key = "open-sesame-plain-words"  # no key shape: only its being the configured key gives it away
    failing = Reply(error_after=1, error_message=f"generation failed near guide/api-reference#auth "
                                                 f"(corpus {SHA256}) for key {key}")
    base_url, script = openai_server
    script.by_content["install Acme"] = failing
    out = tmp_path / "r.json"
    result = _eval("--docs", str(DATA / "pipeline" / "docs"), "--golden", str(DATA / "pipeline" / "golden.yaml"),
                   "--provider", "openai", "--base-url", base_url, "--no-cache", "--allow-errors",
                   "--out", str(out), env={"DOCPILOT_API_KEY": key})
    assert result.exit_code in (0, 1), result.output
    assert key not in result.output
    stored = out.read_text(encoding="utf-8")
    (error,) = [row["error"] for row in json.loads(stored)["rows"] if row["error"]]
    assert "guide/api-reference#auth" in error and SHA256 in error and f"key {MARK}" in error
    assert key not in stored
