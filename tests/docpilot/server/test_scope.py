"""A request's scope over a real server on 127.0.0.1: read by the retriever's and the metrics' one rule."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from docpilot.metrics.citations import scope_violations

from docpilot.assistant.workspace import Workspace, open_workspace
from docpilot.config.model import Config
from docpilot.golden.loading import load_golden, validate_against_corpus
from docpilot.models.registry import build_model
from docpilot.schema import Row
from docpilot.server.app import create_app, serve_in_thread
from tests.support.scratch import scratch_folder

DATA = Path(__file__).resolve().parents[2] / "data" / "pipeline"
CACHE = scratch_folder("docpilot-test-scope-")  # the search index is saved here, out of the checkout


@pytest.fixture(scope="module")
def workspace() -> Workspace:
    config = Config.model_validate({"corpus": {"docs": str(DATA / "docs")}, "cache_dir": CACHE})
    return open_workspace(config, use_cache=False)


@pytest.fixture(scope="module")
def url(workspace: Workspace) -> Iterator[str]:
    app = create_app(workspace, build_model(workspace.config.model, corpus=workspace.corpus), token=None)
    with serve_in_thread(app) as base:
        yield base


def _answer(url: str, question: str, scope: list[str] | None) -> dict:
    body = {"question": question, "stream": False, **({} if scope is None else {"scope": scope})}
    response = httpx.post(f"{url}/v1/ask", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


# Regression: the server accepted scope ["/"] and its retriever then allowed no page, while the
# scope-violation count read it as every page and the golden-set check refused it.
def test_a_root_scope_is_the_whole_docs_for_the_server_the_retriever_and_the_metric(url, workspace):
    records = [r.model_copy(update={"scope": ["/"]}) for r in load_golden(DATA / "golden.yaml")]
    assert validate_against_corpus(records, workspace.corpus) is None
    for record in records:
        scoped = _answer(url, record.question, ["/"])
        whole = _answer(url, record.question, None)
        hits = [(h["section_id"], h["score"]) for h in scoped["retrieval"]["hits"]]
        assert hits == [(h["section_id"], h["score"]) for h in whole["retrieval"]["hits"]], record.id
        local = workspace.retriever.search(record.question, scope=["/"], k=workspace.config.retrieval.top_k)
        assert hits == [(h.section_id, h.score) for h in local], record.id
        assert scoped["answer"] == whole["answer"] and scoped["refusal"] == whole["refusal"], record.id
        cited = scoped["citations"]["citations"] if scoped["citations"] else []
        row = Row(id=record.id, kind=record.kind, split=record.split, question=record.question,
                  gold=record.gold, scope=["/"], retrieved=[section for section, _ in hits], citations=cited)
        assert scope_violations(row) == 0, record.id
    assert any(_answer(url, r.question, ["/"])["retrieval"]["hits"] for r in records)


def test_a_scope_still_keeps_other_pages_out(url):
    result = _answer(url, "How do I install Acme?", ["/guide/"])
    sections = [h["section_id"] for h in result["retrieval"]["hits"]]
    assert sections and all(s.startswith("guide/") for s in sections)


@pytest.mark.parametrize("entry", ["   ", "guide#auth"])
def test_a_scope_entry_that_is_no_page_prefix_is_422(url, entry):
    response = httpx.post(f"{url}/v1/ask", json={"question": "ok", "scope": [entry]})
    assert response.status_code == 422
    assert "is not a page-id prefix" in response.json()["error"]["message"]
