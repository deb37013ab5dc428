"""The all-corpora retrieval benchmark, and the golden sets it reads from the real docs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import retrieval_suite as suite
from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import load_corpus
from docpilot.golden.loading import load_golden, validate_against_corpus
from docpilot.retrieval.rankers import Retriever
from docpilot.schema import GoldenRecord
from tests.conftest import ROOT, SHARED_DATA

pytestmark = pytest.mark.slow

REAL = [s for s in suite.suites(SHARED_DATA) if s.name != "demo"]


def _gate_only_summary(docs, golden, split: str) -> dict:
    completed = subprocess.run(
        [sys.executable, "-m", "docpilot", "eval", "--gate-only", "--docs", str(docs), "--golden", str(golden),
         "--split", split, "--orchestrator", "inline", "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    return json.loads(completed.stdout)["summary"]


@pytest.fixture(scope="module")
def without_data(tmp_path_factory) -> tuple[Path, dict]:
    """The suite run once with the default settings on a data folder that holds none of the shared corpora:
    (that folder, the result). Only the demo corpus, which lives in the project, is measured."""
    data = tmp_path_factory.mktemp("no-shared-data")
    return data, suite.run(data)


def test_missing_corpora_are_reported_absent_and_the_demo_still_runs(without_data):
    data, result = without_data
    demo, fastapi, prefect = result["corpora"]
    assert fastapi["absent"].startswith(str(data)) and prefect["absent"].startswith(str(data))
    assert result["scifact_test_ndcg@10"] == {"absent": str(data / "beir-scifact")}
    assert set(demo["splits"]) == {"dev", "test"}
    text = suite.table(result)
    assert "| fastapi | – | absent:" in text and "SciFact: absent" in text
    assert "| demo (" in text and "| bm25 recall@8 | MRR | hybrid + static (default) recall@8" in text
    assert set(demo["splits"]["dev"]) == {"default", "bm25", "hybrid_static", "hybrid_minilm", "baseline", "ceiling"}
    assert demo["splits"]["dev"]["hybrid_minilm"] is None and "not measured (--minilm)" in text
    assert set(demo["splits"]["dev"]["ceiling"]) == {"default"}
    assert "| demo | dev | default |" in text and "| fastapi | dev |" not in text.split("Ceiling:")[1]


def _ranked(found: dict[int, str], length: int = 100) -> list[str]:
    """A list of ``length`` filler sections with the given ones at the given 1-based ranks."""
    return [found.get(rank, f"filler/{rank}#s") for rank in range(1, length + 1)]


def test_the_ceiling_is_what_reordering_the_first_sections_can_reach():
    two = GoldenRecord(id="two", question="q", gold=["guide#setup", "reference#"])
    late = GoldenRecord(id="late", question="q", gold=["faq#cache"])
    lists = {"two": _ranked({30: "guide#setup", 60: "reference#intro"}), "late": _ranked({101: "faq#cache"}, 120)}
    figures = {d: suite.ceiling_figures([two, late], lambda r: lists[r.id], d) for d in (20, 50, 100)}
    assert figures[20] == {"recall@8": 0.0, "mrr": 0.0}
    assert figures[50] == {"recall@8": 0.25, "mrr": 0.5}  # one of two entries, for one of two records
    assert figures[100] == {"recall@8": 0.5, "mrr": 0.5}  # the page pin matched by its section, rank 101 still out
    negative = GoldenRecord(id="neg", question="q", gold=[])
    assert suite.ceiling_figures([two, late, negative], lambda r: lists[r.id], 100) == figures[100]


def test_the_ceiling_allows_eight_places_for_a_record_with_more_gold_entries():
    many = GoldenRecord(id="many", question="q", gold=[f"page#s{i}" for i in range(10)])
    ranked = _ranked({i + 1: f"page#s{i}" for i in range(10)})
    assert suite.ceiling_figures([many], lambda r: ranked, 20) == {"recall@8": 0.8, "mrr": 1.0}


def test_the_demo_ceiling_bounds_the_default_figures_and_grows_with_depth(without_data):
    demo = without_data[1]["corpora"][0]
    for split, figures in demo["splits"].items():
        ceiling, ours = figures["ceiling"]["default"], figures["default"]
        for key in ("recall@8", "mrr"):
            by_depth = [ceiling[str(d)][key] for d in suite.DEPTHS]
            assert ours[key] <= by_depth[0] and by_depth == sorted(by_depth), (split, key)


def test_the_hybrid_column_is_score_fused_hybrid_retrieval_with_the_static_embedder(without_data):
    demo = without_data[1]["corpora"][0]
    corpus = load_corpus(ROOT / "docs")
    hybrid = Retriever(corpus, RetrievalConfig(retriever="hybrid", embedder="static", fusion="scores"))
    dev = [r for r in load_golden(ROOT / "evals" / "golden.yaml") if r.split == "dev"]
    expected = suite.rank_figures(dev, lambda r: [h.section_id for h in hybrid.search(suite.query_of(r), scope=r.scope)])
    assert demo["splits"]["dev"]["hybrid_static"] == expected
    assert demo["splits"]["dev"]["default"] == expected  # the default settings are hybrid + static
    bm25 = Retriever(corpus, RetrievalConfig(retriever="bm25"))
    ranked = suite.rank_figures(dev, lambda r: [h.section_id for h in bm25.search(suite.query_of(r), scope=r.scope)])
    assert demo["splits"]["dev"]["bm25"] == ranked


def test_the_demo_figures_are_the_gate_only_figures(without_data):
    demo = without_data[1]["corpora"][0]
    for split in ("dev", "test"):
        summary = _gate_only_summary(ROOT / "docs", ROOT / "evals" / "golden.yaml", split)
        ours = demo["splits"][split]["default"]
        assert ours["recall@8"] == pytest.approx(summary["recall@8"], abs=1e-12)
        assert ours["mrr"] == pytest.approx(summary["mrr"], abs=1e-12)


def test_overrides_reach_every_corpus(without_data):
    data, result = without_data
    plain = result["corpora"][0]["splits"]["dev"]["default"]
    bare = suite.run(data, {"title_weight": 0, "description_weight": 0})["corpora"][0]["splits"]["dev"]["default"]
    assert bare != plain


def test_the_baseline_keeps_scope_and_sections_unique():
    corpus = load_corpus(ROOT / "docs")
    baseline = suite.PlainBM25(corpus)
    record = next(r for r in load_golden(ROOT / "evals" / "golden.yaml") if r.gold)
    everywhere = baseline.rank(record)
    assert len(everywhere) == len(set(everywhere)) > 8
    scoped = baseline.rank(record.model_copy(update={"scope": ["metrics"]}))
    assert scoped and all(s.startswith("metrics/") or s.startswith("metrics#") for s in scoped)


@pytest.mark.parametrize("real", REAL, ids=[s.name for s in REAL])
def test_the_real_docs_golden_sets_resolve_and_are_big_enough(real):
    if not real.docs.is_dir():
        pytest.skip(f"{real.docs} is absent (the shared data lives beside the repository)")
    records = load_golden(real.golden)
    validate_against_corpus(records, load_corpus(real.docs), real.golden)
    for split in ("dev", "test"):
        chosen = [r for r in records if r.split == split]
        assert sum(1 for r in chosen if r.gold) >= 30
        assert sum(1 for r in chosen if not r.gold) >= 7
    assert sum(1 for r in records if r.gold) >= 60 and sum(1 for r in records if not r.gold) >= 15
    # Most positives were pinned to one exact section by their writer; the rest to two,
    # or a whole page. The gold audit added entries to some (tagged pooled), never
    # removed any, and only from the plain baseline's top eight.
    positives = [r for r in records if r.gold]
    single = [r for r in positives if len(r.gold) == 1 and not r.gold[0].endswith("#")]
    pooled = [r for r in positives if "pooled" in r.tags]
    pinned_alone = [r for r in pooled if "two-gold" not in r.tags and not r.gold[0].endswith("#")]
    assert len(single) + len(pinned_alone) > 0.7 * len(positives)
    assert all(len(r.gold) >= 2 for r in pooled)
    assert len(pooled) < 0.25 * len(positives)


@pytest.mark.parametrize("real", REAL, ids=[s.name for s in REAL])
def test_the_defaults_beat_the_plain_baseline_on_real_docs(real):
    if not real.docs.is_dir():
        pytest.skip(f"{real.docs} is absent (the shared data lives beside the repository)")
    measured = suite.measure_suite(real, RetrievalConfig())
    for split, figures in measured["splits"].items():
        ours, baseline = figures["default"], figures["baseline"]
        assert ours["recall@8"] >= baseline["recall@8"], split
        # The gold audit judged only the baseline's top eight, which lifts the baseline's
        # MRR more than the default's (on Prefect dev by 0.06 against 0.02): a tie within
        # that bias is a tie.
        assert ours["mrr"] >= baseline["mrr"] - 0.005, split
