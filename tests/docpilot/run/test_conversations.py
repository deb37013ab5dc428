"""Conversations down the road: each turn asked after the ones before it, whoever answers, and cached by the
conversation up to it.

A counting model endpoint (``tests.support.openai_server``) shows what a follow-up carried and
how many turns a re-run asks; a real ``docpilot serve`` and a recording assistant on 127.0.0.1
(``tests.support.recording_assistant``) show what reaches the server runtime and a target.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from docpilot.config.model import Config
from docpilot.run.evaluation import evaluate
from docpilot.run.job import EvalJob
from docpilot.schema import Report
from tests.support.openai_server import OpenAIScript, Reply, serve_openai
from tests.support.pipeline_jobs import PIPELINE
from tests.support.recording_assistant import Recorder, serve_recorder

CONVERSATIONS = [
    {"id": "install", "question": "How do I install Acme?", "gold": ["index#install"], "split": "dev"},
    {"id": "tokens", "split": "dev", "turns": [
        {"question": "Which environment variable holds the API token?", "gold": ["guide/auth#tokens"]},
        {"question": "And how often should I rotate it?", "gold": ["guide/auth#rotating-tokens"]},
        {"question": "What happens when it expires?", "gold": ["guide/auth"]},
    ]},
    {"id": "deploys", "split": "dev", "turns": [
        {"question": "How can I roll back to the previous release?", "gold": ["guide/deploy"],
         "answer_given": "Run acme rollback."},
        {"question": "Does that keep the old config?", "gold": ["guide/deploy"]},
    ]},
]
TURNS = 1 + 3 + 2


def _job(tmp_path: Path, records: list[dict] = CONVERSATIONS, **config) -> EvalJob:
    tmp_path.mkdir(parents=True, exist_ok=True)
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump(records, sort_keys=False))
    settings = Config(corpus={"docs": str(PIPELINE / "docs")}, golden=str(golden), cache_dir=str(tmp_path / "cache"),
                      reports_dir=str(tmp_path / "reports"), shard_size=2, **config)
    return EvalJob(config=settings, golden=str(golden))


def _hosted(tmp_path: Path, base_url: str, records: list[dict] = CONVERSATIONS) -> EvalJob:
    return _job(tmp_path, records, model={"provider": "openai", "name": "scripted", "base_url": base_url,
                                          "concurrency": 4, "retries": 0})


def _turns(script: OpenAIScript) -> list[list[dict]]:
    return [request.body["messages"] for request in script.history]


def test_every_turn_is_a_row_and_a_follow_up_carries_the_turns_before_it(tmp_path):
    script = OpenAIScript(default=Reply(answer="Use the docs [1]."))
    with serve_openai(script) as base_url:
        report = evaluate(_hosted(tmp_path, base_url))
    rows = {row.id: row for row in report.rows}
    assert list(rows) == ["install", "tokens/1", "tokens/2", "tokens/3", "deploys/1", "deploys/2"]
    assert (rows["tokens/2"].conversation, rows["tokens/2"].turn) == ("tokens", 2)
    assert rows["install"].conversation is rows["install"].turn is None
    # A follow-up is searched with what the conversation was about; a first turn as asked.
    assert rows["tokens/1"].retrieval_query is None
    assert rows["tokens/2"].retrieval_query.startswith("And how often should I rotate it?")
    assert "token" in rows["tokens/2"].retrieval_query.removeprefix("And how often should I rotate it?").lower()
    # The prompt of turn 3 holds turns 1 and 2 and the assistant's own answers to them.
    third = next(m for m in _turns(script) if m[-1]["content"].endswith("What happens when it expires?")
                 or "What happens when it expires?" in m[-1]["content"])
    said = [(m["role"], m["content"]) for m in third[:-1] if m["role"] in ("user", "assistant")][-4:]
    assert said == [("user", "Which environment variable holds the API token?"), ("assistant", "Use the docs [1]."),
                    ("user", "And how often should I rotate it?"), ("assistant", "Use the docs [1].")]
    # A turn with answer_given is carried forward with that reply, not the assistant's.
    follow = next(m for m in _turns(script) if "Does that keep the old config?" in m[-1]["content"])
    assert ("assistant", "Run acme rollback.") in [(m["role"], m["content"]) for m in follow]


def test_a_turn_is_cached_by_the_conversation_up_to_it(tmp_path):
    script = OpenAIScript(default=Reply(answer="Use the docs [1]."))
    with serve_openai(script) as base_url:
        evaluate(_hosted(tmp_path, base_url))
        assert len(script.history) == TURNS
        evaluate(_hosted(tmp_path, base_url))
        assert len(script.history) == TURNS  # an unchanged set asks nothing

        edited = [dict(r) for r in CONVERSATIONS]
        edited[1] = {**CONVERSATIONS[1], "turns": [dict(t) for t in CONVERSATIONS[1]["turns"]]}
        edited[1]["turns"][2]["question"] = "What happens when the token expires?"
        evaluate(_hosted(tmp_path, base_url, edited))
        assert len(script.history) == TURNS + 1  # only the edited last turn

        edited[1]["turns"][0]["question"] = "Which variable holds the API token?"
        report = evaluate(_hosted(tmp_path, base_url, edited))
        assert len(script.history) == TURNS + 1 + 3  # turns 1..3 of that conversation, no other
    asked = {row.id for row in report.rows if "model" not in row.cached}
    assert asked == {"tokens/1", "tokens/2", "tokens/3"}


def test_gate_only_ranks_follow_ups_with_the_conversation_read(tmp_path):
    report = evaluate(_job(tmp_path).model_copy(update={"gate_only": True}))
    rows = {row.id: row for row in report.rows}
    assert rows["tokens/2"].retrieval_query is not None and rows["tokens/1"].retrieval_query is None
    assert rows["tokens/2"].turn == 2


@pytest.mark.slow
def test_the_server_runtime_sends_the_history_and_reads_the_servers_query(tmp_path):
    local = evaluate(_job(tmp_path / "local"))
    served = evaluate(_job(tmp_path / "served").model_copy(update={"runtime": "server"}))
    assert [r.id for r in served.rows] == [r.id for r in local.rows]
    for mine, theirs in zip(local.rows, served.rows, strict=True):
        assert (theirs.conversation, theirs.turn) == (mine.conversation, mine.turn)
        assert theirs.retrieval_query == mine.retrieval_query  # the server read the turns as the eval does
        assert theirs.retrieved == mine.retrieved


def _target_job(tmp_path: Path, base: str, **fields) -> EvalJob:
    target = {"url": f"{base}/chat", "reply": {"answer": "answer", "sources": "sources"},
              "source_ids": {"base_url": "https://docs.acme.test/", "suffixes": [".html"]}, **fields}
    job = _job(tmp_path, targets={"rec": target}, target="rec")
    return job.model_copy(update={"runtime": "server", "url": target["url"]})


def _by_question(recorder: Recorder) -> dict[str, dict]:
    return {request.body["question"]: request.body for request in recorder.requests}


@pytest.mark.slow
def test_a_target_in_history_mode_is_sent_the_turns_before_each_follow_up(tmp_path):
    recorder = Recorder()
    with serve_recorder(recorder) as base:
        report = _ran(evaluate(_target_job(tmp_path, base, body={"question": "{question}",
                                                                 "history": "{history}"})))
    sent = _by_question(recorder)
    assert sent["How do I install Acme?"]["history"] == []
    third = sent["What happens when it expires?"]["history"]
    assert [m["content"] for m in third if m["role"] == "user"] == [
        "Which environment variable holds the API token?", "And how often should I rotate it?"]
    answers = {row.question: row.answer for row in report.rows}
    assert [m["content"] for m in third if m["role"] == "assistant"] == [
        answers["Which environment variable holds the API token?"], answers["And how often should I rotate it?"]]
    assert {"role": "assistant", "content": "Run acme rollback."} in sent["Does that keep the old config?"]["history"]


@pytest.mark.slow
def test_a_target_in_thread_mode_is_sent_back_the_thread_its_first_reply_named(tmp_path):
    recorder = Recorder()
    with serve_recorder(recorder) as base:
        _ran(evaluate(_target_job(tmp_path, base, body={"question": "{question}", "thread_id": "{thread}"},
                                  reply={"answer": "answer", "sources": "sources", "thread": "thread_id"})))
    sent = _by_question(recorder)
    opened = {q: body["thread_id"] for q, body in sent.items()}
    assert opened["How do I install Acme?"] is None and opened["Which environment variable holds the API token?"] is None
    tokens = [q for q in recorder.threads.values() if "Which environment variable holds the API token?" in q][0]
    assert tokens == ["Which environment variable holds the API token?", "And how often should I rotate it?",
                      "What happens when it expires?"]
    assert opened["And how often should I rotate it?"] == opened["What happens when it expires?"] is not None


def _ran(report: Report) -> Report:
    assert all(row.error is None for row in report.rows), [row.error for row in report.rows]
    return report


def test_a_model_rewrites_follow_ups_for_the_search_when_told_to_and_its_rewrite_is_stored(tmp_path):
    from docpilot.run.road import REWRITE

    script = OpenAIScript(default=Reply(answer="How often are API tokens rotated?"))

    def job() -> EvalJob:
        plain = _hosted(tmp_path, base_url)
        config = plain.config.model_copy(update={"retrieval": plain.config.retrieval.model_copy(
            update={"follow_ups": "model"})})
        return plain.model_copy(update={"config": config})

    with serve_openai(script) as base_url:
        report = evaluate(job())
        follow_ups = [row for row in report.rows if (row.turn or 1) > 1]
        assert len(script.history) == TURNS + len(follow_ups)  # a rewrite per follow-up, then its turn
        assert all(row.retrieval_query == "How often are API tokens rotated?" for row in follow_ups)
        assert all(row.retrieval_query is None for row in report.rows if (row.turn or 1) == 1)
        rewrites = [r.body["messages"] for r in script.history if r.body["messages"][0]["content"] == REWRITE]
        third = next(m for m in rewrites if m[-1]["content"] == "What happens when it expires?")
        assert [m["content"] for m in third[1:-1] if m["role"] == "user"] == [
            "Which environment variable holds the API token?", "And how often should I rotate it?"]
        again = evaluate(job())
        assert len(script.history) == TURNS + len(follow_ups)  # the rewrites are stored like any turn
    assert [row.retrieval_query for row in again.rows] == [row.retrieval_query for row in report.rows]


def test_variants_compare_conversations_side_by_side_turn_by_turn(tmp_path):
    from click.testing import CliRunner

    from docpilot.cli import main
    from docpilot.reports.report import load_report

    job = _job(tmp_path)
    out = tmp_path / "variants.json"
    result = CliRunner().invoke(main, [
        "eval", "--docs", str(PIPELINE / "docs"), "--golden", job.golden, "--orchestrator", "inline",
        "--variant", "base", "--variant", "top3=prime.top_k=3", "--out", str(out), "--json"])
    assert result.exit_code in (0, 1), result.output
    report = load_report(out)
    assert [v.name for v in report.variants] == ["base", "top3"]
    for name in ("base", "top3"):
        rows = [row for row in report.rows if row.variant == name]
        assert [row.id for row in rows] == ["install", "tokens/1", "tokens/2", "tokens/3", "deploys/1", "deploys/2"]
        assert [row.turn for row in rows] == [None, 1, 2, 3, 1, 2]
        assert rows[2].retrieval_query is not None  # each variant reads the conversation
    assert all(v.turns for v in report.variants)  # each variant's by-turn slices
    assert report.paired is not None  # paired turn by turn, as records are
