"""A LangChain RAG app served by LangServe, as the tutorials write it, measured as a target.

The app (``tests.support.langserve_app``) returns LangChain Documents whose metadata holds
the file path the loader read and the headings the splitter cut at, never an anchor. A
config written from docs/targets.md alone must give a report: page-level figures from the
path, section-level ones once ``source_ids.heading`` reads the headings, each equal to
pytrec_eval over what the app returned (asked of its retriever in this process), and the
same ranking from ``/invoke`` and ``/stream``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytrec_eval
import yaml
from click.testing import CliRunner
from docpilot.metrics.registry import METRICS

from docpilot.cli import main
from docpilot.schema import Row

pytestmark = pytest.mark.slow
pytest.importorskip("langserve")

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
GOLDEN = ROOT / "evals" / "golden.yaml"
HEADINGS = '[metadata."Header 1", metadata."Header 2", metadata."Header 3"]'


@pytest.fixture(scope="module")
def app() -> Iterator[str]:
    from tests.support.langserve_app import serving

    with serving(DOCS) as base:
        yield base


def _targets(base: str, *, heading: bool) -> dict:
    """The two routes as docs/targets.md writes them for a tutorial app."""
    source_ids = {"prefix": f"{DOCS}/"} | ({"heading": HEADINGS} if heading else {})
    return {
        "rag-invoke": {"url": f"{base}/rag/invoke", "body": {"input": {"question": "{question}"}},
                       "reply": {"answer": "output.answer", "sources": "output.context",
                                 "source_id": "metadata.source"},
                       "source_ids": source_ids},
        "rag-stream": {"url": f"{base}/rag/stream", "body": {"input": {"question": "{question}"}},
                       "reply": {"kind": "sse", "delta_event": "data", "answer": "answer", "sources": "context",
                                 "source_id": "metadata.source", "end_event": "end"},
                       "source_ids": source_ids},
    }


def _run(tmp_path: Path, base: str, *, heading: bool) -> dict:
    config = tmp_path / "docpilot.yaml"
    config.write_text(yaml.safe_dump({
        "corpus": {"docs": str(DOCS)}, "golden": str(GOLDEN), "cache_dir": str(tmp_path / "cache"),
        "reports_dir": str(tmp_path / "reports"), "targets": _targets(base, heading=heading),
        "variants": {"invoke": {"target": "rag-invoke"}, "stream": {"target": "rag-stream"}}}))
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["eval", "--orchestrator", "inline", "--config", str(config), "--split", "dev",
                                       "--runtime", "server", "--out", str(out)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    assert "no section" not in result.output
    return json.loads(out.read_text())


def _oracle(rows: list[dict], *, pages: bool) -> dict[str, dict[str, float]]:
    """pytrec_eval over what the app's own retriever returns for each question, read in this process."""
    from tests.support.langserve_app import retrieve, section_ids

    qrels, run = {}, {}
    for row in rows:
        ranked = section_ids(retrieve(DOCS, row["question"]), DOCS)[:8]
        gold = row["gold"]
        if pages:
            ranked = list(dict.fromkeys(s.partition("#")[0] for s in ranked))
            gold = list(dict.fromkeys(g.partition("#")[0] for g in gold))
        qrels[row["id"]] = {g: 1 for g in gold}
        run[row["id"]] = {s: float(len(ranked) - i) for i, s in enumerate(ranked)} or {"none#": 0.0}
    return pytrec_eval.RelevanceEvaluator(qrels, {"recall.1,8", "recip_rank", "ndcg_cut.8"}).evaluate(run)


def _agree(report: dict, *, pages: bool, exact: bool) -> None:
    for variant in report["variants"]:
        rows = [r for r in report["rows"] if r["variant"] == variant["name"] and r["kind"] == "positive"]
        if exact:  # pytrec_eval matches ids exactly: only records whose gold pins sections one by one
            rows = [r for r in rows if all("#" in g and not g.endswith("#") for g in r["gold"])]
        assert len(rows) >= 10
        trec = _oracle(rows, pages=pages)
        for name, ours in (("recall@1", "recall_1"), ("recall@8", "recall_8"), ("mrr", "recip_rank"),
                           ("ndcg@8", "ndcg_cut_8")):
            mine = [METRICS[name].score(Row.model_validate(r)) for r in rows]
            theirs = [trec[r["id"]][ours] for r in rows]
            assert mine == pytest.approx(theirs, abs=1e-12), (variant["name"], name)


def test_the_tutorial_app_by_its_file_paths_is_measured_at_page_level(app, tmp_path):
    report = _run(tmp_path, app, heading=False)
    by_variant = {v: {r["id"]: r for r in report["rows"] if r["variant"] == v} for v in ("invoke", "stream")}
    assert {i: r["retrieved"] for i, r in by_variant["invoke"].items()} == {
        i: r["retrieved"] for i, r in by_variant["stream"].items()}  # invoke and stream rank the same
    ranked = [s for r in by_variant["invoke"].values() for s in r["retrieved"]]
    assert ranked and all("#" not in s for s in ranked)  # each Document names its page
    assert all(not r["outside_docs"] for r in report["rows"])
    _agree(report, pages=True, exact=False)


def test_the_tutorial_app_read_by_its_headings_is_measured_at_section_level(app, tmp_path):
    from tests.support.langserve_app import retrieve, section_ids

    report = _run(tmp_path, app, heading=True)
    rows = [r for r in report["rows"] if r["variant"] == "invoke"]
    for row in rows:
        assert row["retrieved"] == list(dict.fromkeys(section_ids(retrieve(DOCS, row["question"]), DOCS)))[:8]
    stream = {r["id"]: r["retrieved"] for r in report["rows"] if r["variant"] == "stream"}
    assert {r["id"]: r["retrieved"] for r in rows} == stream
    _agree(report, pages=False, exact=True)


def test_golden_check_names_the_granularity_and_warns_that_unmarked_answers_count_unlinked(app, tmp_path):
    lines = {}
    for heading in (False, True):
        config = tmp_path / f"check-{heading}.yaml"
        config.write_text(yaml.safe_dump({"corpus": {"docs": str(DOCS)}, "golden": str(GOLDEN),
                                          "targets": _targets(app, heading=heading)}))
        result = CliRunner().invoke(main, ["golden", "check", "--config", str(config), "--target", "rag-invoke"],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        lines[heading] = " ".join(result.output.split())
    assert "granularity: pages;" in lines[False] and "granularity: sections;" in lines[True]
    assert "shows sources but links none" in lines[True] and "map reply.citations" in lines[True]
