"""lost-context: a follow-up whose search missed its gold, which an earlier turn of its conversation would have reached.

The rows are ranked over the demo docs (the repository's docs folder, configs/docpilot.yaml) by the workspace
retriever, each follow-up searched as DocPilot's assistant searches it (``search_query`` with the turns before
it), and written to a report on disk that ``improve`` reads back.
"""

from __future__ import annotations

import pytest
from docpilot.metrics.retrieval import first_found

from docpilot.assistant.turn import search_query
from docpilot.assistant.workspace import open_workspace
from docpilot.config.loading import load_config, public_config
from docpilot.improve.context import needed_turns
from docpilot.improve.diagnosis import diagnose, load_docs
from docpilot.improve.taxonomy import CAUSE_IDS, RunSettings, causes_of, describe
from docpilot.readout.outcomes import failing_ids
from docpilot.reports.report import load_report, rescore, write_report
from docpilot.schema import Report, Row
from tests.conftest import ROOT

CONVERSATIONS = {
    # Turn 2 changes the subject, and turn 3 leans on it: the assistant searches turn 3 with the words of the
    # conversation's opening question, and misses; read with turn 2, it finds its gold.
    "cache": [("Where are reports written?", ["report#location"]),
              ("How do I clear the stage cache?", ["caching"]),
              ("How do I delete it safely?", ["caching"])],
    # The same follow-up after a turn that never named the cache: no earlier turn reaches its gold.
    "reports": [("Where are reports written?", ["report#location"]),
                ("How do I delete it safely?", ["caching"])],
    # The same follow-up after the cache's own turn, searched as asked (an assistant that reads no
    # conversation into its search): turn 1 is what it lacked.
    "asked": [("How do I clear the stage cache?", ["caching"]),
              ("How do I delete it safely?", ["caching"])],
}
AS_ASKED = {"asked"}
"""Conversations whose follow-ups are searched as asked, the earlier turns left out of the search."""


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Report, object]:
    """A gate-only report of the conversations and a single question, ranked over the demo docs, on disk."""
    folder = tmp_path_factory.mktemp("lost-context")
    config = load_config(ROOT / "configs" / "docpilot.yaml", env={},
                         overrides={"cache_dir": str(folder / "cache"), "corpus": {"docs": str(ROOT / "docs")}})
    workspace = open_workspace(config, use_cache=False)
    retriever = workspace.retriever
    rows = [_row(retriever, "single", None, "How do I clear the stage cache?", ["caching"], [])]
    for conversation, turns in CONVERSATIONS.items():
        for place, (question, gold) in enumerate(turns, start=1):
            earlier = [] if conversation in AS_ASKED else [(q, None) for q, _ in turns[: place - 1]]
            rows.append(_row(retriever, conversation, place, question, gold, earlier))
    report = Report(run_id="20261206T060000Z-turns0", created_at="2026-12-06T06:00:00+00:00",
                    config=public_config(config), fingerprints={"corpus": workspace.corpus.fingerprint},
                    gate_only=True, rows=rows, summary={}, gates=[], verdict="pass")
    path = write_report(rescore(report), folder / "run.json")
    return load_report(path), retriever


def _row(retriever, conversation, turn, question, gold, earlier) -> Row:
    query = search_query(question, earlier)
    hits, deeper = retriever.search_deeper(query, k=8, depth=100)
    retrieved = [hit.section_id for hit in hits]
    return Row(id=f"{conversation}/{turn}" if turn else conversation, kind="positive", split="dev",
               question=question, gold=gold, retrieved=retrieved, scores=[hit.score for hit in hits],
               gold_rank=first_found([*retrieved, *deeper], gold, k=100), gold_depth=100,
               conversation=conversation if turn else None, turn=turn,
               retrieval_query=query if query != question else None)


def test_a_follow_up_that_needed_an_earlier_turn_is_lost_context_naming_the_turn(demo) -> None:
    report, _ = demo
    corpus, notes = load_docs(report)
    diagnosis = diagnose(report, corpus, notes=notes)
    by_id = {failure.id: failure for failure in diagnosis.failures}
    lost = by_id["cache/3"]
    assert (lost.cause, lost.also) == ("lost-context", ["not-retrieved"])
    assert lost.detail.startswith("needs turn 2: 'How do I clear the stage cache?' (read with it, the first gold "
                                  "section ranks 1); searched with 'How do I delete it safely? reports written', ")
    (edit,) = lost.edits
    assert edit.kind == "investigate" and edit.value == {"turn": 2, "words": ["clear", "stage", "cache"]}
    asked = by_id["asked/2"]
    assert asked.cause == "lost-context"
    assert asked.detail.startswith("needs turn 1: 'How do I clear the stage cache?' (read with it, the first gold "
                                   "section ranks 1); searched with the question alone, ")
    # no earlier turn reaches the gold of the same question after another conversation: a plain miss, which says
    # what it was searched with
    assert by_id["reports/2"].cause == "not-retrieved" and by_id["reports/2"].also == []
    assert by_id["reports/2"].detail.endswith("; searched with 'How do I delete it safely? reports written'")
    # first turns, the turn that named the cache and the single question found their gold
    assert {"cache/1", "cache/2", "reports/1", "asked/1", "single"}.isdisjoint(by_id)
    assert diagnosis.causes == {"lost-context": 2, "not-retrieved": 1}


def test_the_needed_turn_is_the_one_that_ranks_the_gold_and_the_check_is_deterministic(demo) -> None:
    report, retriever = demo
    needed = needed_turns(report.rows, retriever)
    assert {key: value.turn for key, value in needed.items()} == {"cache/3": 2, "asked/2": 1}
    follow_up = next(r for r in report.rows if r.id == "cache/3")
    # turn 2 read with it ranks the gold where the check says; the search the assistant made, with turn 1, misses
    with_second = [h.section_id for h in retriever.search(search_query(follow_up.question,
                                                                       [(CONVERSATIONS["cache"][1][0], None)]), k=8)]
    as_searched = [h.section_id for h in retriever.search(follow_up.retrieval_query, k=8)]
    assert first_found(with_second, follow_up.gold) == needed["cache/3"].rank
    assert first_found(as_searched, follow_up.gold) is None
    assert needed_turns(report.rows, retriever) == needed


def test_without_the_check_the_follow_up_is_not_retrieved_as_before(demo) -> None:
    report, _ = demo
    follow_up = next(r for r in report.rows if r.id == "cache/3")
    assert causes_of(follow_up, RunSettings(gate_only=True)) == ["not-retrieved"]
    assert failing_ids(report) == ["cache/3", "reports/2", "asked/2"]  # the readouts count them failing all the same
    assert CAUSE_IDS.index("lost-context") == CAUSE_IDS.index("not-retrieved") - 1


def test_a_follow_up_without_its_earlier_turns_in_the_report_claims_nothing(demo) -> None:
    report, retriever = demo
    alone = [r for r in report.rows if r.id == "cache/3"]
    assert needed_turns(alone, retriever) == {}
    run = RunSettings(gate_only=True, needed=needed_turns(report.rows, retriever))
    assert describe(alone[0], "lost-context", run).startswith("needs turn 2: ")
