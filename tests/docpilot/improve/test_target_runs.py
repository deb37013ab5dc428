"""improve on a run that measured a target: the target's own sources, answer and citations, and edits that reach it.

The run is real: an assistant DocPilot did not build answers over HTTP on 127.0.0.1
(``tests.support.assistant_shapes``), ``docpilot eval --target`` writes the report, and
``docpilot improve`` reads it. The config ranks with ``hybrid`` retrieval, so an improve
that stood DocPilot's retriever in for the target's would open and build its index in the
run's cache folder: the folder is the witness that none was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.corpus.pages import load_corpus
from docpilot.improve.diagnosis import diagnose, load_docs
from docpilot.improve.evidence import Evidence
from docpilot.improve.settings import propose_settings
from docpilot.improve.suggestions import suggest_edits
from docpilot.improve.taxonomy import run_settings
from docpilot.reports.report import load_report, score
from docpilot.schema import Report, Row
from tests.docpilot.targets.test_ask import DOCS, RECORDS, _config_file
from tests.support.assistant_shapes import KEY, Script, Scripted, serve_shapes

QUESTION = {r["id"]: r["question"] for r in RECORDS}
RETRIEVAL = {"retriever": "hybrid", "embedder": "static"}
OWN_SETTINGS = ("retrieval.", "prime.", "guard.", "model.min_evidence", "model.max_sentences", "model.provider",
                "model.base_url", "model.timeout_s", "corpus.", "embedder", "vocabulary.json")
"""Settings and files of DocPilot's own assistant: none of them reaches a target."""


def _script() -> Script:
    """The dev records' replies: two misses, an answer citing the wrong source, one citing nothing, and an
    answer to a question the docs do not answer."""
    return Script({
        QUESTION["q1"]: Scripted("Roll back with acme rollback. [1]", ["guide/auth#tokens", "index#acme-cli"]),
        QUESTION["q3"]: Scripted("Tokens are rotated. [1]", ["index#install", "guide/auth#rotating-tokens"]),
        QUESTION["q5"]: Scripted("Answer 5 is in the docs.", ["index#install"]),
        QUESTION["q7"]: Scripted("Answer 7 is in the docs. [1]", []),
        QUESTION["neg-price"]: Scripted("Acme costs ten dollars a month. [1]", ["index#acme-cli"]),
    })


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with serve_shapes(_script()) as base:
        yield base


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHAPES_KEY", KEY)


def _target_run(tmp_path: Path, base: str, *args: str, **extra: object) -> Path:
    """``docpilot eval`` of the dev records through a target; the report's path."""
    config = _config_file(tmp_path, base, retrieval=RETRIEVAL, **extra)
    out = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["eval", "--orchestrator", "inline", "--config", str(config), "--split", "dev",
                                       "--out", str(out), *args], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return out


def _improve(*args: str):
    return CliRunner().invoke(main, ["improve", *args], catch_exceptions=False)


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_improve_reads_the_target_s_ranking_and_proposes_none_of_docpilot_s_settings(served, tmp_path):
    report_path = _target_run(tmp_path, served, "--target", "json")
    cache = tmp_path / "cache"  # the run's cache_dir (the test-wide DOCPILOT_CACHE_DIR)
    assert json.loads(report_path.read_text())["config"]["cache_dir"] == str(cache)
    before = _files(cache)
    assert not any(name.startswith(("index", "improve-vectors")) for name in before)

    result = _improve(str(report_path), "--json")
    assert result.exit_code == 0, result.output
    diagnosis = json.loads(result.stdout)
    # Nothing of DocPilot's was ranked in the target's place: its retriever's index was neither opened
    # nor built, and there was no settings trial and no vocabulary entry tried with it.
    assert _files(cache) == before
    assert diagnosis["settings"] is None and diagnosis["vocabulary"] == []
    assert diagnosis["assistant"] == {"kind": "target", "name": "json"}
    assert any(n.startswith("the run measured target json: DocPilot's settings do not reach it")
               for n in diagnosis["notes"])

    failures = {f["id"]: f for f in diagnosis["failures"]}
    assert {i: f["cause"] for i, f in failures.items()} == {
        "q1": "not-retrieved", "q7": "not-retrieved", "q3": "uncited-evidence", "q5": "unlinked",
        "neg-price": "answered-negative"}
    # Each cause is told from what the target returned.
    assert failures["q1"]["detail"] == ("no gold entry (guide/deploy#rollback, index#install) among the 2 sources "
                                        "the target returned; rank 1 is guide/auth#tokens")
    assert failures["q7"]["detail"] == "the target json returned no sources for it"
    assert failures["q3"]["detail"] == ("gold among the target's sources as [2] (guide/auth#rotating-tokens); "
                                        "the answer cites index#install")
    assert "top score" not in failures["neg-price"]["detail"]  # a target gives no retrieval scores
    assert "guard" not in failures["neg-price"]["moves"]
    edits = [edit for f in failures.values() for edit in f["edits"]]
    assert edits
    for edit in edits:
        assert edit["kind"] != "vocabulary"
        assert edit["kind"] != "config" or edit["target"].startswith(("targets.", "model.concurrency")), edit
        assert not any(name in edit["target"] or name in edit["change"] for name in OWN_SETTINGS), edit
    prompts = [e for e in edits if e["kind"] == "prompt"]
    assert prompts and all(e["target"] == "the prompt of target json" for e in prompts)
    # The docs both read are still edited: the gold section missing from q3's citations.
    assert any(e["kind"] == "docs" and e["target"] == "guide/auth#rotating-tokens" for e in failures["q3"]["edits"])


def test_the_terminal_names_the_target_and_says_why_no_setting_is_proposed(served, tmp_path):
    report_path = _target_run(tmp_path, served, "--target", "json")
    result = _improve(str(report_path))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "(dev split, answered by target json): 5 of 5 records failing" in out.splitlines()[0]
    assert "note: the run measured target json: DocPilot's settings do not reach it" in out
    assert "retrieval settings" not in out and "this run" not in out and "try (config)" not in out
    assert "trying retriever" not in result.stderr


def test_apply_on_a_target_run_writes_nothing_and_says_why(served, tmp_path, monkeypatch):
    report_path = _target_run(tmp_path, served, "--target", "json")
    monkeypatch.chdir(tmp_path)  # where a config edit would land without --config
    docs = tmp_path / "docs"
    for page in DOCS.rglob("*.md"):
        (docs / page.relative_to(DOCS)).parent.mkdir(parents=True, exist_ok=True)
        (docs / page.relative_to(DOCS)).write_text(page.read_text())
    config = tmp_path / "docpilot.yaml"
    written = config.read_text()
    result = _improve(str(report_path), "--apply", "--docs", str(docs), "--config", str(config))
    assert result.exit_code == 0, result.output
    assert ("nothing to write: the run measured target json, and a vocabulary.json entry moves DocPilot's "
            "retriever alone") in " ".join(result.stdout.split())
    assert not (docs / "vocabulary.json").exists()
    assert config.read_text() == written  # no retrieval setting proposed, so none written


def test_a_variant_that_names_a_target_is_read_as_that_target(served, tmp_path):
    report_path = _target_run(tmp_path, served, "--runtime", "server",
                              variants={"json": {"target": "json"}, "sse": {"target": "sse"}})
    result = _improve(str(report_path), "--variant", "sse", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["assistant"] == {"kind": "target", "name": "sse"}
    assert not (tmp_path / "cache" / "index").exists()


def test_the_same_rows_read_as_docpilot_s_own_open_its_index(served, tmp_path):
    # The witness above is not empty by chance: the same report, with no target named, is read as
    # DocPilot's own run, and its retriever's index is built in the run's cache folder.
    report_path = _target_run(tmp_path, served, "--target", "json")
    report = load_report(report_path)
    own = report.model_copy(update={"config": {**report.config, "target": None}})
    corpus, notes = load_docs(own)
    diagnosis = diagnose(own, corpus, notes=notes)
    assert diagnosis.assistant.kind == "docpilot"
    assert (tmp_path / "cache" / "index").is_dir()
    target = load_report(report_path)
    assert propose_settings(target, load_corpus(DOCS)) is None


def _error_row(code: str) -> Row:
    return Row(id="q0", kind="positive", split="dev", question="How do I log in?", gold=["guide/auth#tokens"],
               answer=None, error=f"the target failed ({code})", error_code=code)


def test_an_error_of_a_target_points_at_its_own_entry_in_the_config():
    config = {"target": "acme", "targets": {"acme": {"url": "http://127.0.0.1:9/api", "timeout_s": 20.0}},
              "model": {"timeout_s": 60.0, "concurrency": 8, "base_url": None}}
    rows = [_error_row(code) for code in ("timeout", "connect", "rate_limit")]
    summary, counts, gates, verdict = score(rows, {}, gate_only=False)
    report = Report(run_id="20260101T000000Z-aaaaaa", created_at="2026-01-01T00:00:00+00:00", config=config,
                    fingerprints={}, runtime="server", rows=rows, summary=summary, counts=counts, gates=gates,
                    verdict=verdict)
    evidence = Evidence(report=report, run=run_settings(report))
    assert evidence.retriever() is None
    found = {row.error_code: suggest_edits(row, "error", evidence) for row in rows}
    assert [(e.target, e.value) for e in found["timeout"]] == [("targets.acme.timeout_s", 40.0)]
    assert [(e.target, e.value) for e in found["connect"]] == [("targets.acme.url", "http://127.0.0.1:9/api")]
    assert [e.target for e in found["rate_limit"]] == ["model.concurrency"]  # the run's limit on questions in flight
    missed = Row(id="q1", kind="positive", split="dev", question="How do I log in?", gold=["guide/auth#tokens"],
                 retrieved=["index#install"], primed=["index#install"], answer="Run acme login. [1]")
    # Without the docs at hand, the words go where the target reads them, not into vocabulary.json.
    assert [(e.kind, e.target) for e in suggest_edits(missed, "not-retrieved", evidence)] == [
        ("investigate", "the gold section")]
