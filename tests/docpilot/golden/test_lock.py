"""The lock beside a golden set, and what became of the gold since: on copies of the demo docs, edited as teams edit."""

from __future__ import annotations

import pytest

from docpilot.corpus.pages import load_corpus
from docpilot.errors import InputError
from docpilot.golden.gold_state import gold_states, lock_path
from docpilot.golden.loading import load_golden
from docpilot.golden.lock import build_lock, lock_text, read_lock, text_digest
from docpilot.golden.staleness import find_stale, word_diff
from tests.support.moved_docs import EXPECTED, copy_demo, move_the_docs


@pytest.fixture
def demo(tmp_path):
    """The demo docs and golden set in ``tmp_path``, and the set's lock against them."""
    copy_demo(tmp_path)
    records = load_golden(tmp_path / "evals" / "golden.yaml")
    lock = build_lock(records, load_corpus(tmp_path / "docs"))
    return tmp_path, records, lock


def test_the_lock_holds_every_positive_and_reads_back_as_written(demo):
    folder, records, lock = demo
    positives = [r for r in records if r.gold]
    assert list(lock.records) == [r.id for r in positives]  # the set's order, negatives left out
    one = lock.records["ret-mrr"]
    assert list(one.gold) == ["metrics/retrieval#mrr"]
    assert one.gold["metrics/retrieval#mrr"].heading_path == ["Retrieval metrics", "MRR"]
    assert "The reciprocal rank of the first retrieved section" in one.gold["metrics/retrieval#mrr"].text
    page = lock.records["start-make-eval"].gold["getting-started#"]
    assert page.text is None and "getting-started#scorecard" in page.sections  # a page entry: its sections
    assert lock.records["cli-gate-only"].identifiers == {"--gate-only": True}
    assert lock.records["models-openai-retries"].answer_words > 0.5

    path = lock_path(folder / "evals" / "golden.yaml")
    assert path == folder / "evals" / "golden.lock"
    path.write_text(lock_text(lock), encoding="utf-8")
    assert read_lock(path) == lock
    again = build_lock(records, load_corpus(folder / "docs"))
    assert lock_text(again) == path.read_text(encoding="utf-8")  # the same docs give the same file, byte for byte
    assert {f.state for f in find_stale(lock, records, load_corpus(folder / "docs"))} == {"ok"}


def test_white_space_changes_no_digest():
    assert text_digest("Run docpilot eval\n  --gate-only:   it runs\tretrieval alone.") == \
        text_digest("Run docpilot eval --gate-only: it runs retrieval alone.")
    assert text_digest("it runs retrieval alone") != text_digest("it runs the retrieval alone")


def test_a_week_of_docs_edits_gives_each_record_its_state(demo):
    folder, records, lock = demo
    move_the_docs(folder / "docs")
    findings = {f.id: f for f in find_stale(lock, records, load_corpus(folder / "docs"))}
    assert {i: f.state for i, f in findings.items() if f.state != "ok"} == {i: s for i, (s, _) in EXPECTED.items()}
    for record_id, (_, moves) in EXPECTED.items():
        assert findings[record_id].moves == moves

    renamed = findings["ret-mrr"].entries[0]
    assert (renamed.was, renamed.now) == (("Retrieval metrics", "MRR"), ("Retrieval metrics", "Mean reciprocal rank"))
    rewritten = findings["cache-page-edit"]
    assert rewritten.entries[0].diff == "{+Since this release every …5 words… to the model again.+}"
    assert rewritten.answer_words[0] == rewritten.answer_words[1]  # the gold answer's words are all still there
    removed = findings["models-openai-retries"]
    assert removed.entries[0].note.startswith("no section carries its text")
    assert removed.identifiers_lost == ["429"] and removed.answer_words[1] < removed.answer_words[0]
    split = findings["start-make-eval"].entries[0]
    assert split.sections == {"moved-out": ["getting-started#scorecard → reading-the-scorecard#scorecard"]}
    assert findings["start-make-eval"].identifiers_kept == ["make eval"]
    assert findings["metrics-flaky"].stale and not findings["start-make-eval"].stale  # a narrowed page still matches


def test_a_page_that_gains_a_section_widens_its_page_entries(demo):
    folder, records, lock = demo
    page = folder / "docs" / "getting-started.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n## Upgrading { #upgrading }\n\nRun make install again.\n",
                    encoding="utf-8")
    findings = {f.id: f for f in find_stale(lock, records, load_corpus(folder / "docs"))}
    assert findings["start-make-eval"].state == "widened"
    assert findings["start-make-eval"].entries[0].sections == {"gained": ["getting-started#upgrading"]}
    assert [f.id for f in findings.values() if f.state != "ok"] == ["start-make-eval"]


def test_a_text_found_under_two_sections_is_no_move_to_guess(demo):
    folder, records, lock = demo
    page = folder / "docs" / "metrics" / "retrieval.md"
    text = page.read_text(encoding="utf-8").replace("\n## MRR\n", "\n## Mean reciprocal rank\n")
    body = load_corpus(folder / "docs").sections["metrics/retrieval#mrr"].text
    page.write_text(text + f"\n## Reciprocal rank, again\n\n{body}\n", encoding="utf-8")
    finding = next(f for f in find_stale(lock, records, load_corpus(folder / "docs")) if f.id == "ret-mrr")
    assert finding.state == "gone" and finding.moves == {}
    assert finding.entries[0].note == ("its text is under 2 sections (metrics/retrieval#mean-reciprocal-rank, "
                                       "metrics/retrieval#reciprocal-rank-again): pin the one that answers by hand")


def test_a_run_reads_the_lock_only_when_there_is_one(demo):
    folder, records, lock = demo
    golden = folder / "evals" / "golden.yaml"
    # No lock: the corpus is never touched (None would fail at the first look), so the run does no work for it.
    assert gold_states(golden, records, None) == {}
    lock_path(golden).write_text(lock_text(lock), encoding="utf-8")
    move_the_docs(folder / "docs")
    assert gold_states(golden, records, load_corpus(folder / "docs")) == {
        i: s for i, (s, _) in EXPECTED.items() if s in ("moved", "changed", "gone")}


@pytest.mark.parametrize(("text", "line", "words"), [
    ('{\n  "version": 1,\n<<<<<<< HEAD\n  "records": {}\n}\n', 3, "not a golden lock: Expecting"),
    ('{"version": 2, "records": {}}', None, "not a golden lock: version"),
    ('{"version": 1, "records": {"a": {"gold": {"x#y": {"digest": "sha256:0"}}}}}', None,
     "not a golden lock: records.a.gold.x#y.heading_path: Field required"),
])
def test_a_broken_lock_is_an_error_that_names_the_file_and_the_fix(tmp_path, text, line, words):
    path = tmp_path / "golden.lock"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as raised:
        read_lock(path)
    assert raised.value.line == line and words in str(raised.value)
    assert "docpilot golden lock" in raised.value.hint


def test_the_word_diff_shows_the_first_changes_and_counts_the_rest():
    old = "one two three four five six seven eight nine ten"
    assert word_diff(old, old.replace("two", "2").replace("five", "5").replace("eight", "8").replace("ten", "10")) \
        == "[-two-] {+2+} … [-five-] {+5+} … [-eight-] {+8+} (and 1 more change)"
    assert word_diff(old, " ".join(old.split()[:2])) == "[-three four five six seven eight nine ten-]"
    assert word_diff("a  b", "a b") == "white space only"
