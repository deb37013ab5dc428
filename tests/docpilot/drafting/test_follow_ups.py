"""Drafted follow-ups: a second turn from a sibling section, leaning on the first, on the demo docs and real corpora."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.corpus.pages import load_corpus
from docpilot.drafting.follow_ups import add_follow_ups, lean
from docpilot.golden.draft import draft_golden, source_section
from docpilot.golden.gold_state import lock_path
from docpilot.golden.loading import load_golden, read_golden
from docpilot.golden.lock import read_lock
from docpilot.golden.templates import answer_in_section
from tests.conftest import ROOT, SHARED_DATA

CORPORA = {
    "prefect": SHARED_DATA / "prefect-docs" / "docs",
    "fastapi": SHARED_DATA / "fastapi-docs" / "docs" / "en" / "docs",
}


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of the demo docs (the folder configs/docpilot.yaml names), so a test may write beside them."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "evals").mkdir()
    return tmp_path


def _check_follow_ups(docs: Path, count: int) -> None:
    """What every drafted follow-up must be, on any docs: a sibling's question, leaning on the first turn."""
    corpus = load_corpus(docs)
    drafted = add_follow_ups(draft_golden(corpus, count=count), corpus)
    assert drafted == add_follow_ups(draft_golden(corpus, count=count), corpus)  # deterministic
    with_follow_up = [d for d in drafted.drafts if d.follow_up is not None]
    assert with_follow_up and len(with_follow_up) <= (len(drafted.positives) + 1) // 2
    sources = [d.source for d in drafted.drafts if d.source] + [d.follow_up.source for d in with_follow_up]
    assert len(sources) == len(set(sources))  # no section is drawn from twice
    for draft in with_follow_up:
        second = draft.follow_up
        page = draft.source.partition("#")[0]
        assert second.source.partition("#")[0] == page and second.source != draft.source
        section = source_section(corpus, second.source)
        assert section is not None and answer_in_section(second.gold_answer, section.text)
        title = corpus.pages[page].title.strip("`").lower()
        # The title may remain inside a longer name (`prefect_gcp.workers.cloud_run` on the page cloud_run).
        assert not re.search(rf"(?<![\w.-]){re.escape(title)}(?![\w.-])", second.question.lower()), second.question
        assert second.origin.startswith("template:follow-up-") and second.split == draft.split


@pytest.mark.slow  # takes seconds
def test_follow_ups_of_the_demo_docs_are_written_as_conversations_and_checked_per_turn(project):
    drafted = run("golden", "draft", "--count", "30", "--follow-ups", "--out", "evals/drafts.yaml")
    assert drafted.exit_code == 0, drafted.output
    firsts = re.search(r"bias of the drafts, first turns: overlap ([\d.]+)", drafted.output)
    later = re.search(r"bias of the drafts, follow-ups: overlap ([\d.]+)", drafted.output)
    assert firsts and later, drafted.output
    assert float(later[1]) < float(firsts[1])  # a follow-up no longer names what it is about

    path = project / "evals" / "drafts.yaml"
    records = read_golden(path).records
    turns = [r for r in records if r.conversation is not None]
    assert turns and {r.turn for r in turns} == {1, 2}
    for second in (r for r in turns if r.turn == 2):
        assert second.earlier[0].question == next(r.question for r in turns if r.id == f"{second.conversation}/1")
        assert "follow-up" in second.tags
    assert "- id:" in path.read_text(encoding="utf-8") and "  turns:\n    - question:" in path.read_text("utf-8")
    lock = read_lock(lock_path(path))
    assert {r.id for r in turns} <= set(lock.records)  # each turn's section locked by the turn's id

    again = run("golden", "draft", "--count", "30", "--follow-ups", "--out", "evals/again.yaml")
    assert again.exit_code == 0 and (project / "evals" / "again.yaml").read_bytes() == path.read_bytes()

    checked = run("golden", "check", "--golden", "evals/drafts.yaml")
    assert checked.exit_code == 0, checked.output
    conversations = len({r.conversation for r in turns})
    assert f"{conversations} conversations of {len(turns)} turns" in checked.output

    chat = turns[0].conversation
    accepted = run("golden", "accept", chat, "--from", "evals/drafts.yaml", "--into", "evals/golden.yaml")
    assert accepted.exit_code == 0, accepted.output
    moved = load_golden(project / "evals" / "golden.yaml")
    assert [r.id for r in moved] == [f"{chat}/1", f"{chat}/2"]
    assert all("draft" not in r.tags for r in moved)
    assert set(read_lock(project / "evals" / "golden.lock").records) == {f"{chat}/1", f"{chat}/2"}
    assert chat not in {r.conversation for r in load_golden(path)}


def test_without_follow_ups_the_drafts_hold_no_conversation(project):
    assert run("golden", "draft", "--count", "10", "--out", "evals/drafts.yaml").exit_code == 0
    assert all(r.conversation is None for r in load_golden(project / "evals" / "drafts.yaml"))


def test_the_demo_docs_follow_ups_are_siblings_that_lean_on_the_first_turn():
    _check_follow_ups(ROOT / "docs", 40)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CORPORA))
def test_real_docs_follow_ups_are_siblings_that_lean_on_the_first_turn(name):
    if not CORPORA[name].is_dir():
        pytest.skip(f"{CORPORA[name]} is not on this machine")
    _check_follow_ups(CORPORA[name], 100)


@pytest.mark.parametrize(("question", "subject", "expected"), [
    ("What are the options for Caching?", "Caching", "What are the options for it?"),
    ("How do I configure the caching?", "Caching", "How do I configure it?"),
    ("What does `--seed` do?", "retrieval.top_k", "And for this option, what does `--seed` do?"),
    ("What is invalidation?", "Caching", "And for it, what is invalidation?"),
    ("What is the default of `cloud_run`?", "cloud_run", "What is the default of this option?"),
    ("What is `cloud_run`?", "cloud_run", None),
    ("What is `prefect_gcp.workers.cloud_run`?", "cloud_run", "And for this option, what is "
                                                              "`prefect_gcp.workers.cloud_run`?"),
    ("Workers: how do I start?", "Workers", "And for it, how do I start?"),
    ("The workers: how do I stop them?", "prefect-docker", "And for it, the workers: how do I stop them?"),
    ("What is Caching?", "Caching", None),  # a follow-up asks about something of its own, not "What is it?"
    ("What are the caching?", "caching", None),
])
def test_a_follow_up_replaces_the_pages_subject_by_a_reference(question, subject, expected):
    assert lean(question, subject, "0" * 64) == expected


def test_the_phrasing_follows_the_key():
    phrasings = {lean("What is invalidation?", "Caching", f"{n:x}" * 64) for n in range(16)}
    assert phrasings == {"And for it, what is invalidation?", "And for that, what is invalidation?",
                         "What is invalidation in that case?", "And with it, what is invalidation?",
                         "And with that, what is invalidation?"}
