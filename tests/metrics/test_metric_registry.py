"""The metric registry: canonical ids, retrieval subset, per-stage ids, unknown names."""

from __future__ import annotations

import pytest
from docpilot.metrics import registry

from docpilot.errors import InputError

# DESIGN §5, in report order, with unlinked negatives on their own line after unlinked answers
# and the count of errored records beside the other counts.
CANONICAL = [
    "recall@1", "recall@3", "recall@5", "recall@8", "mrr", "ndcg@8", "context_precision@5",
    "answer_f1", "identifier_recall", "language_match", "citation_precision",
    "citation_recall", "hallucinated_citations", "scope_violations", "sources_outside_docs", "unlinked_answers",
    "unlinked_negatives", "errors", "negatives_caught", "over_refusal_gate",
    "over_refusal_gate_upper95", "over_refusal_answer", "over_refusal_answer_upper95",
    "no_answer_precision", "attack_success_rate", "refusal_accuracy", "safe_answer_rate",
    "latency_p50", "latency_p95", "latency_p99", "first_token_p50", "first_token_p95",
    "prompt_tokens", "completion_tokens", "cost_usd",
    "prompt_tokens_cached", "completion_tokens_cached", "cost_usd_cached", "truncated_answers",
]


def test_ids_are_the_canonical_report_keys_in_order() -> None:
    assert registry.names() == CANONICAL
    assert all(registry.METRICS[name].id == name for name in CANONICAL)


def test_retrieval_metrics_are_what_gate_only_reports() -> None:
    assert registry.RETRIEVAL_METRICS == [
        "recall@1", "recall@3", "recall@5", "recall@8", "mrr", "ndcg@8", "context_precision@5",
    ]


def test_every_metric_says_what_it_is() -> None:
    for metric in registry.METRICS.values():
        assert metric.description and metric.population.name
        assert metric.family in {
            "retrieval", "answer", "citations", "refusals", "attacks", "latency", "usage",
        }


def test_directions() -> None:
    assert registry.get("recall@8").higher_is_better
    assert not registry.get("hallucinated_citations").higher_is_better
    assert not registry.get("latency_p95").higher_is_better
    assert not registry.get("attack_success_rate").higher_is_better


def test_get_builds_stage_percentiles() -> None:
    metric = registry.get("stage_embed_p95")
    assert metric.id == "stage_embed_p95"
    assert metric.family == "latency"
    assert registry.is_metric_id("stage_model_p50")
    assert not registry.is_metric_id("stage_model_p75")


@pytest.mark.parametrize("name", ["recall@10", "ndcg", "stage_embed_p75", ""])
def test_unknown_name_lists_the_valid_ones(name: str) -> None:
    with pytest.raises(InputError) as err:
        registry.get(name)
    message = str(err.value)
    assert f"unknown metric {name!r}" in message
    for valid in CANONICAL:
        assert valid in message
    assert "stage_<name>_p50" in message


def test_unknown_name_suggests_a_close_one() -> None:
    with pytest.raises(InputError, match=r"did you mean 'recall@8'"):
        registry.get("recal@8")
