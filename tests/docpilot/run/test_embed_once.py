"""A run embeds each question once, however its first shards were ranked ahead of the rest.

`docpilot eval` runs against a real OpenAI-compatible embeddings endpoint on 127.0.0.1
that counts every text it is sent: a paid embedder bills each one.
"""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from docpilot.cli import main
from tests.conftest import DATA
from tests.support.embeddings_server import EmbeddingsLog, serve_embeddings

PIPELINE = DATA / "pipeline"
QUESTIONS = [record["question"] for record in yaml.safe_load((PIPELINE / "golden.yaml").read_text(encoding="utf-8"))]


@pytest.fixture()
def embeddings():
    log = EmbeddingsLog()
    with serve_embeddings(log) as base_url:
        log.base_url = base_url
        yield log


def _eval(tmp_path, base_url: str, *flags: str) -> dict:
    config = tmp_path / "docpilot.yaml"
    config.write_text(yaml.safe_dump({
        "corpus": {"docs": str(PIPELINE / "docs")},
        "golden": str(PIPELINE / "golden.yaml"),
        "retrieval": {"retriever": "hybrid", "embedder": "openai", "embedding_base_url": base_url,
                      "embedding_model": "embed-test", "embedding_dim": 8},
    }), encoding="utf-8")
    out = tmp_path / f"report{len(list(tmp_path.glob('report*.json')))}.json"
    result = CliRunner().invoke(main, ["eval", "--config", str(config), "--orchestrator", "inline",
                                       "--out", str(out), "--json", *flags], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output  # 1: a gate failed, the run still finished
    return json.loads(out.read_text(encoding="utf-8"))


def _question_embeddings(log: EmbeddingsLog) -> dict[str, int]:
    """How often each golden question was sent to be embedded, since the log was last cleared."""
    sent = log.inputs()
    log.bodies.clear()
    return {question: sent[question] for question in QUESTIONS}


def _once_each(tmp_path, log: EmbeddingsLog) -> dict[str, int]:
    """What ranking each question once costs: a gate-only run (no lead), without the cache.

    Hybrid with score fusion embeds a question only when it shares a word with the docs,
    so a negative may cost nothing at all.
    """
    _eval(tmp_path, log.base_url, "--gate-only", "--no-cache")
    once = _question_embeddings(log)
    assert set(once.values()) == {0, 1} and once[QUESTIONS[0]] == 1
    return once


# Regression: a full dense or hybrid eval embedded each of its first shards' questions twice (ranked ahead, then again)
def test_a_full_hybrid_eval_embeds_each_question_once(tmp_path, embeddings):
    once = _once_each(tmp_path, embeddings)
    report = _eval(tmp_path, embeddings.base_url)
    assert [row["id"] for row in report["rows"]] == ["install", "token-env", "rollback", "rotate", "neg-pricing",
                                                     "neg-kubernetes"]
    assert all(row["retrieved"] and row["answer"] for row in report["rows"] if row["kind"] == "positive")
    assert not any(row["cached"] for row in report["rows"])
    assert _question_embeddings(embeddings) == once
    again = _eval(tmp_path, embeddings.base_url)  # every ranking stored: no question is embedded
    assert all("retrieve" in row["cached"] for row in again["rows"])
    assert _question_embeddings(embeddings) == dict.fromkeys(QUESTIONS, 0)


def test_an_eval_without_the_cache_embeds_each_question_once_too(tmp_path, embeddings):
    once = _once_each(tmp_path, embeddings)
    report = _eval(tmp_path, embeddings.base_url, "--no-cache")
    assert len(report["rows"]) == len(QUESTIONS)
    assert _question_embeddings(embeddings) == once
