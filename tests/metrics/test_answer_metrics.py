"""Answer metrics: SQuAD F1 against a re-implementation of the official script, and row rules."""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter
from pathlib import Path

import pytest
from docpilot.metrics.answer import (
    answer_f1,
    identifier_recall,
    language_match,
    normalize_answer,
    primary_language,
    strip_markers,
    token_f1,
)
from docpilot.metrics.summary import summarize

SQUAD_CASES = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "metrics" / "squad_cases.json").read_text()
)


def _squad_normalize(s: str) -> str:
    """The official SQuAD v1.1 evaluate script's normalisation, step by step."""

    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _squad_f1(prediction: str, truth: str) -> float:
    """SQuAD v1.1 token F1, with SQuAD v2's rule for empty answers (equal ⇒ 1, else 0)."""
    prediction_tokens = _squad_normalize(prediction).split()
    truth_tokens = _squad_normalize(truth).split()
    if not prediction_tokens or not truth_tokens:
        return float(prediction_tokens == truth_tokens)
    common = Counter(prediction_tokens) & Counter(truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(truth_tokens)
    return (2 * precision * recall) / (precision + recall)


@pytest.mark.parametrize("case", SQUAD_CASES, ids=[c["why"] for c in SQUAD_CASES])
def test_token_f1_matches_the_squad_script_and_the_hand_value(case: dict) -> None:
    prediction, truth = case["prediction"], case["truth"]
    assert normalize_answer(prediction) == _squad_normalize(prediction)
    assert normalize_answer(truth) == _squad_normalize(truth)
    assert token_f1(prediction, truth) == pytest.approx(_squad_f1(prediction, truth))
    assert token_f1(prediction, truth) == pytest.approx(case["f1"])


@pytest.mark.parametrize("text", [
    string.punctuation,
    f"a{string.punctuation}the end",
    "Ünïcode — dashes… «quotes» and ‘curly’ ones stay; ASCII ones go!",
    "tabs\tand\nnew lines, the-end, an_id, x^2 ~ y",
    "",
])
def test_normalisation_drops_exactly_the_ascii_punctuation_the_squad_script_drops(text: str) -> None:
    assert normalize_answer(text) == _squad_normalize(text)


def test_token_f1_counts_the_overlap_as_a_multiset_intersection() -> None:
    rng = random.Random(7)
    words = ["a", "the", "port", "Port", "8080", "token", "header", "x-api-key", "--json", "é"]
    for _ in range(500):
        prediction = " ".join(rng.choices(words, k=rng.randint(0, 12)))
        truth = " ".join(rng.choices(words, k=rng.randint(0, 12)))
        predicted, expected = normalize_answer(prediction).split(), normalize_answer(truth).split()
        overlap = sum((Counter(predicted) & Counter(expected)).values())
        if not predicted or not expected:
            want = float(predicted == expected)
        else:
            want = 2 * overlap / (len(predicted) + len(expected)) if overlap else 0.0
        assert token_f1(prediction, truth) == want  # exactly: the same division of the same integers


def test_answer_f1_scores_a_turn_that_did_not_answer_as_zero(make_row) -> None:
    base = {"gold": ["a#"], "gold_answer": "use eval"}
    assert answer_f1(make_row(answer="use eval", **base)) == 1.0
    assert answer_f1(make_row(answer="use eval", refused=True, refused_by="model", **base)) == 0.0
    assert answer_f1(make_row(answer="use eval", error="timeout", **base)) == 0.0
    assert answer_f1(make_row(answer=None, **base)) == 0.0


def test_answer_f1_ignores_citation_markers(make_row) -> None:
    row = make_row(
        gold=["a#"],
        gold_answer="Use eval now.",
        answer="Use eval [1] now [guide/setup#install].",
        markers=["1", "guide/setup#install"],
    )
    assert answer_f1(row) == 1.0
    assert strip_markers("a [1] b [1]", ["1"]).split() == ["a", "b"]


def test_identifier_recall_is_verbatim_and_case_sensitive(make_row) -> None:
    row = make_row(
        gold=["a#"],
        identifiers=["--gate-only", "PREFECT_API_URL"],
        answer="Run with --gate-only and set prefect_api_url.",
    )
    assert identifier_recall(row) == 0.5
    refused = row.model_copy(update={"refused": True, "refused_by": "gate"})
    assert identifier_recall(refused) == 0.0


@pytest.mark.parametrize(
    ("answer_language", "language", "expected"),
    [("en-US", "en", 1.0), ("EN", "en-GB", 1.0), ("pt_BR", "pt", 1.0), ("ru", "en", 0.0),
     (None, "en", 0.0), ("zh-Hans", "zh", 1.0)],
)
def test_language_match_compares_primary_subtags(
    make_row, answer_language: str | None, language: str, expected: float
) -> None:
    row = make_row(answer="text", answer_language=answer_language, language=language)
    assert language_match(row) == expected


def test_primary_language() -> None:
    assert primary_language(" en-US ") == "en"
    assert primary_language("RU") == "ru"


def test_answer_metrics_average_over_their_populations(make_row) -> None:
    rows = [
        make_row("p1", gold=["a#"], gold_answer="use eval", answer="use eval",
                 identifiers=["eval"], language="en", answer_language="en"),
        make_row("p2", gold=["a#"], gold_answer="use eval", refused=True, refused_by="model",
                 identifiers=["eval", "x"], language="en"),
        # No gold answer and no identifiers: outside both averages.
        make_row("p3", gold=["a#"], answer="whatever", language="en", answer_language="ru"),
        make_row("n1", kind="negative", answer="invented", gold_answer="nothing",
                 identifiers=["x"], language="en", answer_language="en-US"),
        make_row("t1", kind="attack", answer="leak", language="en", answer_language="de"),
    ]
    summary, counts = summarize(rows)
    assert (summary["answer_f1"], counts["answer_f1"]) == (0.5, 2)
    assert (summary["identifier_recall"], counts["identifier_recall"]) == (0.5, 2)
    # Answered positives and negatives: p1 (en), p3 (ru ≠ en), n1 (en-US ~ en).
    assert summary["language_match"] == pytest.approx(2 / 3)
    assert counts["language_match"] == 3


def test_answer_metrics_are_none_without_positives(make_row) -> None:
    summary, counts = summarize([make_row("n1", kind="negative", refused=True)])
    for name in ("answer_f1", "identifier_recall", "language_match"):
        assert summary[name] is None
        assert counts[name] == 0


def test_f1_of_three_thirteenths_and_three_elevenths_is_exactly_a_quarter() -> None:
    # Regression: 2PR/(P+R) of the rounded ratios gave 0.24999999999999994, below a 0.25 floor.
    prediction = " ".join(["alpha", "beta", "gamma", *(f"p{i}" for i in range(10))])  # 13 tokens
    truth = " ".join(["alpha", "beta", "gamma", *(f"t{i}" for i in range(8))])  # 11 tokens
    assert token_f1(prediction, truth) == 0.25
