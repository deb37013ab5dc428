"""A real `docpilot eval` of golden conversations over the demo docs: the report on disk holds a row per turn and the
turn slices, the scorecard and the Markdown summary show them, and `docpilot improve` finds the follow-up that lost
its conversation; a run of single questions writes none of it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from docpilot.metrics.slices import slice_by_turn
from docpilot.metrics.summary import summarize

from docpilot.cli import main
from docpilot.reports.report import load_report
from docpilot.reports.scorecard import TURNS_TITLE
from tests.conftest import ROOT

GOLDEN = """\
- id: cleanup
  split: dev
  turns:
    - question: Where are reports written?
      gold: [report#location]
    - question: How do I clear the stage cache?
      gold: [caching]
    - question: How do I delete it safely?
      gold: [caching]
- id: index-only
  split: dev
  question: How do I rebuild the saved index?
  gold: [retrieval#index]
"""


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code in (0, 1), result.output
    return result.stdout


@pytest.fixture
def run(tmp_path) -> tuple[str, object]:
    """The demo config's eval (hybrid, static embedder, extractive model) of the set above; its output and folder."""
    golden = tmp_path / "golden.yaml"
    golden.write_text(GOLDEN, encoding="utf-8")
    output = _run("eval", "--config", str(ROOT / "configs" / "docpilot.yaml"), "--docs", str(ROOT / "docs"),
                  "--golden", str(golden), "--orchestrator", "inline", "--out", str(tmp_path / "run.json"),
                  "--markdown", str(tmp_path / "run.md"))
    return output, tmp_path


def test_an_eval_of_conversations_writes_a_row_per_turn_and_the_turn_slices(run) -> None:
    output, folder = run
    report = load_report(folder / "run.json")
    assert [(r.id, r.conversation, r.turn) for r in report.rows] == [
        ("cleanup/1", "cleanup", 1), ("cleanup/2", "cleanup", 2), ("cleanup/3", "cleanup", 3),
        ("index-only", None, None)]
    assert list(report.turns) == ["first", "follow-up", "turn 1", "turn 2", "turn 3"]
    assert report.turns == slice_by_turn(report.rows)
    follow_ups = [r for r in report.rows if r.turn is not None and r.turn > 1]
    assert (report.turns["follow-up"].summary, report.turns["follow-up"].counts) == summarize(follow_ups)
    assert report.counts["recall@8"] == 4  # three turns and a single question, each a record
    assert TURNS_TITLE.split(" (")[0] in output and "4 records, 3 of them turns of 1 conversation" in output
    assert "**By turn**" in (folder / "run.md").read_text()


def test_improve_names_the_turn_a_lost_follow_up_needed(run) -> None:
    _, folder = run
    found = json.loads(_run("improve", str(folder / "run.json"), "--json", "--no-settings"))
    lost = next(f for f in found["failures"] if f["id"] == "cleanup/3")
    assert lost["cause"] == "lost-context"
    assert lost["detail"].startswith("needs turn 2: 'How do I clear the stage cache?'")


def test_an_eval_of_single_questions_writes_no_turn_fields(tmp_path) -> None:
    golden = tmp_path / "golden.yaml"
    golden.write_text(GOLDEN[GOLDEN.index("- id: index-only"):], encoding="utf-8")  # the single question alone
    output = _run("eval", "--config", str(ROOT / "configs" / "docpilot.yaml"), "--docs", str(ROOT / "docs"),
                  "--golden", str(golden), "--orchestrator", "inline", "--out", str(tmp_path / "run.json"))
    text = (tmp_path / "run.json").read_text()
    assert '"turns"' not in text and '"conversation"' not in text and '"retrieval_query"' not in text
    assert TURNS_TITLE not in output
