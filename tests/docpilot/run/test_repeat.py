"""--repeat N: each turn asked N times against a model that answers at random, each sample cached apart.

The model endpoint is the scripted OpenAI-compatible server on 127.0.0.1, given a
seeded random sequence of answers and refusals; it counts the turns it was asked.
"""

from __future__ import annotations

import math
import random

import pytest
import yaml
from docpilot.metrics.stability import flip_rate, pass_hat_k, record_stability
from docpilot.metrics.summary import summarize

from docpilot.config.model import Config
from docpilot.run.evaluation import evaluate
from docpilot.run.job import EvalJob
from tests.support.openai_server import Reply

PAGES = {
    "guide/install.md": "# Install\n\nInstall Acme with pip install acme-cli. It needs Python 3.11 or newer.\n",
    "guide/tokens.md": "# Tokens\n\nExport the token as ACME_TOKEN before you run any command of the cli.\n",
    "guide/colors.md": "# Colors\n\nThe cli prints in color unless NO_COLOR is set.\n",
}
RECORDS = [
    {"id": "install", "question": "How do I install Acme with pip?", "gold": ["guide/install"],
     "gold_answer": "pip install acme-cli"},
    {"id": "token", "question": "Which variable holds the token?", "gold": ["guide/tokens"],
     "gold_answer": "ACME_TOKEN"},
    {"id": "colors", "question": "How do I turn off colors?", "gold": ["guide/colors"],
     "gold_answer": "set NO_COLOR"},
    {"id": "weather", "question": "What is the weather on Mars today?", "gold": []},
]
ANSWER = Reply(answer="Install it with pip install acme-cli [1].")
REFUSAL = Reply(answer="REFUSE: not-answerable")


def _random_replies(seed: int, count: int = 400) -> list[Reply]:
    """What a model answering at random says, turn after turn: an answer or a refusal, by a seeded coin."""
    coin = random.Random(seed)
    return [ANSWER if coin.random() < 0.6 else REFUSAL for _ in range(count)]


def _job(tmp_path, base_url: str, repeat: int, records: list[dict] = RECORDS, **gates: str) -> EvalJob:
    docs = tmp_path / "docs"
    for name, text in PAGES.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, encoding="utf-8")
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump(records), encoding="utf-8")
    config = Config(corpus={"docs": str(docs)}, golden=str(golden), cache_dir=str(tmp_path / "cache"),
                    reports_dir=str(tmp_path / "reports"), gates=gates,
                    model={"provider": "openai", "name": "coin", "base_url": base_url, "repeat": repeat})
    return EvalJob(config=config, golden=str(golden))


def _asked(script, run) -> int:
    before = len(script.turns)
    report = run()
    return len(script.turns) - before, report


def test_raising_repeat_asks_only_the_new_samples_and_an_unchanged_rerun_none(tmp_path, openai_server):
    base_url, script = openai_server
    script.enqueue(*_random_replies(seed=54))
    records = len(RECORDS)

    asked, five = _asked(script, lambda: evaluate(_job(tmp_path, base_url, 5)))
    assert asked == 5 * records
    assert sorted((r.id, r.sample) for r in five.rows) == sorted((r["id"], s) for r in RECORDS for s in range(5))

    asked, again = _asked(script, lambda: evaluate(_job(tmp_path, base_url, 5)))
    assert asked == 0 and again.cache_stats["model"] == {"reused": 5 * records, "computed": 0}
    assert [(r.id, r.sample, r.refused) for r in again.rows] == [(r.id, r.sample, r.refused) for r in five.rows]

    asked, seven = _asked(script, lambda: evaluate(_job(tmp_path, base_url, 7)))
    assert asked == 2 * records
    assert {r.sample for r in seven.rows} == set(range(7))


def test_the_first_sample_is_the_turn_a_run_of_one_stored(tmp_path, openai_server):
    base_url, script = openai_server
    script.enqueue(*_random_replies(seed=7))
    asked, one = _asked(script, lambda: evaluate(_job(tmp_path, base_url, 1)))
    assert asked == len(RECORDS) and all(r.sample is None for r in one.rows)
    asked, three = _asked(script, lambda: evaluate(_job(tmp_path, base_url, 3)))
    assert asked == 2 * len(RECORDS)
    first = {r.id: r.answer for r in three.rows if r.sample == 0}
    assert first == {r.id: r.answer for r in one.rows}
    assert all("model" in r.cached for r in three.rows if r.sample == 0)


def _oracle(rows):
    """Pass rates and the flip rate worked out by hand from the rows: a sample passes when its refusal is right."""
    by_record: dict[str, list[bool]] = {}
    for row in rows:
        by_record.setdefault(row.id, []).append(row.error is None and row.refused == (row.kind == "negative"))
    rates = {record: sum(passes) / len(passes) for record, passes in by_record.items()}
    flips = sum(1 for passes in by_record.values() if len(set(passes)) > 1) / len(by_record)
    every = sum(1 for passes in by_record.values() if all(passes)) / len(by_record)
    return rates, flips, every


def test_pass_rates_and_flip_rate_equal_an_oracle_over_the_rows(tmp_path, openai_server):
    base_url, script = openai_server
    script.enqueue(*_random_replies(seed=2024))
    report = evaluate(_job(tmp_path, base_url, 5))
    stability = record_stability(report.rows)
    rates, flips, every = _oracle(report.rows)
    assert {s.id: s.pass_rate for s in stability} == rates
    assert flip_rate(stability) == flips and pass_hat_k(stability) == every
    assert 0 < flips  # the coin made some record differ between samples
    # The summary reads each record's mean: over-refusal by the model is the mean of the positives' refusal rates.
    positives = [r for r in RECORDS if r["gold"]]
    refused = [sum(row.refused for row in report.rows if row.id == r["id"]) / 5 for r in positives]
    # A mean is summed exactly (``math.fsum``): 0.2 + 0.8 + 0.4 summed in order is 1.4000000000000001.
    assert report.summary["over_refusal_answer"] == math.fsum(refused) / len(refused)
    assert summarize(report.rows)[1]["over_refusal_answer"] == len(positives)


def test_a_majority_gate_passes_a_run_that_an_all_gate_fails(tmp_path, openai_server):
    base_url, script = openai_server
    # One turn in flight: each record's five samples leave together and take five replies in a row,
    # so every record, whichever is asked first, is answered three times and refused twice.
    positives = [r for r in RECORDS if r["gold"]]  # the answer cites [1], which a negative's prompt may not hold
    script.enqueue(*[ANSWER, REFUSAL, ANSWER, ANSWER, REFUSAL] * len(positives))
    gate = {"over_refusal_answer": "<= 0.5"}

    def run(rule: str):
        job = _job(tmp_path, base_url, 5, positives, rule=rule, **gate)
        job.config.model.concurrency = 1
        return evaluate(job)

    majority = run("majority")
    every = run("all")
    assert len(script.turns) == 5 * len(positives)  # the second run read every sample from the cache
    assert majority.summary["over_refusal_answer"] == every.summary["over_refusal_answer"] == pytest.approx(0.4)
    read = {g.metric: (g.value, g.passed) for g in majority.gates}
    assert read["over_refusal_answer"] == (0.0, True) and majority.verdict == "pass"
    read = {g.metric: (g.value, g.passed) for g in every.gates}
    assert read["over_refusal_answer"] == (1.0, False) and every.verdict == "fail"
    mean = run("mean")
    assert {g.metric: g.value for g in mean.gates}["over_refusal_answer"] == pytest.approx(0.4)
    assert mean.verdict == "pass"


def test_the_report_scorecard_html_and_markdown_name_the_flaky_records(tmp_path, openai_server):
    import io

    from rich.console import Console

    from docpilot.readout.html import render_html
    from docpilot.readout.markdown import render_markdown
    from docpilot.readout.outcomes import prepare_readout
    from docpilot.reports.report import load_report, rescore
    from docpilot.reports.scorecard import render_scorecard

    base_url, script = openai_server
    script.enqueue(*_random_replies(seed=2024))
    report = evaluate(_job(tmp_path, base_url, 5))
    rates, flips, every = _oracle(report.rows)
    flaky = {record for record, rate in rates.items() if 0 < rate < 1}
    assert report.stability is not None and report.stability.samples == 5
    assert {r.id for r in report.stability.flaky} == flaky and flaky
    assert report.stability.flip_rate == flips and report.stability.pass_hat_k == every
    assert rescore(load_report(report.path)).stability == report.stability  # a function of the rows alone
    low, high = report.intervals["over_refusal_answer"]
    assert low <= report.summary["over_refusal_answer"] <= high
    assert rescore(load_report(report.path)).intervals == report.intervals  # seeded: the same interval again

    out = io.StringIO()
    render_scorecard(report, Console(file=out, width=160))
    card = out.getvalue()
    assert f"flip rate {flips:.3f} ({len(flaky)} flaky), pass^5 {every:.3f}" in card
    assert f"95 % [{low:.3f}, {high:.3f}] by page" in card
    readout = prepare_readout(report)
    markdown, html = render_markdown(readout), render_html(readout)
    assert f"[{low:.3f}, {high:.3f}]</td>" in html and f" \\[{low:.3f}, {high:.3f}\\] |" in markdown
    for record in flaky:
        passed = round(rates[record] * 5)
        assert f"{record}: {passed} of 5 samples passed" in card
        assert f"| `{record}` | {passed} of 5 |" in markdown
        assert f">{record}</a></td><td class=\"num\">{passed} of 5</td>" in html


def test_a_run_of_one_sample_reports_no_stability(tmp_path, openai_server):
    base_url, script = openai_server
    report = evaluate(_job(tmp_path, base_url, 1))
    assert report.stability is None and all(r.sample is None for r in report.rows)


def test_compare_pairs_each_records_pass_rate_over_its_samples(tmp_path, openai_server):
    from docpilot.reports.compare import compare_reports, wilcoxon

    base_url, script = openai_server
    script.enqueue(*_random_replies(seed=1, count=40))
    a = evaluate(_job(tmp_path, base_url, 5))
    job = _job(tmp_path, base_url, 5)
    job.config.model.name = "another-coin"  # another model: its own turns
    b = evaluate(job)
    rates_a, rates_b = _oracle(a.rows)[0], _oracle(b.rows)[0]
    tested = {t.outcome: t for t in compare_reports(a, b).tests}["refusal_correct"]
    assert tested.n == len(RECORDS)
    assert tested.mean_a == pytest.approx(sum(rates_a.values()) / len(RECORDS))
    assert tested.mean_b == pytest.approx(sum(rates_b.values()) / len(RECORDS))
    ids = [r["id"] for r in RECORDS]
    fractional = any(0 < rate < 1 for rate in [*rates_a.values(), *rates_b.values()])
    assert tested.test == ("wilcoxon" if fractional else "mcnemar")
    if fractional:
        assert tested.p_value == wilcoxon([rates_a[i] for i in ids], [rates_b[i] for i in ids])[1]


def test_the_server_runtime_asks_each_record_repeat_times_and_keeps_every_sample(tmp_path, openai_server):
    from docpilot.assistant.workspace import open_workspace
    from docpilot.models.registry import build_model
    from docpilot.server.app import create_app, serve_in_thread

    base_url, script = openai_server
    script.enqueue(*_random_replies(seed=9))
    job = _job(tmp_path, base_url, 3)
    workspace = open_workspace(job.config)
    app = create_app(workspace, build_model(job.config.model, corpus=workspace.corpus), token=None)
    with serve_in_thread(app) as url:
        report = evaluate(job.model_copy(update={"runtime": "server", "url": url}))
    assert len(script.turns) == 3 * len(RECORDS)  # nothing is cached in the server runtime: every sample asked
    assert [(r.id, r.sample) for r in report.rows] == [(r["id"], s) for r in RECORDS for s in range(3)]
    assert all(r.stages_ms.get("model") is not None for r in report.rows if r.error is None)
    rates, flips, _ = _oracle(report.rows)
    assert report.stability.flip_rate == flips


def test_one_sample_per_record_leaves_the_traces_as_they_are():
    from docpilot.assistant.workspace import Trace
    from docpilot.run.road import sample_traces
    from docpilot.schema import GoldenRecord

    traces = [Trace(record=GoldenRecord(id="a", question="q?", gold=["x"], split="dev"))]
    assert sample_traces(traces, 1) is traces and traces[0].sample is None
