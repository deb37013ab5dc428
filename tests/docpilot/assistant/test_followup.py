"""The text a follow-up is retrieved with, and what it buys on the demo conversations."""

from __future__ import annotations

import pytest

from benchmarks import followups
from docpilot.assistant.followup import retrieval_query
from docpilot.corpus.pages import load_corpus
from docpilot.golden.loading import validate_against_corpus
from docpilot.retrieval.tokens import terms
from tests.conftest import SHARED_DATA

CACHE = ("How do I clear the stage cache?", "Run `docpilot cache clear`.")


def test_a_first_turn_is_searched_with_its_question_unchanged():
    question = "How do I clear the stage cache?"
    assert retrieval_query(question, []) == question


def test_a_referential_follow_up_gains_the_subject_of_the_question_it_follows():
    query = retrieval_query("And does that drop the index too?", [CACHE])
    assert query == "And does that drop the index too? clear stage cache"


def test_words_the_follow_up_already_holds_are_not_added_again_even_inflected():
    query = retrieval_query("Which stage caches does it keep?", [CACHE])
    assert query == "Which stage caches does it keep? clear"


def test_only_the_first_question_is_read_never_a_later_one_nor_an_answer():
    earlier = [("How do I send traces to Jaeger?", "Set OTEL_EXPORTER_OTLP_ENDPOINT."), ("What if the collector fails?", None)]
    query = retrieval_query("Does it slow the run down?", earlier)
    assert query == "Does it slow the run down? send traces jaeger"
    assert retrieval_query("Does it slow the run down?", [(earlier[0][0], "a reply about collectors")]) == query


def test_a_first_question_with_no_content_word_adds_nothing():
    assert retrieval_query("Where is the index saved?", [("And how?", None)]) == "Where is the index saved?"


def test_the_rewrite_is_deterministic_and_keeps_every_word_of_the_follow_up():
    earlier = [CACHE, ("And does that drop the index too?", None)]
    queries = {retrieval_query("Where is it saved then?", earlier) for _ in range(5)}
    assert len(queries) == 1
    (query,) = queries
    assert query.startswith("Where is it saved then?")
    assert set(terms(query)) >= set(terms("Where is it saved then?")) | set(terms("clear stage cache"))


@pytest.fixture
def demo() -> dict:
    """The demo conversations ranked by the default retriever over the demo docs, as the benchmark ranks them."""
    return followups.measure_set(followups.sets(SHARED_DATA)[0])


@pytest.mark.parametrize("split", ["dev", "test"])
def test_on_the_demo_conversations_rewritten_follow_ups_find_more_gold(demo, split):
    figures = demo["splits"][split]
    assert figures["follow_ups"] >= 10 and figures["follow_ups_rewritten"] == figures["follow_ups"]
    assert figures["rewritten_recall@8"] > figures["plain_recall@8"]


def test_the_demo_conversations_hold_negatives_and_fixed_replies():
    turns = followups.load_turns(followups.sets(SHARED_DATA)[0].conversations)
    assert sum(1 for t in turns if t.turn > 1 and not t.gold and t.expected_cause) >= 2
    assert sum(1 for t in turns if t.answer_given) >= 2
    assert {t.split for t in turns} == {"dev", "test"}


def test_a_set_whose_docs_are_missing_is_reported_absent(tmp_path):
    fastapi = followups.sets(tmp_path)[1]
    assert followups.measure_set(fastapi) == {"set": "fastapi", "absent": str(fastapi.docs)}
    assert "| fastapi | – | absent:" in followups.table({"sets": [followups.measure_set(fastapi)]})


def test_alternatives_are_measured_beside_the_rule_and_shown_as_a_second_table(tmp_path, capsys):
    assert followups.main(["--alternatives", "--data", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "| demo | dev |" in text and "| fastapi | – | absent:" in text and "| prefect | – | absent:" in text
    assert all(f"| {name} | " in text for name in followups.ALTERNATIVES)


@pytest.mark.slow  # reads the FastAPI, Prefect (955 pages) and httpx docs
@pytest.mark.parametrize("name", ["fastapi", "prefect", "httpx"])
def test_the_conversations_over_real_docs_name_sections_those_docs_hold(name):
    chosen = next(s for s in followups.sets(SHARED_DATA) if s.name == name)
    if not chosen.docs.is_dir():
        pytest.skip(f"the {name} docs beside the project are absent")
    turns = followups.load_turns(chosen.conversations)
    assert len({t.conversation for t in turns}) >= 15 and {t.split for t in turns} == {"dev", "test"}
    validate_against_corpus(turns, load_corpus(chosen.docs), chosen.conversations)
