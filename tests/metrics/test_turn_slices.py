"""Turn slices: the turns of golden conversations summarised by their place, held to reference implementations.

Each turn is a row, so the run's summary reads a turn as it reads a single question;
the slices (first turns, follow-ups, each position) are that same summary over their
turns. The retrieval figures of every slice are pytrec_eval's over the same turns, and
answer F1 and citation precision/recall are a plain re-computation over the rows.
"""

from __future__ import annotations

import math
import random
import re
import string
from collections import Counter

import pytest
import pytrec_eval
from docpilot.metrics.retrieval import RANK_DEPTH
from docpilot.metrics.slices import FOLLOW_UP, slice_by_turn
from docpilot.metrics.summary import summarize

from docpilot.schema import Row

SECTIONS = [f"guide/p{p}#s{s}" for p in range(6) for s in range(4)]
WORDS = "token index retriever answer gold page section cache model prompt vector heading".split()


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))


def _turn(rng: random.Random, conversation: str | None, turn: int | None) -> Row:
    """One row of a run: a positive most often, with a ranking, an answer and its citations."""
    record = f"{conversation}/{turn}" if conversation else f"single-{rng.randrange(10**9)}"
    common = {"id": record, "split": "dev", "question": f"question {record}?", "conversation": conversation,
              "turn": turn, "latency_ms": float(rng.randint(5, 90))}
    if rng.random() < 0.15:
        refused = rng.random() < 0.6
        return Row(kind="negative", refused=refused, refused_by="gate" if refused else None,
                   answer=None if refused else _text(rng), retrieved=rng.sample(SECTIONS, 4), **common)
    gold = rng.sample(SECTIONS, rng.randint(1, 3))
    pool = list(dict.fromkeys(rng.sample(gold, rng.randint(0, len(gold))) + rng.sample(SECTIONS, 10)))
    retrieved = rng.sample(pool, rng.randint(0, 10))  # past the top 8 at times: the metrics read 8
    fate = rng.random()
    if fate < 0.1:
        return Row(kind="positive", gold=gold, retrieved=retrieved, gold_answer=_text(rng), refused=True,
                   refused_by="model", answer="", **common)
    if fate < 0.15:
        return Row(kind="positive", gold=gold, retrieved=retrieved, gold_answer=_text(rng),
                   error="the stream ended without a finish reason", error_code="unfinished", **common)
    primed = retrieved[:5]
    citations = rng.sample(primed, rng.randint(0, len(primed)))
    markers = [str(primed.index(c) + 1) for c in citations]
    answer = _text(rng) + "".join(f" [{m}]" for m in markers) + rng.choice(["", ".", ", the end!"])
    return Row(kind="positive", gold=gold, retrieved=retrieved, primed=primed, answer=answer, markers=markers,
               citations=citations, gold_answer=_text(rng) if rng.random() < 0.9 else None, **common)


def _run(seed: int, conversations: int = 160, singles: int = 40) -> list[Row]:
    """Conversations of one to four turns, single questions in between, in file order."""
    rng = random.Random(seed)
    rows: list[Row] = []
    for c in range(conversations):
        rows += [_turn(rng, f"conv-{c}", t) for t in range(1, rng.randint(1, 4) + 1)]
        if c % 4 == 0 and singles:
            rows.append(_turn(rng, None, None))
            singles -= 1
    return rows


def _pytrec(rows: list[Row]) -> dict[str, float]:
    """pytrec_eval's recall@1/3/5/8, MRR and nDCG@8 averaged over the positives among ``rows``."""
    positives = [r for r in rows if r.kind == "positive"]
    qrels = {r.id: {g: 1 for g in r.gold} for r in positives}
    run = {r.id: {s: float(RANK_DEPTH - i) for i, s in enumerate(r.retrieved[:RANK_DEPTH])} for r in positives}
    found = pytrec_eval.RelevanceEvaluator(qrels, {"recall.1,3,5,8", "recip_rank", "ndcg_cut.8"}).evaluate(run)
    # pytrec_eval leaves out a query whose ranking is empty: it found nothing, so each figure is 0.
    values = [found.get(r.id, {}) for r in positives]
    names = {"recall@1": "recall_1", "recall@3": "recall_3", "recall@5": "recall_5", "recall@8": "recall_8",
             "mrr": "recip_rank", "ndcg@8": "ndcg_cut_8"}
    return {ours: math.fsum(v.get(theirs, 0.0) for v in values) / len(values) for ours, theirs in names.items()}


def _squad_f1(prediction: str, truth: str) -> float:
    """SQuAD v1.1's token F1 as its evaluation script writes it (both empty: 1, as the metrics define)."""
    def normalise(text: str) -> list[str]:
        text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
        return re.sub(r"\b(a|an|the)\b", " ", text).split()

    predicted, expected = normalise(prediction), normalise(truth)
    if not predicted or not expected:
        return float(predicted == expected)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def _plain(rows: list[Row]) -> dict[str, float | None]:
    """Answer F1 and citation precision/recall over ``rows``, worked out by hand from their fields."""
    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    positives = [r for r in rows if r.kind == "positive"]
    answered = [r for r in positives if r.answer is not None and not r.refused and r.error is None]
    f1 = []
    for row in positives:
        if row.gold_answer is None or row.error is not None:
            continue
        if row in answered:
            text = row.answer or ""
            for marker in row.markers:
                text = text.replace(f"[{marker}]", " ")
            f1.append(_squad_f1(text, row.gold_answer))
        else:
            f1.append(0.0)  # a refused positive scores 0
    precision = [len(set(r.citations) & set(r.gold)) / len(set(r.citations)) for r in answered if r.citations]
    recall = [len(set(r.gold) & set(r.citations)) / len(set(r.gold)) for r in answered]
    return {"answer_f1": mean(f1), "citation_precision": mean(precision), "citation_recall": mean(recall)}


def _members(rows: list[Row]) -> dict[str, list[Row]]:
    turns = [r for r in rows if r.turn is not None]
    groups = {"first": [r for r in turns if r.turn == 1], FOLLOW_UP: [r for r in turns if r.turn > 1]}
    for position in sorted({r.turn for r in turns}):
        groups[f"turn {position}"] = [r for r in turns if r.turn == position]
    return groups


@pytest.mark.parametrize("seed", [3, 17])
def test_each_turn_slice_holds_pytrec_evals_retrieval_figures_over_its_turns(seed: int) -> None:
    rows = _run(seed)
    slices = slice_by_turn(rows)
    groups = _members(rows)
    assert list(slices) == list(groups) and len(groups) >= 5  # first, follow-up, turn 1 .. turn 4 at least
    for name, members in groups.items():
        assert slices[name].records == len(members)
        reference = _pytrec(members)
        for metric, expected in reference.items():
            assert slices[name].summary[metric] == pytest.approx(expected, abs=1e-12), (name, metric)
        assert slices[name].counts["recall@8"] == sum(r.kind == "positive" for r in members)


@pytest.mark.parametrize("seed", [5, 29])
def test_each_turn_slice_holds_answer_f1_and_citations_worked_out_by_hand(seed: int) -> None:
    rows = _run(seed)
    slices = slice_by_turn(rows)
    for name, members in _members(rows).items():
        for metric, expected in _plain(members).items():
            got = slices[name].summary[metric]
            assert (got is None) == (expected is None), (name, metric)
            if expected is not None:
                assert got == pytest.approx(expected, abs=1e-12), (name, metric)


def test_the_summary_averages_a_turn_as_it_averages_a_record() -> None:
    rows = _run(11)
    # The same rows, read as single questions: every figure and count is the same.
    as_records = [r.model_copy(update={"conversation": None, "turn": None}) for r in rows]
    assert summarize(rows) == summarize(as_records)
    assert summarize(rows)[1]["recall@8"] == sum(r.kind == "positive" for r in rows)
    # and the first turns' slice is the summary of the first turns alone
    first = [r for r in rows if r.turn == 1]
    assert (slice_by_turn(rows)["first"].summary, slice_by_turn(rows)["first"].counts) == summarize(first)


def test_a_run_of_single_questions_has_no_turn_slice(make_row) -> None:
    assert slice_by_turn([make_row("p1", gold=["a#"], retrieved=["a#"])]) == {}
    assert slice_by_turn([]) == {}


def test_single_questions_are_in_no_turn_slice_and_empty_slices_are_left_out(make_row) -> None:
    rows = [
        make_row("c/1", gold=["a#"], retrieved=["a#"], conversation="c", turn=1),
        make_row("d/1", gold=["a#"], retrieved=["b#"], conversation="d", turn=1),
        make_row("single", gold=["a#"], retrieved=["b#"]),
    ]
    slices = slice_by_turn(rows, gate_only=True)
    assert list(slices) == ["first", "turn 1"]  # no follow-up was asked
    assert slices["first"].records == 2 and slices["first"].summary["recall@8"] == 0.5
    rows.append(make_row("c/3", gold=["a#"], retrieved=["a#"], conversation="c", turn=3))
    slices = slice_by_turn(rows, gate_only=True)
    assert list(slices) == ["first", "follow-up", "turn 1", "turn 3"]  # no row is a turn 2
    assert slices["follow-up"].summary == slices["turn 3"].summary == summarize(rows[3:], gate_only=True)[0]


def test_a_turn_asked_several_times_is_read_once_as_a_record_is(make_row) -> None:
    # --repeat: each sample a row; the slice reads a turn's samples by their mean, as the summary reads a record's.
    def sample(record: str, turn: int, index: int, answer: str) -> Row:
        return make_row(record, gold=["a#"], retrieved=["a#"], primed=["a#"], conversation="c", turn=turn,
                        sample=index, answer=answer, gold_answer="run docpilot eval")

    rows = [sample("c/1", 1, 0, "run docpilot eval"), sample("c/1", 1, 1, "run docpilot eval"),
            sample("c/2", 2, 0, "nothing alike"), sample("c/2", 2, 1, "run docpilot eval")]
    slices = slice_by_turn(rows)
    assert slices["follow-up"].summary["answer_f1"] == 0.5 and slices["follow-up"].counts["answer_f1"] == 1
    assert slices["first"].summary == summarize(rows[:2])[0] and slices["first"].records == 2
