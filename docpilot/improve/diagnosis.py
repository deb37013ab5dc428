"""From a failing number to the records behind it, each with a cause and edits to try.

``diagnose`` reads a report's rows, gives each failing record its cause
(``docpilot.improve.taxonomy``) and the edits that may move it (``docpilot.improve.suggestions``).
Edits that need the docs read them from the folder the run used (the report's
``config.corpus.docs``) or one passed in; without docs, the causes are the same and
the edits more general.

Who answered is read once from the report (``RunSettings.target``). A run that measured
a target, an assistant DocPilot did not build, is read as that target's: its causes come
from the sources, answer and citations it returned, and its edits are to what reaches it
(the docs both read, its prompt, its entry in the config, the golden record). DocPilot's
retriever is not run in its place, and no setting of DocPilot's own assistant is proposed.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from docpilot.corpus.pages import Corpus, load_corpus
from docpilot.errors import CorpusError
from docpilot.improve.context import lost_follow_up, needed_turns
from docpilot.improve.edit import Edit
from docpilot.improve.evidence import Evidence
from docpilot.improve.settings import SettingsProposal
from docpilot.improve.suggestions import suggest_edits
from docpilot.improve.taxonomy import (
    CAUSE_IDS,
    FailureCause,
    RunSettings,
    causes_of,
    describe,
    run_settings,
    what_moves,
)
from docpilot.improve.vocabulary import VocabularyChoice, choose_vocabulary
from docpilot.reports.store import header_of
from docpilot.schema import Kind, Report


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Failure(_Strict):
    """One failing record: its cause, the facts behind it, and edits to try."""

    id: str
    """The record's id."""
    kind: Kind
    """positive, negative or attack."""
    split: str
    """The record's split."""
    question: str
    """The question asked."""
    cause: FailureCause
    """The first cause that holds, in the taxonomy's order."""
    also: list[FailureCause]
    """Later causes that hold as well."""
    detail: str
    """The facts behind the cause, from the row."""
    moves: str
    """What moves this cause."""
    edits: list[Edit]
    """Suggested edits, most direct first."""
    languages: dict[str, str | None] = {}
    """The language the answer should be in (`expected`) beside those detected in the `question` and
    the `answer` (None: too short to tell, or no answer); empty for attack probes."""


class Assistant(_Strict):
    """Who answered the run's questions: DocPilot's own assistant, or a target it measured."""

    kind: Literal["docpilot", "target"]
    """`docpilot`: DocPilot's retrieve, prime, model and render, in the eval or its server;
    `target`: an assistant DocPilot did not build, asked over HTTP (docs/targets.md)."""
    name: str | None = None
    """The target's name under the config's `targets:`; None for DocPilot's own."""


class Diagnosis(_Strict):
    """Every failing record of a run, grouped by cause."""

    report: dict[str, object]
    """The run's header (run id, time, set, split, mode, path)."""
    assistant: Assistant = Assistant(kind="docpilot")
    """Who answered: the causes and edits are about it."""
    records: int
    """Records in the run."""
    failing: int
    """Records with at least one cause."""
    causes: dict[str, int]
    """Cause → failing records it is the cause of, in check order (causes with none left out)."""
    failures: list[Failure]
    """The failing records, by cause in check order, then in report order."""
    notes: list[str]
    """Caveats: docs not found or changed since the run."""
    warnings: list[str] = []
    """Reasons to be careful with the edits: records from the test split among those read."""
    vocabulary: list[VocabularyChoice] = []
    """The ``vocabulary.json`` entries chosen over every failing dev record at once, in the order chosen:
    what ``docpilot improve --apply`` writes."""
    settings: SettingsProposal | None = None
    """The retrieval settings tried on the dev positives when some ranked their gold past 8 or left it
    unprimed, and the config edit ``--apply`` writes; None when no dev record called for it."""


def load_docs(report: Report, docs: str | Path | None = None, *,
              strict: bool = False) -> tuple[Corpus | None, list[str]]:
    """The docs a report's run read (or ``docs``), and notes on why they may not match.

    A folder that is missing or unreadable gives None and a note, never an error:
    the diagnosis stands without the docs. ``strict`` (an edit is to be written into
    them) raises the ``CorpusError`` instead, naming the file and line at fault.
    """
    corpus_config = (report.config or {}).get("corpus") or {}
    folder = Path(docs) if docs is not None else Path(str(corpus_config.get("docs", "docs")))
    if not folder.is_dir():
        if strict:
            raise CorpusError("not found: the docs folder the run read", path=folder,
                              hint="pass --docs DOCS, the folder to write vocabulary.json into")
        return None, [f"docs folder {folder} not found: edits are worked out without the docs "
                      "(pass --docs to point at them)"]
    try:
        corpus = load_corpus(folder, chunk_words=int(corpus_config.get("chunk_words", 220)))
    except CorpusError as exc:
        if strict:
            raise
        return None, [f"docs folder {folder} could not be read ({exc}): edits are worked out without the docs"]
    notes = []
    recorded = (report.fingerprints or {}).get("corpus")
    if recorded is not None and recorded != corpus.fingerprint:
        notes.append(f"the docs in {folder} changed since this run: edits read them as they are now")
    return corpus, notes


def diagnose(report: Report, corpus: Corpus | None = None, *, path: str | Path | None = None,
             notes: list[str] | None = None) -> Diagnosis:
    """Every failing record of ``report`` with its cause and suggested edits.

    A record fails when any cause of the taxonomy holds for it; its cause is the
    first that holds. ``corpus`` (the docs) makes the edits concrete.
    """
    run = run_settings(report)
    evidence = Evidence(report=report, run=run, corpus=corpus)
    run = evidence.run = _with_needed_turns(run, evidence)
    failures: list[Failure] = []
    found_causes = {row.id: causes_of(row, run) for row in report.rows}
    evidence.vocabulary = choose_vocabulary(evidence, {i: found[0] for i, found in found_causes.items() if found})
    for row in report.rows:
        found = found_causes[row.id]
        if not found:
            continue
        cause = found[0]
        failures.append(Failure(
            id=row.id, kind=row.kind, split=row.split, question=row.question, cause=cause,
            also=found[1:], detail=describe(row, cause, run), moves=what_moves(cause, run),
            edits=suggest_edits(row, cause, evidence),
            languages={} if row.kind == "attack" else {
                "expected": row.language, "question": row.question_language, "answer": row.answer_language},
        ))
    if evidence.embedder is not None:
        evidence.embedder.save()  # the questions' vectors, for the next improve of this run
    order = {cause: i for i, cause in enumerate(CAUSE_IDS)}
    failures.sort(key=lambda f: order[f.cause])  # stable: report order within a cause
    counts = {cause: sum(1 for f in failures if f.cause == cause) for cause in CAUSE_IDS}
    return Diagnosis(
        report=header_of(report, path).describe(),
        assistant=Assistant(kind="docpilot") if run.target is None else Assistant(kind="target", name=run.target),
        records=len(report.rows),
        failing=len(failures),
        causes={cause: n for cause, n in counts.items() if n},
        failures=failures,
        notes=[*(notes or []), *_target_notes(run), *evidence.notes],
        warnings=_split_warnings(report),
        vocabulary=evidence.vocabulary,
    )


def _with_needed_turns(run: RunSettings, evidence: Evidence) -> RunSettings:
    """The run's settings with the earlier turn each failing follow-up needed (``improve.context``), ranked again
    with the run's retriever; unchanged when no follow-up missed its gold, and for a target, whose ranking
    DocPilot's retriever does not stand in for."""
    missed = [row for row in evidence.report.rows if lost_follow_up(row)]
    if not missed or run.target is not None:
        return run
    retriever = evidence.retriever()
    if retriever is None:
        evidence.notes.append(f"{len(missed)} follow-up(s) missed their gold; without the docs, whether an earlier "
                              "turn would have reached it (lost-context) is not checked")
        return run
    return replace(run, needed=needed_turns(evidence.report.rows, retriever))


def _target_notes(run: RunSettings) -> list[str]:
    """Why a run that measured a target gets no edit of DocPilot's settings, in one line."""
    if run.target is None:
        return []
    return [f"the run measured target {run.target}: DocPilot's settings do not reach it, so no retrieval, prime, "
            "guard, model or vocabulary.json edit is proposed; causes and edits read the target's own sources, "
            "answer and citations, and the docs both read"]


def _split_warnings(report: Report) -> list[str]:
    """A warning when the run holds test records: edits chosen on them leave nothing to prove them on."""
    on_test = sum(1 for row in report.rows if row.split == "test")
    if not on_test:
        return []
    return [f"{on_test} of the {len(report.rows)} records are from the test split: choose edits on dev "
            "(`docpilot eval --split dev`) and keep test to prove them, or its numbers stop being a fair check"]
