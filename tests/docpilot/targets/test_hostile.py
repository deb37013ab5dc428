"""A target that misbehaves: every fault is one row's, the run goes on, and secrets stay out of everything.

Each case once lost a run or leaked: a reply that never ended ran past ``timeout_s`` for as
long as it sent; a 200 MB reply ended the eval in MemoryError; a 401 echoing the key put it
on the terminal and in every report; NaN or negative ``Server-Timing`` durations made a
report DocPilot's own ``score`` refused; an answer that was a JSON object was scored as its
Python repr.
"""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.config.target import Target
from docpilot.corpus.pages import load_corpus
from docpilot.targets.ask import Endpoint, TargetReplyError, ask_target
from docpilot.targets.sources import SourceResolver
from tests.support.hostile_target import DOCS_URL, serve_hostile

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[2] / "data" / "pipeline" / "docs"
KEY = "hk-3f9a8b7c6d5e4f3a"
QUESTIONS = {
    "q-plain": "How do I log in?",
    "q-forever": "What is forever?",
    "q-huge": "Show me the huge list",
    "q-echo": "Please echo my key",
    "q-timing": "What about timing?",
    "q-object": "Give an object",
    "q-outside": "Anything outside?",
}


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[str, object]]:
    with serve_hostile() as served:
        yield served


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTILE_KEY", KEY)
    monkeypatch.setenv("HOSTILE_BASE", "http://127.0.0.1")


def _target(base: str, route: str = "/ask", **extra: object) -> dict:
    port = base.rsplit(":", 1)[1]
    reply = ({"kind": "sse", "delta_event": "delta", "answer": "t", "sources_event": "sources", "sources": "items",
              "end_event": "end"} if route == "/sse" else {"answer": "answer", "sources": "sources"})
    return {"url": "${HOSTILE_BASE}:" + port + route, "headers": {"api-key": "${HOSTILE_KEY}"},
            "body": {"query": "{question}"}, "reply": reply, "source_ids": {"base_url": DOCS_URL},
            "timeout_s": 1, **extra}


def _config(tmp_path: Path, target: dict, records: dict[str, str]) -> Path:
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump([
        {"id": rid, "question": q, "gold": ["guide/auth#tokens"], "gold_answer": "Export ACME_TOKEN.", "split": "dev"}
        for rid, q in records.items()]))
    path = tmp_path / "docpilot.yaml"
    path.write_text(yaml.safe_dump({
        "corpus": {"docs": str(DOCS)}, "golden": str(golden), "cache_dir": str(tmp_path / "cache"),
        "reports_dir": str(tmp_path / "reports"), "model": {"concurrency": 1}, "targets": {"hostile": target}}))
    return path


def _run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_every_fault_is_its_row_s_and_the_run_writes_a_report_others_read(hostile, tmp_path):
    base, _ = hostile
    config = _config(tmp_path, _target(base), QUESTIONS)
    out = tmp_path / "run.json"
    written = {"html": tmp_path / "run.html", "junit": tmp_path / "run.xml", "markdown": tmp_path / "run.md"}
    began = time.monotonic()
    result = _run("eval", "--orchestrator", "inline", "--config", str(config), "--target", "hostile",
                  "--out", str(out), *[a for kind, path in written.items() for a in (f"--{kind}", str(path))])
    took = time.monotonic() - began
    assert result.exit_code == 1, result.output  # the errors gate fails; the run itself went through
    rows = {r["id"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["q-plain"]["error"] is None and rows["q-plain"]["retrieved"] == ["guide/auth#tokens"]
    assert rows["q-forever"]["error_code"] == "timeout" and 1000 <= rows["q-forever"]["latency_ms"] < 3000
    assert rows["q-huge"]["error_code"] == "reply_too_large"
    assert rows["q-echo"]["error_code"] == "auth" and "[redacted]" in rows["q-echo"]["error"]
    assert rows["q-timing"]["stages_ms"] == {"generate": 12.5} and rows["q-timing"]["stages_dropped"] == 5
    assert rows["q-object"]["error_code"] == "malformed"
    assert "an object at reply.answer 'answer', where text is wanted" in rows["q-object"]["error"]
    assert rows["q-outside"]["outside_docs"] == ["2024/launch#"] and rows["q-outside"]["retrieved"] == [
        "2024/launch#", "guide/deploy"]
    assert took < 20
    for text in [out.read_text(), result.output, *(path.read_text() for path in written.values())]:
        assert KEY not in text
    for command in (["score", str(out)], ["score", str(out), "--json"], ["history", "--reports", str(out.parent)]):
        again = _run(*command)
        assert again.exit_code in (0, 1), again.output
        assert "not a DocPilot report" not in again.output and KEY not in again.output


def test_a_stream_that_never_sends_its_end_is_cut_at_timeout_s_and_the_run_goes_on(hostile, tmp_path):
    base, _ = hostile
    config = _config(tmp_path, _target(base, "/sse"), {"q-plain": "How do I log in?", "q-forever": "forever?"})
    out = tmp_path / "run.json"
    began = time.monotonic()
    result = _run("eval", "--orchestrator", "inline", "--config", str(config), "--target", "hostile",
                  "--out", str(out))
    assert result.exit_code == 1, result.output
    assert time.monotonic() - began < 10
    rows = {r["id"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["q-plain"]["error"] is None
    assert rows["q-forever"]["error_code"] == "timeout" and rows["q-forever"]["answer"] == ""


def test_a_first_reply_echoing_the_key_stops_the_run_without_showing_it(hostile, tmp_path):
    base, served = hostile
    before = served.requests["ask"]
    config = _config(tmp_path, _target(base), {"q-echo": "echo", "q-echo-again": "echo again"})
    result = CliRunner().invoke(main, ["eval", "--orchestrator", "inline", "--config", str(config),
                                       "--target", "hostile"])
    assert result.exit_code == 2 and "HTTP 401" in result.output and "[redacted]" in result.output, result.output
    assert KEY not in result.output
    assert served.requests["ask"] - before <= 1  # model.concurrency: 1
    assert not list((tmp_path / "reports").glob("*.json")) if (tmp_path / "reports").exists() else True


def test_a_first_reply_whose_answer_is_an_object_names_the_path_and_both_types(hostile, tmp_path):
    base, _ = hostile
    config = _config(tmp_path, _target(base), {"q-object": "object", "q-object-again": "an object again"})
    result = CliRunner().invoke(main, ["eval", "--orchestrator", "inline", "--config", str(config),
                                       "--target", "hostile"])
    assert result.exit_code == 2
    assert "has an object at reply.answer 'answer', where text is wanted" in " ".join(result.output.split())


def test_a_reply_past_the_byte_cap_is_never_held_whole(hostile):
    base, _ = hostile
    target = Target.model_validate(json.loads(json.dumps(_target(base)).replace("${HOSTILE_BASE}", "http://127.0.0.1")))
    endpoint = Endpoint.open(target, "hostile", SourceResolver(load_corpus(DOCS)))

    async def ask():
        async with aiohttp.ClientSession() as client:
            return await ask_target(client, endpoint, "huge", None, "q")

    tracemalloc.start()
    try:
        turn = asyncio.run(ask())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert turn.error_code == "reply_too_large"
    assert peak < 3 * target.max_reply_bytes  # 32 MiB read of 200 MB sent


def test_more_sources_than_the_cap_make_an_error_row(hostile):
    base, _ = hostile
    target = Target.model_validate({**_target(base), "url": base + "/ask", "max_sources": 1})

    async def ask():
        async with aiohttp.ClientSession() as client:
            return await ask_target(client, Endpoint.open(target), "outside", None, "q")

    turn = asyncio.run(ask())
    assert turn.error_code == "reply_too_large" and "2 sources, past max_sources = 1" in turn.error


def test_a_url_variable_that_is_not_set_stops_before_any_question(hostile, tmp_path, monkeypatch):
    base, served = hostile
    monkeypatch.delenv("HOSTILE_BASE")
    before = served.requests["ask"]
    config = _config(tmp_path, _target(base), {"q-plain": "How do I log in?"})
    result = CliRunner().invoke(main, ["eval", "--orchestrator", "inline", "--config", str(config),
                                       "--target", "hostile"])
    assert result.exit_code == 2 and "targets.hostile.url reads ${HOSTILE_BASE}, which is not set" in result.output
    assert served.requests["ask"] == before


def test_a_strict_reader_raises_for_a_401_with_the_key_cleared(hostile):
    base, _ = hostile
    target = Target.model_validate({**_target(base), "url": base + "/ask"})

    async def ask():
        async with aiohttp.ClientSession() as client:
            return await ask_target(client, Endpoint.open(target), "echo", None, "q", strict=True)

    with pytest.raises(TargetReplyError) as raised:
        asyncio.run(ask())
    assert KEY not in str(raised.value) and "[redacted]" in str(raised.value)
