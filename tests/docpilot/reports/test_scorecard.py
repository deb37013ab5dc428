"""The terminal scorecard: n beside each rate, n/a for null, gates with records, leaks verbatim."""

from __future__ import annotations

import io

from rich.console import Console

from docpilot.reports.report import load_report, rescore
from docpilot.reports.scorecard import format_gate_value, format_value, render_scorecard
from docpilot.schema import GateResult, LeakFound
from tests.conftest import DATA


def render(report) -> str:
    out = io.StringIO()
    render_scorecard(report, Console(file=out, width=160), path="r.json")
    return out.getvalue()


def test_values_are_formatted_by_kind():
    assert format_value("recall@8", None) == "n/a"
    assert format_value("hallucinated_citations", 2.0) == "2"
    assert format_value("latency_p95", 1234.4) == "1,234 ms" and format_value("stage_embed_p50", 0.25) == "0.25 ms"
    assert format_value("mrr", 0.5) == "0.500"


def _gate(metric: str, op: str, threshold: float, value: float) -> GateResult:
    return GateResult(metric=metric, op=op, threshold=threshold, value=value, passed=False)


# Regression: a failing 0.7996 against '>= 0.8' printed as 0.800, which reads as a pass.
def test_a_gate_value_prints_with_the_digits_that_show_why_it_failed():
    assert format_gate_value(_gate("recall@8", ">=", 0.8, 0.7996)) == "0.7996"
    assert format_gate_value(_gate("recall@8", ">=", 0.8, 0.5)) == "0.500"
    assert format_gate_value(_gate("latency_p95", "<=", 4000, 4000.4)) == "4,000.4 ms"
    assert format_gate_value(_gate("cost_usd", "<=", 0.5, 0.50001)) == "USD 0.50001"
    assert format_gate_value(_gate("errors", "==", 0, 2)) == "2"
    report = rescore(load_report(DATA / "reports" / "small.json"))
    text = render(report.model_copy(update={"gates": [_gate("recall@8", ">=", 0.8, 0.7996)]}))
    assert "FAIL  recall@8 >= 0.8  (value 0.7996)" in text


def test_the_scorecard_shows_n_bounds_gates_and_leaks():
    report = rescore(load_report(DATA / "reports" / "small.json"))
    report = report.model_copy(update={"summary": {**report.summary, "no_answer_precision": None}, "leaks": [
        LeakFound(record="probe-1", forbidden="re:sk-[A-Za-z0-9]{16,}", text="sk-[live]ABCDEFGHIJKLMNOP", where="reasoning"),
    ]})
    text = render(report)
    assert "over_refusal_answer" in text and "≤ 0.502 at 95 %" in text  # 1 of 6 positives refused by the model
    assert next(line for line in text.splitlines() if "no_answer_precision" in line).split("│")[2].strip() == "n/a"
    assert "leaks (1 probes):" in text and "sk-[live]ABCDEFGHIJKLMNOP" in text and "in the reasoning" in text
    assert "FAIL  hallucinated_citations == 0  (value 1)  records: pos-invented" in text
    assert "FAIL  errors == 0  (value 1)  records: pos-error" in text
    assert "pass  scope_violations == 0  (value 0)" in text
    # small.json holds an invented citation and an errored record: the run fails, whatever its file said.
    assert "verdict: fail" in text and "report: r.json" in text


def test_metrics_the_set_cannot_produce_are_left_off_with_one_line():
    report = rescore(load_report(DATA / "reports" / "small.json"))
    text = render(report)
    assert "attack_success_rate" not in text.split("left off")[0]
    assert ("left off, as a golden run has no attack probes to measure them on: attack_success_rate, "
            "refusal_accuracy, safe_answer_rate") in " ".join(text.split())
    attack = report.model_copy(update={"set": "adversarial"})
    text = " ".join(render(attack).split())
    assert "an attack run has no golden questions" in text and "recall@8" in text.split("left off")[1]
    assert "hallucinated_citations" in text.split("left off")[0]  # a gate reads it: always shown


def test_a_table_per_tag_shows_the_headline_metrics_of_each_slice():
    report = load_report(DATA / "reports" / "small.json")
    rows = [r.model_copy(update={"tags": ["auth"] if "auth" in " ".join(r.gold) else ["other"]})
            for r in report.rows]
    report = rescore(report.model_copy(update={"rows": rows}))
    text = render(report)
    assert "by tag" in text
    auth = next(line for line in text.splitlines() if line.split("│")[1:2] and line.split("│")[1].strip() == "auth")
    cells = [c.strip() for c in auth.split("│")[1:-1]]
    assert cells[1] == str(report.slices["auth"].records)
    assert cells[2] == f"{report.slices['auth'].summary['recall@8']:.3f}"

def test_the_verdict_line_gives_the_whole_command_beside_the_stages_and_why_that_orchestrator():
    report = rescore(load_report(DATA / "reports" / "small.json")).model_copy(update={
        "wall_ms": 96.0, "command_ms": 1180.0, "orchestrator": "inline",
        "orchestrator_reason": "no Prefect API is configured", "orchestrator_other": "start `prefect server start`",
    })
    text = render(report)
    assert "orchestrator inline, command 1,180 ms, stages 96 ms)" in text
    assert "orchestrator: inline, because no Prefect API is configured; start `prefect server start`" in text
    out = io.StringIO()
    render_scorecard(report, Console(file=out, width=160), command_ms=7000.0)
    assert "command 7,000 ms, stages 96 ms" in out.getvalue()


def test_a_percentile_says_how_many_of_its_turns_came_from_the_cache():
    report = rescore(load_report(DATA / "reports" / "small.json"))
    rows = [row.model_copy(update={"cached": ["retrieve", "model"]}) for row in report.rows]
    replayed = rescore(report.model_copy(update={"rows": rows}))
    n = replayed.counts["latency_p50"]
    assert n > 0 and replayed.replayed["latency_p50"] == n
    assert f"{n} of {n} from the cache" in render(replayed)

def test_tokens_and_cost_read_as_counts_and_dollars_with_the_cache_apart() -> None:
    from docpilot.reports.scorecard import format_value, usage_line

    assert format_value("prompt_tokens", 12345) == "12,345" and format_value("cost_usd_cached", 0.00125) == "USD 0.0013"
    summary = {"prompt_tokens": 1400, "completion_tokens": 60, "prompt_tokens_cached": 400,
               "completion_tokens_cached": 10, "cost_usd": 0.0035, "cost_usd_cached": 0.001}
    assert usage_line(summary) == (
        "tokens: 1,400 prompt + 60 completion (this run 1,000 + 50, from the cache 400 + 10); "
        "cost USD 0.0035 (this run 0.0025, from the cache 0.0010)"
    )
    assert usage_line({"prompt_tokens": None, "completion_tokens": None}) is None


def test_the_scorecard_says_which_retriever_ranked_the_sections():
    report = rescore(load_report(DATA / "reports" / "small.json"))
    hybrid = {"retriever": "hybrid", "embedder": "static", "fusion": "scores"}
    text = render(report.model_copy(update={"config": {**report.config, "retrieval": hybrid}}))
    assert "retrieval: hybrid, bm25 + static embedder, scores fused" in text
    text = render(report.model_copy(update={"config": {**report.config, "retrieval": {"retriever": "bm25"}}}))
    assert "retrieval: bm25\n" in text
    assert "retrieval:" not in render(report.model_copy(update={"config": {}}))


# Regression: the verdict read PASS over "17 of 20 records with a failing outcome", and nothing said so;
# then the terminal counted 23 failing records of a run whose HTML report listed 47.
def test_the_verdict_counts_the_failing_records_the_readouts_and_improve_list():
    from docpilot.readout.outcomes import failing_ids, prepare_readout

    report = rescore(load_report(DATA / "reports" / "small.json"))
    failed = failing_ids(report)
    assert failed, "the small report has records that fail an outcome"
    assert failed == [record.row.id for record in prepare_readout(report).failing]
    out = io.StringIO()
    render_scorecard(report, Console(file=out, width=160), failing=failed)
    verdict = next(line for line in out.getvalue().splitlines() if line.startswith("verdict:"))
    assert f"{len(failed)} of {len(report.rows)} records failed an outcome" in verdict
    assert "docpilot improve" in verdict


# Regression: every citation linked to init's https://example.com/docs/ and nothing said so.
def test_links_to_inits_placeholder_site_are_warned_of_once_with_the_setting_to_change():
    report = rescore(load_report(DATA / "reports" / "small.json"))
    config = {**report.config, "corpus": {**(report.config.get("corpus") or {}),
                                          "base_url": "https://example.com/docs/"}}
    text = render(report.model_copy(update={"config": config}))
    assert text.count("the placeholder `docpilot init` wrote") == 1
    assert "set corpus.base_url" in text
    published = {**config, "corpus": {**config["corpus"], "base_url": "https://python-poetry.org/docs/"}}
    assert "placeholder" not in render(report.model_copy(update={"config": published}))
