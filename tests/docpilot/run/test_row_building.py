"""The rows an eval writes: each section once in `retrieved`, and no first-token time on a refusal.

The server runtime is measured through a relay on 127.0.0.1 in front of a real
`docpilot serve` app: it passes every request on and sends the reply back, with one
change to the ranked list, the top section listed a second time (a second chunk of
it, as a server that folds chunks into sections loosely would send).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from docpilot.assistant.workspace import Workspace, open_workspace
from docpilot.cli import main
from docpilot.config.model import Config
from docpilot.models.registry import build_model
from docpilot.server.app import create_app, serve_in_thread
from tests.support.scratch import scratch_folder

DATA = Path(__file__).resolve().parents[2] / "data" / "pipeline"
CACHE = scratch_folder("docpilot-test-rows-")  # the search index is saved here, out of the checkout


@pytest.fixture(scope="module")
def workspace() -> Workspace:
    config = Config.model_validate({"corpus": {"docs": str(DATA / "docs")}, "cache_dir": CACHE})
    return open_workspace(config, use_cache=False)


def _repeat_top_section(block: str) -> str:
    """One server-sent event; a `retrieval` event comes back with its top hit listed again at rank 2."""
    lines = block.split("\n")
    if lines[0] != "event: retrieval":
        return block
    data = json.loads(lines[1].removeprefix("data: "))
    hits = data["hits"]
    if hits:
        again = dict(hits[0], chunk_id=hits[0]["chunk_id"] + "-again", score=hits[0]["score"] / 2)
        data["hits"] = [hits[0], again, *hits[1:]]
    return f"{lines[0]}\ndata: {json.dumps(data)}"


def _relay(upstream: str) -> Starlette:
    async def health(request: Request) -> Response:
        async with httpx.AsyncClient() as client:
            reply = await client.get(f"{upstream}/healthz")
        return Response(reply.content, status_code=reply.status_code, media_type="application/json")

    async def ask(request: Request) -> Response:
        async with httpx.AsyncClient(timeout=30) as client:
            reply = await client.post(f"{upstream}/v1/ask", content=await request.body(),
                                      headers={"content-type": "application/json"})
        blocks = reply.text.split("\n\n")
        return Response("\n\n".join(_repeat_top_section(b) for b in blocks), status_code=reply.status_code,
                        media_type=reply.headers["content-type"].split(";")[0])

    return Starlette(routes=[Route("/healthz", health), Route("/v1/ask", ask, methods=["POST"])])


@pytest.fixture(scope="module")
def relay(workspace: Workspace) -> Iterator[str]:
    app = create_app(workspace, build_model(workspace.config.model, corpus=workspace.corpus), token=None)
    with serve_in_thread(app) as upstream, serve_in_thread(_relay(upstream)) as base:
        yield base


@pytest.fixture(scope="module")
def server_report(relay: str, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("rows") / "report.json"
    result = CliRunner().invoke(main, [
        "eval", "--docs", str(DATA / "docs"), "--golden", str(DATA / "golden.yaml"), "--orchestrator", "inline",
        "--runtime", "server", "--url", relay, "--out", str(out),
    ])
    assert result.exit_code in (0, 1), result.output  # 1: a gate failed; the rows are what is looked at
    return out, json.loads(out.read_text())


def test_the_relay_really_repeats_a_section(relay):
    reply = httpx.post(f"{relay}/v1/ask", json={"question": "How do I install Acme?"}, timeout=30)
    (retrieval,) = [block for block in reply.text.split("\n\n") if block.startswith("event: retrieval")]
    sections = [hit["section_id"] for hit in json.loads(retrieval.split("data: ", 1)[1])["hits"]]
    assert sections[0] == sections[1]


# Regression: a section the server ranked twice stayed twice in the row's `retrieved`, and context
# precision counted it twice (recall and nDCG once).
def test_rows_of_a_server_eval_hold_each_section_once_at_its_first_rank(server_report, workspace):
    _, report = server_report
    top_k = workspace.config.retrieval.top_k
    assert report["rows"]
    for row in report["rows"]:
        expected = workspace.retriever.search(row["question"], scope=row["scope"], k=top_k)
        assert row["retrieved"] == [hit.section_id for hit in expected], row["id"]
        assert row["scores"] == [hit.score for hit in expected], row["id"]  # the first rank's score, aligned


# Regression: a refused row carried a first-token time, though a refusal paints no answer text.
def test_refused_rows_of_a_server_eval_have_no_first_token_time(server_report):
    _, report = server_report
    refused = [row for row in report["rows"] if row["refused"]]
    answered = [row for row in report["rows"] if row["answer"] and not row["refused"] and not row["error"]]
    assert refused and answered
    assert all(row["first_token_ms"] is None for row in refused)
    assert all(0 < row["first_token_ms"] <= row["latency_ms"] for row in answered)
    assert report["counts"]["first_token_p50"] == len(answered)


def test_a_server_eval_report_scores_again_to_the_same_numbers(server_report):
    path, report = server_report
    result = CliRunner().invoke(main, ["score", str(path), "--json"])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["summary"] == report["summary"]
