"""Retrieval metrics over all rows at once: bit for bit the per-record functions, and pytrec_eval."""

from __future__ import annotations

import math
import random

import pytest
import pytrec_eval
from docpilot.metrics import relevance
from docpilot.metrics.registry import METRICS, RETRIEVAL_METRICS
from docpilot.metrics.retrieval import (
    RANK_DEPTH,
    context_precision_at_k,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
)
from docpilot.metrics.summary import evaluate, summarize

PAGES = [f"guide/p{p}" for p in range(5)] + ["guide/p0/nested", "guide/p0x"]
SECTIONS = [f"{page}#s{s}" for page in PAGES for s in range(3)]


def _entry(rng: random.Random) -> str:
    """A gold entry of any form: section pin (most often), page pin, or 'page#'."""
    form = rng.choices(["section", "page", "page#"], weights=[6, 2, 2])[0]
    page = rng.choice(PAGES)
    if form == "section":
        return rng.choice(SECTIONS)
    return page if form == "page" else page + "#"


def _queries(n: int, seed: int, *, exact_only: bool = False) -> list[tuple[list[str], list[str]]]:
    """Ranked lists with repeats and lengths past the depth, gold with repeats and overlaps."""
    rng = random.Random(seed)
    queries = []
    for _ in range(n):
        gold = [rng.choice(SECTIONS) if exact_only else _entry(rng) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.2:
            gold.append(gold[0])  # a repeated entry counts once
        ranked = [rng.choice(SECTIONS) for _ in range(rng.randint(0, 12))]
        if exact_only:
            ranked = list(dict.fromkeys(ranked))
        queries.append((ranked, gold))
    return queries


def _by_record(ranked: list[str], gold: list[str]) -> dict[str, float]:
    values = {f"recall@{k}": recall_at_k(ranked, gold, k) for k in (1, 3, 5, 8)}
    values["mrr"] = reciprocal_rank(ranked, gold)
    values["ndcg@8"] = ndcg_at_k(ranked, gold, 8)
    values["context_precision@5"] = context_precision_at_k(ranked, gold, 5)
    return values


@pytest.mark.parametrize("exact_only", [False, True])
def test_every_value_equals_the_per_record_function_to_the_last_bit(exact_only: bool) -> None:
    queries = _queries(3000, seed=11 + exact_only, exact_only=exact_only)
    scores = relevance.retrieval_scores(relevance.judge(queries))
    assert sorted(scores) == sorted(RETRIEVAL_METRICS)
    for i, (ranked, gold) in enumerate(queries):
        for metric, expected in _by_record(ranked, gold).items():
            assert scores[metric][i].item() == expected, (metric, ranked, gold)


def test_the_summary_equals_the_per_row_path_to_the_last_bit(make_row) -> None:
    queries = _queries(2000, seed=5)
    rows = [make_row(f"p{i}", gold=gold, retrieved=ranked) for i, (ranked, gold) in enumerate(queries)]
    rows += [make_row("n1", kind="negative", retrieved=SECTIONS[:3]), make_row("t1", kind="attack")]
    summary, counts = summarize(rows, gate_only=True)
    for metric in RETRIEVAL_METRICS:
        assert (summary[metric], counts[metric]) == evaluate(METRICS[metric], rows)


def test_the_summary_equals_pytrec_eval_to_the_last_bit(make_row) -> None:
    queries = _queries(2000, seed=7, exact_only=True)
    rows = [make_row(f"q{i}", gold=gold, retrieved=ranked) for i, (ranked, gold) in enumerate(queries)]
    qrels = {row.id: {g: 1 for g in row.gold} for row in rows}
    run = {row.id: {s: float(len(row.retrieved) - r) for r, s in enumerate(row.retrieved)} for row in rows}
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"recall.1,3,5,8", "recip_rank", "ndcg_cut.8"}).evaluate(
        {qid: dict(list(ranked.items())[:RANK_DEPTH]) for qid, ranked in run.items()}
    )
    summary, _ = summarize(rows, gate_only=True)
    for ours, theirs in [("recall@1", "recall_1"), ("recall@3", "recall_3"), ("recall@5", "recall_5"),
                         ("recall@8", "recall_8"), ("mrr", "recip_rank"), ("ndcg@8", "ndcg_cut_8")]:
        assert summary[ours] == math.fsum(v[theirs] for v in reference.values()) / len(reference), ours


def test_no_records_give_empty_arrays() -> None:
    scores = relevance.retrieval_scores(relevance.judge([]))
    assert all(len(values) == 0 for values in scores.values())


def test_a_repeated_section_is_found_once() -> None:
    scores = relevance.retrieval_scores(relevance.judge([(["a#x", "a#x", "b#y"], ["a#x", "b#y"])]))
    assert scores["recall@1"][0] == 0.5
    assert scores["recall@3"][0] == 1.0
    assert scores["ndcg@8"][0] == ndcg_at_k(["a#x", "a#x", "b#y"], ["a#x", "b#y"], 8)
