"""`improve`'s edits are ones a docs writer would make: related words, the heading's own level, tried config values."""

from __future__ import annotations

from pathlib import Path

from docpilot.corpus.pages import load_corpus
from docpilot.improve.evidence import Evidence
from docpilot.improve.refusals import try_min_evidence
from docpilot.improve.suggestions import suggest_edits
from docpilot.improve.taxonomy import RunSettings
from docpilot.reports.report import score
from docpilot.schema import Report, Row

THEMES = """\
# Themes

## Dashboard

### Look

#### Color palette { #palette-23 }

Pick the color palette of the dashboard in Settings, then save.
"""

TOKENS = """\
# Tokens

## Rotate

Rotate the token every 90 days.
"""


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "themes.md").write_text(THEMES, encoding="utf-8")
    (docs / "tokens.md").write_text(TOKENS, encoding="utf-8")
    (docs / "install.md").write_text("# Install\n\n## Pip\n\nRun pip install acme.\n", encoding="utf-8")
    return docs


def _evidence(docs: Path, rows: list[Row], min_evidence: float = 0.3) -> Evidence:
    summary, counts, gates, verdict = score(rows, {}, gate_only=False)
    config = {"corpus": {"docs": str(docs)}, "prime": {"top_k": 5}, "guard": {"mode": "off"},
              "model": {"provider": "extractive", "min_evidence": min_evidence, "max_sentences": 3}}
    report = Report(run_id="20260101T000000Z-aaaaaa", created_at="2026-01-01T00:00:00+00:00", config=config,
                    fingerprints={"golden": "g"}, rows=rows, summary=summary, counts=counts, gates=gates,
                    verdict=verdict)
    return Evidence(report=report, run=RunSettings(), corpus=load_corpus(docs))


def _missed(question: str, gold: str) -> Row:
    return Row(id="colour", kind="positive", split="dev", question=question, gold=[gold],
               retrieved=["install#pip"], scores=[1.0], primed=["install#pip"], answer="REFUSE: not-answerable",
               refused=True, refused_by="model", gold_answer="Pick the color palette in Settings.", language="en")


# Regression: "(hand, date)" was put into a heading, and an `####` heading's edit was written as `## … { #id }`.
def test_a_heading_edit_names_only_related_words_and_keeps_the_headings_level(tmp_path):
    row = _missed("Where is the colour picked by hand?", "themes#palette-23")
    edits = suggest_edits(row, "not-retrieved", _evidence(_docs(tmp_path), [row]))
    heading = next(e for e in edits if e.kind == "heading")
    assert heading.value["words"] == ["colour"]  # a spelling of "color"; "hand" is related to nothing there
    assert "`#### <new title> { #palette-23 }`" in heading.change and "## <new" not in heading.change.split("####")[0]
    assert heading.value["level"] == 4


def test_a_docs_wording_edit_never_asks_for_unrelated_or_everyday_words(tmp_path):
    row = _missed("So can I only change the colour by hand?", "themes#palette-23")
    edits = suggest_edits(row, "model-refused", _evidence(_docs(tmp_path), [row]))
    wording = next(e for e in edits if e.kind == "docs")
    assert wording.value["words"] == ["colour"]
    for everyday in ("so", "only", "hand", "can"):
        assert everyday not in wording.value["words"]


def _rotate_rows() -> list[Row]:
    # Two of the question's three words are in the one sentence that answers it: coverage 2/3.
    positive = Row(id="rotate", kind="positive", split="dev", question="rotate token xyzzy", gold=["tokens#rotate"],
                   retrieved=["tokens#rotate"], scores=[3.0], primed=["tokens#rotate"],
                   answer="REFUSE: not-answerable", refused=True, refused_by="model",
                   gold_answer="Rotate the token every 90 days.", language="en")
    # One word of eight in the docs: coverage 1/8, refused at min_evidence 0.15, answered at 0.1.
    negative = Row(id="rain", kind="negative", split="dev",
                   question="Does the token expire when the weather is rainy, windy, stormy, cloudy or foggy?",
                   retrieved=["tokens#rotate"], scores=[1.0], primed=["tokens#rotate"], answer="REFUSE: not-answerable", refused=True, refused_by="model",
                   expected_cause="out-of-scope", language="en")
    return [positive, negative]


def test_a_lower_min_evidence_is_tried_on_dev_and_proposed_when_nothing_gets_worse(tmp_path):
    rows = _rotate_rows()
    evidence = _evidence(_docs(tmp_path), rows, min_evidence=0.7)
    edits = suggest_edits(rows[0], "model-refused", evidence)
    config = next(e for e in edits if e.target == "model.min_evidence")
    assert config.kind == "config" and config.value == 0.65
    assert "negatives_caught 1.00 → 1.00" in config.effect and "over_refusal_answer 1.00 → 0.00" in config.effect
    assert "answer_f1 0.00 → 1.00" in config.effect and "right now: rotate" in config.effect


# Regression: min_evidence 0.3 → 0.25, then → 0.2 the next run, each trading negatives caught for fewer refusals.
def test_a_value_that_costs_negatives_caught_on_dev_is_not_proposed_and_the_cost_is_shown(tmp_path):
    rows = _rotate_rows()
    evidence = _evidence(_docs(tmp_path), rows, min_evidence=0.15)
    trial = try_min_evidence(evidence, 0.1)
    assert trial.before["negatives_caught"] == 1.0 and trial.after["negatives_caught"] == 0.0
    assert trial.worse == ["negatives_caught"] and not trial.gains and trial.broken == ["rain"]
    edits = suggest_edits(rows[0], "model-refused", evidence)
    kept = next(e for e in edits if e.target == "model.min_evidence")
    assert kept.kind == "investigate" and kept.value is None
    assert "stays 0.15" in kept.change and "negatives_caught" in kept.change
    assert "negatives_caught 1.00 → 0.00" in kept.effect and "wrong now: rain" in kept.effect


# Regression: "the cited sections hold the question's words image, app, them, put": everyday words as an edit.
def test_an_uncited_gold_section_is_asked_for_no_everyday_word(tmp_path):
    row = Row(id="pip", kind="positive", split="dev", question="Can I put them in the color palette with pip?",
              gold=["themes#palette-23"], retrieved=["install#pip", "themes#palette-23"], scores=[2.0, 1.0],
              primed=["install#pip", "themes#palette-23"], answer="Run pip install acme. [1]", markers=["1"],
              citations=["install#pip"], gold_answer="Pick the color palette in Settings.", language="en")
    edit = suggest_edits(row, "uncited-evidence", _evidence(_docs(tmp_path), [row]))[0]
    assert not {"put", "them", "can"} & set(edit.value["words"])


# Regression: "lacks the question's words edit, gives, router": an everyday verb asked for in the docs.
def test_everyday_verbs_are_not_content_words(tmp_path):
    evidence = _evidence(_docs(tmp_path), [])
    from docpilot.improve.evidence import content_word

    assert not any(content_word(w, evidence) for w in ("gives", "give", "gave", "given"))
    assert content_word("router", evidence)
