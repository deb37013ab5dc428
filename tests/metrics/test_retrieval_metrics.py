"""Retrieval metrics: hand-computed records, and differential checks against trec_eval."""

from __future__ import annotations

import itertools
import math
import random

import pytest
import pytrec_eval
from docpilot.metrics.gold import matches, unique
from docpilot.metrics.registry import METRICS, RETRIEVAL_METRICS
from docpilot.metrics.retrieval import (
    RANK_DEPTH,
    context_precision_at_k,
    first_relevant_rank,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
)
from docpilot.metrics.summary import summarize

# Section pin, page pin reached through a nested page and then the page itself.
GOLD = ["guide/auth#request", "reference/cli"]
RANKED = [
    "intro#", "guide/auth#request", "faq#tokens", "reference/cli/flags#port",
    "reference/cli#eval", "faq#", "guide/authz#roles", "guide/auth#response",
]


@pytest.mark.parametrize(("k", "expected"), [(1, 0.0), (3, 0.5), (5, 1.0), (8, 1.0)])
def test_recall_at_k_by_hand(k: int, expected: float) -> None:
    assert recall_at_k(RANKED, GOLD, k) == expected


def test_reciprocal_rank_by_hand() -> None:
    assert reciprocal_rank(RANKED, GOLD) == 0.5
    assert reciprocal_rank(["a#", "b#", "guide/auth#request"], GOLD) == pytest.approx(1 / 3)
    assert reciprocal_rank(["a#", "b#"], GOLD) == 0.0
    assert reciprocal_rank([], GOLD) == 0.0


def test_ndcg_by_hand() -> None:
    # request earns at rank 2, reference/cli first at rank 4 (its nested page).
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3)
    assert ndcg_at_k(RANKED, GOLD, 8) == pytest.approx(dcg / idcg)


def test_ndcg_credits_a_page_pin_once_however_many_sections_cover_it() -> None:
    gold = ["guide/auth", "reference/cli#eval"]
    ranked = ["guide/auth#a", "guide/auth#b", "guide/auth#c", "reference/cli#eval"]
    expected = (1 + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(ranked, gold, 8) == pytest.approx(expected)


def test_ndcg_lets_one_section_serve_one_overlapping_entry_only() -> None:
    # guide/auth#request matches both entries; alone it earns one gain, so the
    # score is below 1 and never above it.
    gold = ["guide/auth", "guide/auth#request"]
    assert ndcg_at_k(["guide/auth#request"], gold, 8) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # A second section of the page serves the page pin, whichever order they come in.
    assert ndcg_at_k(["guide/auth#request", "guide/auth#other"], gold, 8) == pytest.approx(1.0)
    assert ndcg_at_k(["guide/auth#other", "guide/auth#request"], gold, 8) == pytest.approx(1.0)


def test_ndcg_ideal_is_capped_at_k() -> None:
    gold = [f"p#{i}" for i in range(10)]
    ranked = [f"p#{i}" for i in range(8)]
    assert ndcg_at_k(ranked, gold, 8) == pytest.approx(1.0)


def test_page_only_pin_ignores_nested_pages() -> None:
    gold = ["guide/auth#"]
    ranked = ["guide/auth/tokens#x", "guide/auth#y"]
    assert recall_at_k(ranked, gold, 1) == 0.0
    assert recall_at_k(ranked, gold, 3) == 1.0
    assert reciprocal_rank(ranked, gold) == 0.5


def test_repeated_gold_entries_count_once() -> None:
    assert recall_at_k(["a#x"], ["a#x", "a#x", "b#y"], 8) == 0.5
    assert ndcg_at_k(["a#x", "b#y"], ["a#x", "a#x", "b#y"], 8) == pytest.approx(1.0)


def test_context_precision_by_hand() -> None:
    # Relevant at ranks 2, 4 and 5: mean of 1/2, 2/4 and 3/5.
    assert context_precision_at_k(RANKED, GOLD, 5) == pytest.approx((0.5 + 0.5 + 0.6) / 3)
    assert context_precision_at_k(["guide/auth#request", "x#"], GOLD, 5) == 1.0
    assert context_precision_at_k(["x#", "y#"], GOLD, 5) == 0.0
    # A hit at rank 6 is outside the window.
    late_hit = ["a#", "b#", "c#", "d#", "e#", "guide/auth#request"]
    assert context_precision_at_k(late_hit, GOLD, 5) == 0.0


def _random_queries(n: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """Ranked lists of distinct sections with exact section pins as gold."""
    rng = random.Random(seed)
    pool = [f"page{p}#s{s}" for p in range(12) for s in range(4)]
    queries = []
    for _ in range(n):
        gold = rng.sample(pool, rng.randint(1, 10))
        # Bias the list towards gold so that every rank position sees hits.
        candidates = unique(rng.sample(gold, rng.randint(0, len(gold))) + rng.sample(pool, 12))
        ranked = rng.sample(candidates, min(len(candidates), rng.randint(1, 8)))
        queries.append((ranked, gold))
    return queries


def test_exact_pins_agree_with_trec_eval_on_random_lists() -> None:
    queries = _random_queries(1200, seed=20240611)
    qrels = {f"q{i}": {g: 1 for g in gold} for i, (_, gold) in enumerate(queries)}
    # trec_eval orders by score, so descending scores reproduce the ranking.
    run = {
        f"q{i}": {section: float(len(ranked) - r) for r, section in enumerate(ranked)}
        for i, (ranked, _) in enumerate(queries)
    }
    measures = {"recall.1,3,5,8", "recip_rank", "ndcg_cut.8"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
    reference = evaluator.evaluate(run)
    assert len(reference) == len(queries)
    for i, (ranked, gold) in enumerate(queries):
        expected = reference[f"q{i}"]
        for k in (1, 3, 5, 8):
            assert recall_at_k(ranked, gold, k) == pytest.approx(expected[f"recall_{k}"], abs=1e-9)
        assert reciprocal_rank(ranked, gold) == pytest.approx(expected["recip_rank"], abs=1e-9)
        assert ndcg_at_k(ranked, gold, 8) == pytest.approx(expected["ndcg_cut_8"], abs=1e-9)


def _brute_force_dcg(ranked: list[str], gold: list[str], k: int) -> float:
    """Best DCG over every way of giving each entry a distinct matching rank (or none)."""
    entries = unique(gold)
    top = ranked[:k]
    options = [[None, *(r for r, s in enumerate(top) if matches(s, e))] for e in entries]
    best = 0.0
    for choice in itertools.product(*options):
        used = [r for r in choice if r is not None]
        if len(used) == len(set(used)):
            best = max(best, sum(1 / math.log2(r + 2) for r in used))
    return best


def test_overlapping_pins_get_the_best_assignment_found_by_brute_force() -> None:
    rng = random.Random(7)
    pages = ["a", "a/b", "a/b/c", "d", "d/e"]
    anchors = ["", "x", "y"]
    sections = [f"{p}#{a}" for p in pages for a in anchors]
    entries = [*pages, *(f"{p}#" for p in pages), *sections]
    for _ in range(400):
        gold = rng.sample(entries, rng.randint(1, 4))
        ranked = rng.sample(sections, rng.randint(1, 8))
        idcg = sum(1 / math.log2(i + 1) for i in range(1, min(len(unique(gold)), 8) + 1))
        score = ndcg_at_k(ranked, gold, 8)
        assert score == pytest.approx(_brute_force_dcg(ranked, gold, 8) / idcg)
        assert 0.0 <= score <= 1.0 + 1e-12


def test_every_reported_retrieval_metric_reads_the_top_8_only(make_row) -> None:
    # Regression: with retrieval.top_k 20, MRR read all twenty ranks (MRR@20).
    ranked = [f"x#{i}" for i in range(11)] + ["guide/auth#request"]
    gold = ["guide/auth#request"]
    summary, _ = summarize([make_row("p1", gold=gold, retrieved=ranked)], gate_only=True)
    assert all(value == 0.0 for value in summary.values()), summary
    assert summarize([make_row("p1", gold=gold, retrieved=ranked[4:])], gate_only=True)[0]["mrr"] == 1 / RANK_DEPTH
    for metric in RETRIEVAL_METRICS:
        assert METRICS[metric].score(make_row("p1", gold=gold, retrieved=ranked)) == 0.0, metric
    assert reciprocal_rank(ranked, gold) == 0.0 and first_relevant_rank(ranked, gold) is None
    assert first_relevant_rank(ranked[4:], gold) == RANK_DEPTH


def test_the_formulas_take_cutoffs_past_8_as_trec_eval_does() -> None:
    # Benchmarks ask for nDCG@10 and recall@100; the cutoff of the report is the registry's.
    queries = [(ranked + [f"extra#{i}" for i in range(6)] + gold[:1], gold)
               for ranked, gold in _random_queries(300, seed=99)]
    qrels = {f"q{i}": {g: 1 for g in gold} for i, (_, gold) in enumerate(queries)}
    run = {f"q{i}": {s: float(len(r) - j) for j, s in enumerate(dict.fromkeys(r))} for i, (r, _) in enumerate(queries)}
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.20"}).evaluate(run)
    for i, (ranked, gold) in enumerate(queries):
        ranked = list(dict.fromkeys(ranked))
        assert ndcg_at_k(ranked, gold, 10) == pytest.approx(reference[f"q{i}"]["ndcg_cut_10"], abs=1e-12)
        assert recall_at_k(ranked, gold, 20) == reference[f"q{i}"]["recall_20"]
    assert reciprocal_rank(["a#", "b#", *[f"c#{i}" for i in range(8)], "gold#x"], ["gold#x"], k=20) == 1 / 11


def test_a_ranking_that_names_pages_is_read_at_page_level() -> None:
    from docpilot.metrics.retrieval import as_read, names_pages

    assert not names_pages(["guide/auth#tokens", "blog/post#"])  # an outside page keeps its '#'
    assert names_pages(["guide/auth#tokens", "guide/deploy"])
    assert as_read(["a#x"], ["a#x"]) == (["a#x"], ["a#x"])
    assert as_read(["guide/auth", "guide/auth#tokens", "guide/deploy#ci"], ["guide/auth#tokens", "guide/auth#(top)",
                                                                          "guide"]) == (
        ["guide/auth", "guide/deploy"], ["guide/auth#", "guide"])
    # only the top 8 are read, then each page once
    assert as_read([f"p{i}" for i in range(10)], ["p9#x"]) == ([f"p{i}" for i in range(8)], ["p9#"])


def test_the_first_gold_rank_is_read_as_the_metrics_read_the_ranking() -> None:
    from docpilot.metrics.retrieval import first_found

    assert first_found(["guide/auth#x", "guide/auth#tokens"], ["guide/auth#tokens"]) == 2
    assert first_found(["index", "guide/auth#x", "guide/auth"], ["guide/auth#tokens"]) == 2  # the page, 2nd of 2
    assert first_found(["index#a"], ["guide#"]) is None


def test_the_first_relevant_rank_by_equality_of_pins_is_the_rank_matching_finds() -> None:
    import random

    from docpilot.metrics.gold import is_relevant
    from docpilot.metrics.retrieval import first_relevant_rank

    ids = ["a#x", "a#y", "a", "a#", "a/b#x", "b#x", "b#(top)", "b#", "c#z"]
    rng = random.Random(3)
    for _ in range(2000):
        ranked, gold = rng.sample(ids, rng.randint(0, 8)), rng.sample(ids, rng.randint(1, 3))
        by_matching = next((r for r, s in enumerate(ranked[:8], start=1) if is_relevant(s, gold)), None)
        assert first_relevant_rank(ranked, gold) == by_matching, (ranked, gold)
