"""What changed between two runs: settings old → new, and the pages of the docs."""

from __future__ import annotations

import shutil

from click.testing import CliRunner

from docpilot.cli import main
from docpilot.corpus.pages import load_corpus
from docpilot.reports.changes import page_changes, page_fingerprints, setting_changes
from docpilot.reports.report import score, write_report
from docpilot.schema import Report, Row
from tests.conftest import DATA

DOCS = DATA / "pipeline" / "docs"


def _report(run_id: str, config: dict, pages: dict[str, str], corpus: str = "c1") -> Report:
    rows = [Row(id="q1", kind="positive", split="dev", question="?", gold=["a#"], retrieved=["a#"])]
    summary, counts, gates, verdict = score(rows, {}, gate_only=True)
    return Report(run_id=run_id, created_at="2026-01-01T00:00:00+00:00", config=config,
                  fingerprints={"golden": "g", "corpus": corpus, "config": str(config)}, page_fingerprints=pages,
                  gate_only=True, rows=rows, summary=summary, counts=counts, gates=gates, verdict=verdict)


def test_each_changed_setting_is_named_with_its_old_and_new_value():
    a = _report("a", {"prime": {"top_k": 5, "prompt_version": "1"}, "guard": {"mode": "off"}}, {})
    b = _report("b", {"prime": {"top_k": 6, "prompt_version": "1"}, "guard": {"mode": "on", "threshold": 3.1}}, {})
    assert [c.describe() for c in setting_changes(a, b)] == [
        "guard.mode off → on", "guard.threshold (unset) → 3.1", "prime.top_k 5 → 6"]


def test_pages_that_changed_were_added_or_removed_are_named(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    before = page_fingerprints(load_corpus(docs))
    page = next(p for p in sorted(docs.rglob("*.md")))
    page.write_text(page.read_text(encoding="utf-8") + "\nOne more sentence.\n", encoding="utf-8")
    (docs / "faq.md").write_text("# FAQ\n\nAsk away.\n", encoding="utf-8")
    after = page_fingerprints(load_corpus(docs))
    changes = page_changes(_report("a", {}, before), _report("b", {}, after))
    changed_id = page.relative_to(docs).with_suffix("").as_posix()
    changed_id = changed_id[: -len("/index")] if changed_id.endswith("/index") else changed_id
    assert changes.changed == [changed_id] and changes.added == ["faq"] and changes.removed == []
    assert changes.describe() == f"pages changed: {changed_id}; added: faq"
    assert not page_changes(_report("a", {}, {}), _report("b", {}, after)).recorded


def test_improve_compare_names_the_setting_and_the_pages(tmp_path, monkeypatch):
    # Regression: it said only "changed between the runs: config" when prime.top_k went from 5 to 6.
    monkeypatch.chdir(tmp_path)
    a = _report("20260101T000000Z-aaaaaa", {"prime": {"top_k": 5}}, {"guide": "x1", "index": "y"})
    b = _report("20260102T000000Z-bbbbbb", {"prime": {"top_k": 6}}, {"guide": "x2", "index": "y"}, corpus="c2")
    paths = [write_report(r, tmp_path / f"{r.run_id}.json") for r in (a, b)]
    result = CliRunner().invoke(main, ["improve", "compare", str(paths[0]), str(paths[1])])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "changed between the runs: corpus, config" in out
    assert "setting prime.top_k 5 → 6" in out and "docs: pages changed: guide" in out


def test_a_comparison_of_different_selections_warns_that_they_are_not_comparable():
    from docpilot.reports.compare import compare_reports
    from docpilot.schema import Selection

    a = _report("a", {}, {})
    b = _report("b", {}, {}).model_copy(update={"selection": Selection(tags=["auth"])})
    warnings = compare_reports(a, b).warnings
    assert "not comparable: selection differs (all records vs --tag auth)" in warnings


def test_the_same_choice_in_another_order_is_the_same_selection():
    from docpilot.reports.store import comparison_key
    from docpilot.schema import Selection

    a = _report("a", {}, {}).model_copy(update={"selection": Selection(ids=["x", "y"], tags=["t"])})
    b = _report("b", {}, {}).model_copy(update={"selection": Selection(ids=["y", "x", "x"], tags=["t"])})
    assert comparison_key(a) == comparison_key(b)
