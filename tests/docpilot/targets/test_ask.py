"""Targets: assistants DocPilot did not build, asked over real HTTP on 127.0.0.1 in four other shapes.

One server (``tests.support.assistant_shapes``) speaks a JSON API with ``Server-Timing``,
SSE with named events, LangServe's ``/invoke`` and ``/stream``, and NDJSON. The eval's
retrieval metrics over the sources each target returned are checked against
pytrec_eval's, record by record.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import pytrec_eval
import yaml
from click.testing import CliRunner

from docpilot.assistant.render import render_panel
from docpilot.cli import main
from docpilot.config.model import Config
from docpilot.config.target import SourceMapping, Target
from docpilot.errors import ConfigError
from docpilot.models.base import Source
from docpilot.targets.ask import (
    Endpoint,
    TargetReplyError,
    ask_target,
    parse_server_timing,
    request_body,
)
from docpilot.targets.sources import section_id
from tests.support.assistant_shapes import BASE, KEY, Script, Scripted, serve_shapes

DOCS = Path(__file__).resolve().parents[2] / "data" / "pipeline" / "docs"
SECTIONS = [
    "guide/auth#authentication", "guide/auth#tokens", "guide/auth#rotating-tokens", "guide/deploy#deploying",
    "guide/deploy#deploy-a-site", "guide/deploy#rollback", "index#acme-cli", "index#install",
]
# Records: exact-section gold (so relevance is equality, as pytrec_eval reads it), and two negatives.
RECORDS = [
    {"id": f"q{i}", "question": f"Question number {i} about Acme?", "gold": gold,
     "gold_answer": f"Answer {i} is in the docs.", "split": "dev" if i % 2 else "test"}
    for i, gold in enumerate([
        ["guide/auth#tokens"], ["guide/deploy#rollback", "index#install"], ["index#acme-cli"],
        ["guide/auth#rotating-tokens", "guide/auth#authentication"], ["guide/deploy#deploying"],
        ["index#install"], ["guide/auth#tokens", "guide/deploy#deploy-a-site", "index#acme-cli"], ["index#install"],
    ])
] + [
    {"id": "neg-price", "question": "How much does Acme cost?", "expected_cause": "not-answerable", "split": "dev"},
    {"id": "neg-k8s", "question": "Does Acme run Kubernetes?", "expected_cause": "not-answerable", "split": "test"},
]


def _script() -> Script:
    answers = {}
    for n, record in enumerate(RECORDS):
        rng = random.Random(n)
        shown = rng.sample(SECTIONS, rng.randint(0, 8)) if n != 7 else []  # q7 shows an empty list
        if "gold" in record:
            answers[record["question"]] = Scripted(f"{record['gold_answer']} See [1].", shown)
        else:
            answers[record["question"]] = Scripted("REFUSE: not-answerable", shown[:2])
    return Script(answers)


SHAPES = {
    "json": {"url": "{base}/api/chat", "headers": {"X-Api-Key": "${SHAPES_KEY}"},
             "body": {"query": "{question}", "request_id": "{id}", "filters": {"scope": "{scope}"}},
             "reply": {"kind": "json", "answer": "result.text", "sources": "documents[*].link",
                       "refusal": "result.refused"},
             "source_ids": {"base_url": BASE}},
    "sse": {"url": "{base}/sse/ask", "body": {"q": "{question}"},
            "reply": {"kind": "sse", "answer": "t", "delta_event": "delta", "sources_event": "sources",
                      "sources": "items", "source_id": "path", "end_event": "done"},
            "source_ids": {"prefix": "/page/"}},
    "langserve": {"url": "{base}/rag/invoke", "body": {"input": {"question": "{question}"}},
                  "reply": {"answer": "output.answer", "sources": "output.context",
                            "source_id": "metadata.source"}},
    "langserve-stream": {"url": "{base}/rag/stream", "body": {"input": {"question": "{question}"}},
                         "reply": {"kind": "sse", "answer": "answer", "delta_event": "data",
                                   "sources": "context", "source_id": "metadata.source", "end_event": "end"}},
    "ndjson": {"url": "{base}/ndjson", "body": {"question": "{question}"},
               "reply": {"kind": "ndjson", "answer": "token", "sources": "sources", "end": "done"},
               "source_ids": {"base_url": BASE + "page/"}},
    "no-sources": {"url": "{base}/rag/invoke", "body": {"input": {"question": "{question}"}},
                   "reply": {"answer": "output.answer"}},
}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Script]]:
    script = _script()
    with serve_shapes(script) as base:
        yield base, script


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHAPES_KEY", KEY)


def _target(base: str, shape: str, **changes: object) -> Target:
    data = json.loads(json.dumps(SHAPES[shape]).replace("{base}", base))
    for key, value in changes.items():
        head, _, option = key.partition(".")
        if option:
            data[head][option] = value
        else:
            data[head] = value
    return Target.model_validate(data)


def _ask(target: Target, question: str, *, strict: bool = False):
    async def run():
        async with aiohttp.ClientSession() as client:
            return await ask_target(client, target, question, None, "q", strict=strict)

    return asyncio.run(run())


# --- the mapping, without a server ---

@pytest.mark.parametrize(("source", "mapping", "expected"), [
    ("https://docs.acme.test/guide/auth.html#tokens", {"base_url": "https://docs.acme.test/"}, "guide/auth#tokens"),
    ("https://other.host/page/guide/auth/#tokens", {"prefix": "/page/"}, "guide/auth#tokens"),
    ("/page/guide/index.html", {"prefix": "page/"}, "guide#"),
    ("guide/auth.md", {}, "guide/auth#"),
    ("https://docs.acme.test/", {"base_url": "https://docs.acme.test/"}, "index#"),
    ("guide/deploy?utm=x#rollback", {}, "guide/deploy#rollback"),
    ("", {}, None),
    (None, {}, None),
])
def test_a_source_maps_to_a_section_id(source, mapping, expected):
    assert section_id(source, SourceMapping(**mapping)) == expected


def test_server_timing_gives_each_stage_with_a_duration():
    header = 'retrieve;dur=12.3;desc="BM25", cache;desc=hit, model;dur=80, total;dur="100.5"'
    assert parse_server_timing(header) == ({"retrieve": 12.3, "model": 80.0, "total": 100.5}, 0)
    assert parse_server_timing(None) == ({}, 0)


def test_placeholders_become_json_values_or_text():
    template = {"q": "{question}", "s": "{scope}", "meta": ["{id}", "id={id} in {scope}"], "n": 3}
    assert request_body(template, 'say "hi"', ["guide"], "r1") == {
        "q": 'say "hi"', "s": ["guide"], "meta": ["r1", 'id=r1 in ["guide"]'], "n": 3}
    assert request_body({"s": "{scope}"}, "q", None, "r1") == {"s": None}


def test_a_header_reads_the_environment_and_a_missing_variable_is_named(monkeypatch):
    target = Target(url="http://127.0.0.1:1/", headers={"Authorization": "Bearer ${SHAPES_KEY}"},
                    reply={"answer": "a"})
    assert Endpoint.open(target).headers == {"Authorization": f"Bearer {KEY}"}
    monkeypatch.delenv("SHAPES_KEY")
    with pytest.raises(ConfigError, match=r"\$\{SHAPES_KEY\}, which is not set"):
        Endpoint.open(target, "acme")


def test_a_target_must_name_the_answer_and_a_chosen_target_must_exist():
    with pytest.raises(ValueError, match="reply.answer is required"):
        Target(url="http://127.0.0.1:1/", reply={})
    with pytest.raises(ValueError, match="not a JMESPath"):
        Target(url="http://127.0.0.1:1/", reply={"answer": "a[["})
    with pytest.raises(ValueError, match="not one of the config's targets"):
        Config.model_validate({"target": "nope"})


# --- each shape, over HTTP ---

@pytest.mark.parametrize("shape", ["json", "sse", "langserve", "langserve-stream", "ndjson"])
def test_every_shape_gives_the_answer_and_its_sources_in_order(served, shape):
    base, script = served
    record = RECORDS[1]
    turn = _ask(_target(base, shape), record["question"])
    assert turn.error is None, turn.error
    assert turn.answer == f"{record['gold_answer']} See [1]."
    assert [h.section_id for h in turn.retrieval.hits] == script.shown[record["question"]]
    assert [p.n for p in turn.retrieval.primed] == list(range(1, len(turn.retrieval.hits) + 1))
    assert 0 < turn.first_token_ms <= turn.latency_ms


def test_a_stream_s_first_token_comes_before_its_end(served):
    base, script = served
    script.delay_s = 0.15
    try:
        for shape in ("sse", "langserve-stream"):
            turn = _ask(_target(base, shape), RECORDS[0]["question"])
            assert turn.latency_ms - turn.first_token_ms >= 100, (shape, turn.first_token_ms, turn.latency_ms)
        turn = _ask(_target(base, "json"), RECORDS[0]["question"])
        assert turn.first_token_ms == turn.latency_ms  # a JSON reply paints all at once
    finally:
        script.delay_s = 0.0


def test_server_timing_becomes_the_stage_times(served):
    base, _ = served
    turn = _ask(_target(base, "json"), RECORDS[0]["question"])
    assert turn.stages_ms()["retrieve"] == 1.5 and "generate" in turn.stages_ms()


def test_refusals_by_a_path_or_by_docpilot_s_rule(served):
    base, script = served
    question = RECORDS[-1]["question"]
    assert _ask(_target(base, "langserve"), question).refusal.cause == "not-answerable"  # REFUSE: reply
    script.answers["refuse by flag"] = Scripted("Sorry, I cannot help with that.", [], refused=True)
    turn = _ask(_target(base, "json"), "refuse by flag")
    assert turn.refusal is not None and turn.refusal.refused_by == "model" and turn.error is None


# --- a mapping that does not fit: one clear error, nothing stored as an answer ---

def test_an_answer_path_that_matches_nothing_names_the_path_and_the_keys(served):
    base, _ = served
    target = _target(base, "json", **{"reply.answer": "answer"})
    with pytest.raises(TargetReplyError) as caught:
        _ask(target, RECORDS[0]["question"], strict=True)
    message = str(caught.value)
    assert "'answer'" in message and "HTTP 200" in message and "keys result{text, refused}, documents" in message
    turn = _ask(target, RECORDS[0]["question"])
    assert turn.error_code == "malformed" and turn.answer == ""


def test_a_stream_without_the_delta_event_names_the_events_it_sent(served):
    base, _ = served
    target = _target(base, "sse", **{"reply.delta_event": "token"})
    with pytest.raises(TargetReplyError, match="sent no 'token' event .*: sources, delta, done"):
        _ask(target, RECORDS[0]["question"], strict=True)


def test_an_auth_failure_and_a_reply_that_is_not_json(served, monkeypatch):
    base, _ = served
    monkeypatch.setenv("SHAPES_KEY", "wrong")
    with pytest.raises(TargetReplyError, match="HTTP 401 from .*/api/chat: .*invalid API key"):
        _ask(_target(base, "json"), RECORDS[0]["question"], strict=True)
    assert _ask(_target(base, "json"), RECORDS[0]["question"]).error_code == "auth"
    with pytest.raises(TargetReplyError, match=r"is not JSON \(text/html.*Please sign in"):
        _ask(_target(base, "langserve", url=f"{base}/html"), "anything", strict=True)


# --- whole evals through the server runtime ---

def _config_file(tmp_path: Path, base: str, **extra: object) -> Path:
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump(RECORDS))
    targets = {name: json.loads(json.dumps(shape).replace("{base}", base)) for name, shape in SHAPES.items()}
    config = {"corpus": {"docs": str(DOCS)}, "golden": str(golden), "cache_dir": str(tmp_path / "cache"),
              "reports_dir": str(tmp_path / "reports"), "targets": targets, **extra}
    path = tmp_path / "docpilot.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _eval(*args: str):
    return CliRunner().invoke(main, ["eval", "--orchestrator", "inline", *args], catch_exceptions=False)


def _trec(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Per record: recall@1/3/5/8, MRR and nDCG@8 by pytrec_eval over the rows' rankings."""
    qrels = {r["id"]: {g: 1 for g in r["gold"]} for r in rows}
    # pytrec_eval sorts by score, so the rank order is written as descending scores.
    run = {r["id"]: {s: float(len(r["retrieved"]) - i) for i, s in enumerate(r["retrieved"])} or {"none#": 0.0}
           for r in rows}
    measures = {"recall.1,3,5,8", "recip_rank", "ndcg_cut.8"}
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


def test_two_targets_compared_in_one_run_agree_with_pytrec_eval(served, tmp_path):
    base, script = served
    config = _config_file(tmp_path, base, variants={"json": {"target": "json"}, "sse": {"target": "sse"}})
    out = tmp_path / "run.json"
    result = _eval("--config", str(config), "--runtime", "server", "--out", str(out), "--json")
    assert result.exit_code in (0, 1), result.output
    report = json.loads(out.read_text())
    assert [v["name"] for v in report["variants"]] == ["json", "sse"]
    assert "k-secret" not in out.read_text()  # the key came from the environment and stayed there
    disagreements = 0
    for variant in report["variants"]:
        rows = [r for r in report["rows"] if r.get("variant") == variant["name"] and r["kind"] == "positive"]
        assert len(rows) == 8
        for row in rows:
            assert row["retrieved"] == script.shown[row["question"]][:8]
        trec = _trec(rows)
        for name, ours in (("recall@1", "recall_1"), ("recall@3", "recall_3"), ("recall@5", "recall_5"),
                           ("recall@8", "recall_8"), ("mrr", "recip_rank"), ("ndcg@8", "ndcg_cut_8")):
            expected = sum(trec[r["id"]][ours] for r in rows) / len(rows)
            disagreements += abs(variant["summary"][name] - expected) > 1e-9
    assert disagreements == 0
    json_rows = [r for r in report["rows"] if r.get("variant") == "json"]
    assert all(r["stages_ms"].get("retrieve") == 1.5 for r in json_rows if r["error"] is None)
    negatives = [r for r in json_rows if r["kind"] == "negative"]
    assert all(r["refused"] for r in negatives)


def test_a_target_with_no_sources_has_no_retrieval_metrics(served, tmp_path):
    base, _ = served
    config = _config_file(tmp_path, base, variants={"json": {"target": "json"}, "sse": {"target": "sse"}})
    out = tmp_path / "run.json"
    # --target measures that target alone: the config file's variants are left out.
    result = _eval("--config", str(config), "--target", "no-sources", "--out", str(out), "--json")
    assert result.exit_code in (0, 1), result.output
    report = json.loads(out.read_text())
    assert report["runtime"] == "server"
    assert report.get("variants") is None
    assert all(report["summary"][m] is None for m in ("recall@8", "mrr", "ndcg@8", "context_precision@5"))
    assert report["summary"]["answer_f1"] is not None
    assert all(r["unranked"] for r in report["rows"])
    from docpilot.improve.taxonomy import causes_of, run_settings
    from docpilot.reports.report import load_report

    stored = load_report(out)
    causes = {cause for row in stored.rows for cause in causes_of(row, run_settings(stored))}
    assert "not-retrieved" not in causes  # a ranking never shown is no retrieval miss
    scored = CliRunner().invoke(main, ["score", str(out)], catch_exceptions=False)
    assert "retrieval metrics are absent, not 0, for 8 of 8 positives" in " ".join(scored.output.split())
    assert "retrieval: the target no-sources's own" in scored.output  # not DocPilot's retriever


def test_golden_check_shows_how_a_sample_reply_maps(served, tmp_path):
    base, _ = served
    config = _config_file(tmp_path, base)
    result = CliRunner().invoke(main, ["golden", "check", "--config", str(config), "--target", "json", "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    sample = json.loads(result.stdout)["target"]
    assert sample["record"] == "q0" and sample["status"] == 200 and sample["fields"]["answer"]["matched"]
    shown = _script().answers[RECORDS[0]["question"]].sources
    assert [s["section_id"] for s in sample["sources"]] == shown and all(s["in_docs"] for s in sample["sources"])
    assert sample["server_timing"]["retrieve"] == 1.5
    text = CliRunner().invoke(main, ["golden", "check", "--config", str(config), "--target", "no-sources"],
                              catch_exceptions=False).output
    assert "sources: not mapped (retrieval metrics will be absent)" in text


@pytest.mark.parametrize("shape", ["sse", "langserve-stream", "ndjson"])
def test_a_stream_s_connection_asks_the_next_question_too(served, tmp_path, shape):
    # Regression: a stream left unread after its end event closed its connection, so every
    # question opened a new one (1,000 TCP handshakes for 1,000 records).
    base, script = served
    script.peers.clear()
    config = _config_file(tmp_path, base, model={"concurrency": 1})
    result = _eval("--config", str(config), "--target", shape, "--out", str(tmp_path / "r.json"))
    assert result.exit_code in (0, 1), result.output
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert len(rows) == len(RECORDS) and all(r["error"] is None for r in rows)
    shards = 2  # the run's first round, then the rest: each shard opens its own client
    assert len(script.peers) <= shards < len(RECORDS)
    assert not (tmp_path / "cache" / "index").exists()  # the ranking is the target's: no index of DocPilot's opens


def test_a_wrong_path_stops_the_run_after_the_first_record(served, tmp_path):
    base, script = served
    shapes = dict(SHAPES)
    SHAPES["broken"] = {**SHAPES["json"], "reply": {**SHAPES["json"]["reply"], "answer": "data.answer"}}
    try:
        config = _config_file(tmp_path, base, model={"concurrency": 2})
    finally:
        SHAPES.clear()
        SHAPES.update(shapes)
    script.shown.clear()
    result = _eval("--config", str(config), "--target", "broken", "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 2
    assert "reply.answer 'data.answer'" in result.output and "keys result{text, refused}" in result.output
    # The first round goes out at once (model.concurrency questions); the run's first reply stops it.
    assert len(script.shown) <= 2 < len(RECORDS)
    assert result.output.count("reply.answer 'data.answer'") == 1
    assert not (tmp_path / "r.json").exists()


# Regression: each shard kept model.concurrency questions in flight of its own, so three shards
# on the road at once sent three times what the config allows (a c32 run ran 0.77 x the limit).
def test_a_target_never_has_more_questions_in_flight_than_the_config_allows(served, tmp_path):
    base, script = served
    config = _config_file(tmp_path, base, model={"concurrency": 2}, shard_size=2)
    script.delay_s, script.peak = 0.05, 0
    try:
        result = _eval("--config", str(config), "--target", "json", "--out", str(tmp_path / "r.json"))
    finally:
        script.delay_s = 0.0
    assert result.exit_code in (0, 1), result.output
    assert script.peak == 2


# --- citations given apart from the answer's text (reply.citations) ---

CITED_SHAPES = {
    "json-cited": {"url": "{base}/api/cited", "body": {"question": "{question}"},
                   "reply": {"answer": "answer", "sources": "sources", "citations": "citations",
                             "source_id": "url"},
                   "source_ids": {"base_url": BASE + "page/"}},
    "ndjson-cited": {**SHAPES["ndjson"], "reply": {**SHAPES["ndjson"]["reply"], "citations": "citations"}},
    "sse-cited": {**SHAPES["sse"], "reply": {**SHAPES["sse"]["reply"], "citations": "items",
                                            "citations_event": "citations"}},
}


def _cited_script() -> Script:
    """Answers with no markers, each citing some of its sources apart from the text: by section id or by
    number, now and then a section it did not return or a number past its sources."""
    answers = {}
    for n, record in enumerate(RECORDS):
        rng = random.Random(100 + n)
        shown = rng.sample(SECTIONS, rng.randint(1, 6))
        if "gold" not in record:
            answers[record["question"]] = Scripted("REFUSE: not-answerable", shown, cited=[])
            continue
        cited: list[str | int] = [s if rng.random() < 0.5 else i for i, s in enumerate(shown, start=1)
                                  if rng.random() < 0.6]
        if n == 2:
            cited.append(next(s for s in SECTIONS if s not in shown))  # a section it never returned
        if n == 5:
            cited.append(len(shown) + 2)  # a number past its sources
        answers[record["question"]] = Scripted(record["gold_answer"], shown, cited=cited)
    return Script(answers)


def _by_hand(scripted: Scripted) -> tuple[list[str], list[str]]:
    """The sections a scripted answer cites, first mention first, and the items that name no returned source."""
    cited, unknown = [], []
    for item in scripted.cited or []:
        if isinstance(item, int):
            section = scripted.sources[item - 1] if 1 <= item <= len(scripted.sources) else None
        else:
            section = item if item in scripted.sources else None
        if section is None:
            unknown.append(str(item))
        elif section not in cited:
            cited.append(section)
    return cited, unknown


def test_cited_items_that_name_no_source_count_as_an_out_of_range_marker_does():
    sources = [Source(n=1, section_id="guide/auth#tokens", title="t", text=""),
               Source(n=2, section_id="index#install", title="i", text="")]
    by_markers = render_panel("Export the token [2][1][1]. Not here [5].", sources, lambda s: f"/{s}")
    given = render_panel("Export the token.", sources, lambda s: f"/{s}",
                         cited=["index#install", "1", "guide/auth#tokens", "5"])
    assert given.citations == by_markers.citations == ["index#install", "guide/auth#tokens"]
    assert by_markers.hallucinated == ["5"] and given.hallucinated == ["5"]
    assert render_panel("Text [1].", sources, str, cited=["guide/deploy#rollback"]).hallucinated == [
        "guide/deploy#rollback"]  # a source that was not returned, as a bracketed id never primed
    assert given.links == 3 and "[" not in given.markdown.split("\n")[0]


def test_a_citations_path_must_come_with_sources_and_be_jmespath():
    with pytest.raises(ValueError, match="reply.citations needs reply.sources"):
        Target(url="http://127.0.0.1:1/", reply={"answer": "a", "citations": "c"})
    with pytest.raises(ValueError, match=r"reply.citations: 'c\[\[' is not a JMESPath"):
        Target(url="http://127.0.0.1:1/", reply={"answer": "a", "sources": "s", "citations": "c[["})


@pytest.fixture(scope="module")
def cited_served() -> Iterator[tuple[str, Script]]:
    script = _cited_script()
    with serve_shapes(script) as base:
        yield base, script


@pytest.mark.parametrize("shape", sorted(CITED_SHAPES))
def test_each_shape_reads_its_citations_as_numbers_or_sources(cited_served, shape):
    base, script = cited_served
    data = json.loads(json.dumps(CITED_SHAPES[shape]).replace("{base}", base))
    question = RECORDS[2]["question"]
    turn = _ask(Target.model_validate(data), question)
    assert turn.error is None, turn.error
    expected = [str(i) if isinstance(i, int) else i for i in script.answers[question].cited]
    assert turn.cited == expected and "[" not in turn.answer


def test_a_citations_path_that_matches_nothing_stops_the_run_at_the_first_reply(cited_served):
    base, _ = cited_served
    data = json.loads(json.dumps(CITED_SHAPES["json-cited"]).replace("{base}", base))
    data["reply"]["citations"] = "cites"
    with pytest.raises(TargetReplyError, match=r"nothing at reply.citations 'cites'; it has keys answer, sources, "
                                                r"citations"):
        _ask(Target.model_validate(data), RECORDS[0]["question"], strict=True)


def test_citations_given_apart_from_the_text_give_the_citation_metrics_computed_by_hand(cited_served, tmp_path):
    base, script = cited_served
    variants = {name: {"target": name} for name in CITED_SHAPES}
    config = _config_file(tmp_path, base, variants=variants)
    data = yaml.safe_load(config.read_text())
    data["targets"].update(json.loads(json.dumps(CITED_SHAPES).replace("{base}", base)))
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "run.json"
    result = _eval("--config", str(config), "--runtime", "server", "--out", str(out), "--json")
    assert result.exit_code == 1, result.output  # the hallucinated citations fail the run
    report = json.loads(out.read_text())
    positives = [r for r in RECORDS if "gold" in r]
    precisions, recalls, unknowns, unlinked = [], [], 0, 0
    for record in positives:
        cited, unknown = _by_hand(script.answers[record["question"]])
        if cited:
            precisions.append(sum(c in record["gold"] for c in cited) / len(cited))
        recalls.append(sum(g in cited for g in record["gold"]) / len(record["gold"]))
        unknowns += len(unknown)
        unlinked += not cited
    assert unknowns == 2 and unlinked > 0 and len(precisions) > 3
    for variant in report["variants"]:
        summary = variant["summary"]
        assert summary["citation_precision"] == pytest.approx(sum(precisions) / len(precisions)), variant["name"]
        assert summary["citation_recall"] == pytest.approx(sum(recalls) / len(recalls)), variant["name"]
        assert summary["hallucinated_citations"] == unknowns
        assert summary["unlinked_answers"] == unlinked  # no cited source: shown with Sources, no link
        rows = {r["id"]: r for r in report["rows"] if r.get("variant") == variant["name"]}
        assert rows["q5"]["hallucinated"] == [str(len(script.answers[RECORDS[5]["question"]].sources) + 2)]
        assert rows["q2"]["hallucinated"] == [script.answers[RECORDS[2]["question"]].cited[-1]]
        assert rows["q0"]["citations"] == _by_hand(script.answers[RECORDS[0]["question"]])[0]


def test_the_html_report_lists_the_sources_a_target_cited_apart_not_all_it_returned(cited_served, tmp_path):
    from docpilot.readout.html import render_html
    from docpilot.readout.outcomes import prepare_readout
    from docpilot.reports.report import load_report

    base, script = cited_served
    config = _config_file(tmp_path, base)
    data = yaml.safe_load(config.read_text())
    data["targets"].update(json.loads(json.dumps(CITED_SHAPES).replace("{base}", base)))
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "run.json"
    result = _eval("--config", str(config), "--target", "json-cited", "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    report = load_report(out)
    page = render_html(prepare_readout(report, reports_dir=tmp_path / "reports"))
    row = next(r for r in report.rows if r.id == "q0")
    cited = _by_hand(script.answers[RECORDS[0]["question"]])[0]
    assert row.citations == cited and len(row.primed) > len(cited)  # it returned more than it cited
    listed = page.split('id="rec-q0"')[1].split("</details>")[0].split('<ol class="sources">')[1].split("</ol>")[0]
    assert listed.count("<li>") == len(cited)
    assert all(section in listed for section in cited)


# --- a target named in the config file ---

def test_the_config_s_target_is_measured_over_http_as_the_flag_s_is(served, tmp_path):
    base, script = served
    script.shown.clear()
    config = _config_file(tmp_path, base, target="langserve")
    out = tmp_path / "run.json"
    result = _eval("--config", str(config), "--out", str(out), "--json")
    assert result.exit_code in (0, 1), result.output
    report = json.loads(out.read_text())
    assert report["runtime"] == "server" and report["config"]["target"] == "langserve"
    assert set(script.shown) == {r["question"] for r in RECORDS}  # every question went to the target
    rows = {r["id"]: r for r in report["rows"]}
    assert rows["q1"]["retrieved"] == script.shown[RECORDS[1]["question"]][:8]


def test_variants_that_name_targets_are_measured_over_http_without_the_runtime_flag(served, tmp_path):
    base, _ = served
    config = _config_file(tmp_path, base, variants={"json": {"target": "json"}, "sse": {"target": "sse"}})
    out = tmp_path / "run.json"
    result = _eval("--config", str(config), "--out", str(out), "--json")
    assert result.exit_code in (0, 1), result.output
    assert json.loads(out.read_text())["runtime"] == "server"


@pytest.mark.parametrize(("extra", "args", "expected"), [
    ({"target": "nope"}, [], "target 'nope' is not one of the config's targets (json, sse, langserve"),
    ({"target": "json"}, ["--runtime", "local"], "the config's target json is measured over HTTP"),
    ({}, ["--target", "json", "--runtime", "local"], "--target json is measured over HTTP"),
    ({"target": "json"}, ["--url", "http://127.0.0.1:1"], "the config's target json has its URL in the config"),
])
def test_a_target_that_cannot_run_is_a_usage_error_naming_why(served, tmp_path, extra, args, expected):
    base, script = served
    script.shown.clear()
    config = _config_file(tmp_path, base, **extra)
    result = _eval("--config", str(config), *args, "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 2, result.output
    assert expected in " ".join(result.output.split())
    assert "Traceback" not in result.output and not script.shown and not (tmp_path / "r.json").exists()


# --- a busy target: 429 and 503 asked again, then an error row ---

def _busy(base: str, **changes: object) -> Target:
    return _target(base, "langserve", url=f"{base}/rag/busy", **changes)


def test_a_503_is_asked_again_after_its_retry_after_and_then_answers(served):
    base, script = served
    script.busy, script.busy_status, script.retry_after, script.busy_requests = 2, 503, "0.2", 0
    try:
        turn = _ask(_busy(base), RECORDS[0]["question"])
    finally:
        script.busy, script.retry_after = 0, None
    assert turn.error is None and turn.answer == f"{RECORDS[0]['gold_answer']} See [1]."
    assert script.busy_requests == 3
    assert turn.latency_ms >= 400  # two waits of Retry-After: 0.2, counted as a user waits them


def test_a_target_that_is_always_rate_limited_gives_bounded_error_rows(served, tmp_path):
    base, script = served
    config = _config_file(tmp_path, base)
    data = yaml.safe_load(config.read_text())
    data["targets"]["busy"] = {**data["targets"]["langserve"], "url": f"{base}/rag/busy", "retries": 2}
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    script.busy, script.busy_status, script.retry_after, script.busy_requests = -1, 429, None, 0
    out = tmp_path / "run.json"
    try:
        result = _eval("--config", str(config), "--target", "busy", "--id", "q0", "--out", str(out))
    finally:
        script.busy = 0
    assert result.exit_code == 1, result.output  # an errored row fails the errors gate, as any other does
    assert script.busy_requests == 3  # the first request and two retries, then no more
    (row,) = json.loads(out.read_text())["rows"]
    assert row["error_code"] == "rate_limit" and row["answer"] in ("", None) and not row["refused"]
    assert "HTTP 429 from" in row["error"] and "gave up after 3 attempts" in row["error"]


def test_a_503_that_persists_ends_the_turn_naming_the_status(served):
    base, script = served
    script.busy, script.busy_status, script.retry_after, script.busy_requests = -1, 503, "0", 0
    try:
        turn = _ask(_busy(base, retries=1), RECORDS[0]["question"])
    finally:
        script.busy, script.retry_after = 0, None
    assert script.busy_requests == 2 and turn.error_code == "http_status" and turn.answer == ""
    assert turn.error.startswith(f"HTTP 503 from {base}/rag/busy") and turn.refusal is None


def test_the_config_s_target_keeps_the_file_s_variants_each_measuring_it_unless_it_names_another(served, tmp_path):
    base, _ = served
    config = _config_file(tmp_path, base, target="json", variants={"own": {}, "sse": {"target": "sse"}})
    out = tmp_path / "run.json"
    result = _eval("--config", str(config), "--out", str(out), "--json")
    assert result.exit_code in (0, 1), result.output
    report = json.loads(out.read_text())
    assert report["runtime"] == "server" and [v["name"] for v in report["variants"]] == ["own", "sse"]
    timed = {v: {r["stages_ms"].get("retrieve") for r in report["rows"] if r.get("variant") == v and not r["error"]}
             for v in ("own", "sse")}
    assert timed == {"own": {1.5}, "sse": {None}}  # only the JSON target sends Server-Timing


def test_gate_only_measures_a_target_through_its_search_endpoint_and_asks_no_answer(served, tmp_path):
    base, script = served
    searched = script.searches
    search = {"url": base + "/api/search", "body": {"query": "{question}"}, "sources": "hits", "source_id": "link"}
    config = _config_file(tmp_path, base)
    data = yaml.safe_load(config.read_text())
    data["targets"]["json"]["search"] = search
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "gate.json"
    result = _eval("--config", str(config), "--target", "json", "--gate-only", "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    report = json.loads(out.read_text())
    assert report["gate_only"] and script.searches - searched == len(RECORDS)
    rows = [r for r in report["rows"] if r["kind"] == "positive"]
    assert all(r["answer"] is None for r in report["rows"])
    assert [r["retrieved"] for r in rows] == [script.shown[r["question"]][:8] for r in rows]
    trec = _trec(rows)
    for name, ours in (("recall@8", "recall_8"), ("mrr", "recip_rank"), ("ndcg@8", "ndcg_cut_8")):
        assert report["summary"][name] == pytest.approx(sum(trec[r["id"]][ours] for r in rows) / len(rows))
    data["targets"]["json"].pop("search")
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    refused = _eval("--config", str(config), "--target", "json", "--gate-only")
    assert refused.exit_code == 2 and "targets.NAME.search" in refused.output
