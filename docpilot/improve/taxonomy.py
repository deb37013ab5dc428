"""Why a record failed: a fixed list of causes, checked in a fixed order.

A record *fails* when at least one cause below holds for it. Its cause is the first
that holds, in this order, because an earlier cause explains the later ones: an
answer cannot cite gold the retriever never found, and a refused turn has no F1.

=====================  =========================================================
``error``              the turn ended in an error (any record)
``stale-gold``         a positive whose gold moved, changed or is gone since the
                       golden set was locked (``Row.gold_state``): the docs moved
                       under it, so a miss is no retrieval regression
``lost-context``       a follow-up positive (turn > 1) with no gold section in the
                       top 8 that one earlier turn of its conversation, read with
                       it, brings into the top 8 (``improve.context``): its detail
                       names the turn it needed
``not-retrieved``      a positive with no gold section in the top 8 (its detail says
                       where the first one is: rank 12, or not in the first 100)
``gold-below-primed``  a positive whose gold is in the top 8 but not among the
                       sources the model read (``prime.top_k``, ranks 6–8 by
                       default): recall@8 counts it, the model never saw it
``gate-refused``       a positive the retrieval gate refused
``model-refused``      a positive the model refused
``hallucinated-cit…``  an answer with a marker that points at no primed source
``unlinked``           an answered positive shown with Sources but no working link
``uncited-evidence``   gold was primed, the answer cites none of it
``primed-low-f1``      gold was primed, the answer's F1 is below 0.25
``answered-negative``  a negative (the docs do not answer it) that was answered
``wrong-language``     an answer not in the record's language
``attack-succeeded``   an attack probe whose reply or reasoning leaked
=====================  =========================================================

A positive that was retrieved, primed, answered, cited and scored F1 ≥ 0.25 in the
right language does not fail, even with partial recall; a refused negative does not
fail; a run without a model (``--gate-only``) can fail only on the causes up to
``gold-below-primed``, and there the sources the model would have read are the top
``prime.top_k`` of the ranked list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from docpilot.improve.context import NeededTurn
from docpilot.metrics.answer import answer_f1, language_match
from docpilot.metrics.attacks import find_forbidden
from docpilot.metrics.citations import citation_recall, is_unlinked
from docpilot.metrics.retrieval import RANK_DEPTH, first_found
from docpilot.schema import Report, Row

FailureCause = Literal[
    "error", "stale-gold", "lost-context", "not-retrieved", "gold-below-primed", "gate-refused", "model-refused",
    "hallucinated-citation", "unlinked", "uncited-evidence", "primed-low-f1",
    "answered-negative", "wrong-language", "attack-succeeded",
]

LOW_F1 = 0.25
"""Answer F1 below this, with gold primed, is ``primed-low-f1``."""


@dataclass(frozen=True)
class RunSettings:
    """What the checks need from the run besides the row."""

    gate_only: bool = False
    """No model ran."""
    prime_k: int = 5
    """How many ranked sections the model reads (``prime.top_k``)."""
    guard_mode: str = "off"
    """The retrieval gate's mode."""
    guard_threshold: float = 0.0
    """The retrieval gate's threshold."""
    runtime: str = "local"
    """Where the assistant ran: `local`, or `server` (whose ranking goes no deeper than its hits)."""
    target: str | None = None
    """Who answered, when it was not DocPilot's own assistant: the name of the target the run
    measured (``config.target``, an assistant asked over HTTP). Its ranking, answer and citations
    are the row's; DocPilot's retrieval, prime, guard and model settings never reached it."""
    needed: Mapping[str, NeededTurn] = field(default_factory=dict, hash=False)
    """Record id → the earlier turn a failing follow-up needed, as the run's retriever ranked it again
    (``improve.context.needed_turns``); empty when nothing was ranked again (no docs, a target, no follow-up)."""


def run_settings(report: Report) -> RunSettings:
    """The settings of a report's run, with defaults for options its config lacks."""
    config: dict[str, Any] = report.config or {}
    prime = config.get("prime") or {}
    guard = config.get("guard") or {}
    return RunSettings(
        gate_only=report.gate_only,
        prime_k=int(prime.get("top_k", 5)),
        guard_mode=str(guard.get("mode", "off")),
        guard_threshold=float(guard.get("threshold", 0.0)),
        runtime=report.runtime,
        target=str(config["target"]) if config.get("target") else None,
    )


def primed_sections(row: Row, run: RunSettings) -> list[str]:
    """The sections the model read; for a run without a model, the ones it would have read."""
    if row.primed or not run.gate_only:
        return list(row.primed)
    return list(row.retrieved[: run.prime_k])


def _positive(row: Row) -> bool:
    return row.kind == "positive" and bool(row.gold)


def _gold_primed(row: Row, run: RunSettings) -> bool:
    return first_found(primed_sections(row, run), row.gold) is not None


def _not_retrieved(row: Row, run: RunSettings) -> bool:
    # An assistant that showed no sources (``unranked``) cannot tell a retrieval miss: no cause is claimed.
    return _positive(row) and not row.unranked and first_found(row.retrieved, row.gold) is None


def _below_primed(row: Row, run: RunSettings) -> bool:
    return (_positive(row) and first_found(row.retrieved, row.gold) is not None
            and not _gold_primed(row, run))


def _uncited(row: Row, run: RunSettings) -> bool:
    return _positive(row) and row.answered and _gold_primed(row, run) and citation_recall(row) == 0


def _low_f1(row: Row, run: RunSettings) -> bool:
    return (_positive(row) and row.answered and row.gold_answer is not None
            and _gold_primed(row, run) and answer_f1(row) < LOW_F1)


def _wrong_language(row: Row, run: RunSettings) -> bool:
    return (row.kind in ("positive", "negative") and row.answered and row.language is not None
            and language_match(row) == 0)


@dataclass(frozen=True)
class CauseCheck:
    """One cause: its id, when it holds, and what moves it."""

    id: FailureCause
    """The cause's id."""
    holds: Callable[[Row, RunSettings], bool]
    """Whether the cause holds for a row of a run."""
    moves: str
    """What changes this cause, in one sentence."""
    on_target: str | None = None
    """The sentence for a run that measured a target, where ``moves`` names DocPilot's own settings."""


CAUSES: tuple[CauseCheck, ...] = (
    CauseCheck("error", lambda r, _: r.error is not None,
               "Fix what the error names (endpoint, key, timeout, rate limit); an errored record "
               "scores 0 everywhere, so nothing else about it can be read until it runs."),
    CauseCheck("stale-gold", lambda r, _: r.gold_state is not None,
               "Read the record against the docs as they are now: `docpilot golden check` names what moved, "
               "changed or went under its gold, `--fix` rewrites moved ids, and `docpilot golden lock ID` locks "
               "the record again once its gold and gold answer hold."),
    CauseCheck("lost-context", lambda r, run: r.id in run.needed,
               "Search with the conversation: the follow-up names its subject only in the earlier turn its detail "
               "names, so the search must carry that turn's words (the rewriting of a follow-up's search reads one "
               "earlier question only); no vocabulary entry or heading supplies a subject the question never names."),
    CauseCheck("not-retrieved", _not_retrieved,
               "Close the gap between the user's words and the docs' words: a vocabulary.json entry, "
               "the user's words in the gold section's heading or keywords, or a page that answers it "
               "(the one step left when the gold section is not in the first 100).",
               "Close the gap between the user's words and the words of the pages the target searches: the "
               "user's words in the gold section's heading, keywords or text, or a page that answers it."),
    CauseCheck("gold-below-primed", _below_primed,
               "Lift the gold section into the sources the model reads: its heading or keywords in the "
               "question's words, a vocabulary.json entry, or a larger prime.top_k.",
               "Lift the gold section among the target's sources: its heading, keywords or text in the "
               "question's words."),
    CauseCheck("gate-refused", lambda r, _: _positive(r) and r.refused and r.refused_by == "gate",
               "Lower guard.threshold below this record's top retrieval score, or raise that score by "
               "putting the question's words in the gold section."),
    CauseCheck("model-refused", lambda r, _: _positive(r) and r.refused and r.refused_by != "gate",
               "Give the model evidence it recognises: the question's words in the gold section's "
               "sentences, or a model setting (model.min_evidence for the extractive model) that "
               "refuses less readily.",
               "Give the target evidence it recognises: the question's words in the gold section's "
               "sentences, or a prompt of the target's own that refuses less readily."),
    CauseCheck("hallucinated-citation", lambda r, _: r.kind != "attack" and bool(r.hallucinated),
               "Tell the model to cite only the numbered sources it was given; every invented marker "
               "fails the run."),
    CauseCheck("unlinked", lambda r, _: _positive(r) and is_unlinked(r),
               "Make the answer's markers resolve: markers must be source numbers, and corpus.base_url "
               "must build working links.",
               "Make the answer cite what it shows: markers that are numbers of the target's sources, or a "
               "citations list (reply.citations) that names sources the target returned."),
    CauseCheck("uncited-evidence", _uncited,
               "Make the gold section the best match for the question, so the answer quotes and cites "
               "it rather than a neighbour: the question's words in its sentences or heading."),
    CauseCheck("primed-low-f1", _low_f1,
               "Match the answer's length and words to the gold answer: fewer or more sentences, or a "
               "gold section that states the answer in the words users expect."),
    CauseCheck("answered-negative", lambda r, _: r.kind == "negative" and r.answered,
               "Refuse on weak evidence: turn the retrieval gate on (guard.mode, guard.threshold) or make "
               "the model stricter (model.min_evidence).",
               "Refuse on weak evidence: the target's own refusal rule or prompt (DocPilot's retrieval gate "
               "does not stand in front of a target)."),
    CauseCheck("wrong-language", _wrong_language,
               "Answer in the question's language: a model told to do so, or docs in that language."),
    CauseCheck("attack-succeeded", lambda r, _: r.kind == "attack" and bool(find_forbidden(r)),
               "Remove the leaked text from the docs, or make the prompt and the gate refuse the probe.",
               "Remove the leaked text from the docs, or make the target's prompt refuse the probe."),
)
"""Every cause, in the order they are checked."""

CAUSE_IDS: tuple[str, ...] = tuple(c.id for c in CAUSES)
"""Cause ids in check order."""

_BY_ID = {c.id: c for c in CAUSES}


def causes_of(row: Row, run: RunSettings) -> list[FailureCause]:
    """Every cause that holds for a row, in check order; empty when the record does not fail."""
    return [check.id for check in CAUSES if check.holds(row, run)]


def what_moves(cause: str, run: RunSettings | None = None) -> str:
    """The sentence saying what moves ``cause``: for a run that measured a target, what moves it there."""
    check = _BY_ID[cause]
    if run is not None and run.target is not None and check.on_target is not None:
        return check.on_target
    return check.moves


def gold_depth_note(row: Row, run: RunSettings) -> str:
    """Where a positive's first gold section sits past the top 8: an edit away, or a page to write.

    `first gold section at rank 12 (past the top 8)` or `no gold entry (…) in the first 100`;
    a ranking no deeper than the top 8 (a server's, a report older than ``gold_rank``) says so.
    """
    top = len(row.retrieved[:RANK_DEPTH])
    if row.gold_rank is not None and row.gold_rank > top:
        return f"first gold section at rank {row.gold_rank} (past the top {top})"
    missing = f"no gold entry ({', '.join(row.gold)})"
    if row.gold_depth is not None and row.gold_depth > top:
        return f"{missing} in the first {row.gold_depth}"
    if row.gold_depth is None:
        return f"{missing} in the top {top} (the report records no deeper rank)"
    if run.target is not None:
        return f"{missing} among the {top} sources the target returned"
    if run.runtime == "server":
        return f"{missing} in the top {top} (the server returns no deeper ranking)"
    return f"{missing} in the top {top} (the ranking holds no more sections)"


_BEFORE_THE_ANSWER = frozenset({"error", "stale-gold", "lost-context", "not-retrieved", "gold-below-primed",
                                "gate-refused"})
"""The causes that hold before the model answers: the turn's error, the ranking, the retrieval gate."""


def describe(row: Row, cause: str, run: RunSettings) -> str:
    """The facts behind a record's cause, in one line, from the row alone."""
    primed = primed_sections(row, run)
    gold_at = first_found(primed, row.gold) if row.gold else None
    top = f"{row.scores[0]:.4f}" if row.scores else "none"
    if cause in _BEFORE_THE_ANSWER:
        return _describe_before_the_answer(row, cause, run, top)
    # A target's sources are what its answer was given with; it reports no scores of its own.
    read = "primed" if run.target is None else "among the target's sources"
    return _describe_the_answer(row, cause, primed, gold_at, top if run.target is None else None, read)


_STALE_WORDS = {"moved": "moved to another id", "changed": "says something else", "gone": "is gone from the docs"}


def _describe_before_the_answer(row: Row, cause: str, run: RunSettings, top: str) -> str:
    """The facts behind an error, a ranking's miss or the gate's refusal; ``top`` is rank 1's score as shown."""
    if cause == "error":
        return f"error: {(row.error or '').strip()[:200]}"
    if cause == "stale-gold":
        return f"its gold ({', '.join(row.gold)}) {_STALE_WORDS.get(row.gold_state or '', row.gold_state)} since the set was locked"
    if cause == "lost-context":
        needed = run.needed[row.id]
        searched = f"searched with {row.retrieval_query!r}" if row.retrieval_query else "searched with the question alone"
        return (f"needs turn {needed.turn}: {needed.question!r} (read with it, the first gold section ranks "
                f"{needed.rank}); {searched}, {gold_depth_note(row, run)}")
    if cause == "not-retrieved":
        if not row.retrieved:
            if run.target is not None:
                return f"the target {run.target} returned no sources for it"
            return "retrieval returned nothing (no question word is in the index)"
        # A follow-up searched with words of an earlier turn says so: those words may be what ranked rank 1.
        searched = f"; searched with {row.retrieval_query!r}" if row.retrieval_query else ""
        return f"{gold_depth_note(row, run)}; rank 1 is {row.retrieved[0]}{searched}"
    if cause == "gold-below-primed":
        rank = first_found(row.retrieved, row.gold)
        return f"first gold section at rank {rank}; the model reads ranks 1–{run.prime_k}"
    if cause == "gate-refused":
        return f"top retrieval score {top} is below guard.threshold {run.guard_threshold:g}"
    raise KeyError(cause)


def _describe_the_answer(row: Row, cause: str, primed: list[str], gold_at: int | None, top: str | None,
                         read: str = "primed") -> str:
    """The facts behind a cause the model's reply holds: a refusal, its citations, its words, a leak.

    ``top`` is rank 1's score as shown (None: the assistant gave none); ``read`` says where the
    sources the answer was given with came from (``primed``, or a target's own).
    """
    if cause == "model-refused":
        where = f"gold {read} as [{gold_at}]" if gold_at else f"no gold {read}"
        return f"the model refused ({row.refusal_cause or 'no cause given'}) with {where}"
    if cause == "hallucinated-citation":
        marks = ", ".join(f"[{m}]" for m in row.hallucinated)
        return (f"markers {marks} point at no primed source ({len(primed)} primed)" if read == "primed"
                else f"markers {marks} point at none of the {len(primed)} sources the target returned")
    if cause == "unlinked":
        marks = ", ".join(f"[{m}]" for m in row.markers) or "none"
        return f"{len(row.sources_shown)} source(s) listed, no working link; markers: {marks}"
    if cause == "uncited-evidence":
        cited = ", ".join(row.citations) or "nothing"
        return f"gold {read} as [{gold_at}] ({primed[gold_at - 1]}); the answer cites {cited}"
    if cause == "primed-low-f1":
        return f"answer F1 {answer_f1(row):.2f} with gold {read} as [{gold_at}]"
    if cause == "answered-negative":
        expected = row.expected_cause or "a refusal"
        score = f"; top score {top}" if top is not None else ""
        return f"answered although the docs do not answer it (expected {expected}){score}"
    if cause == "wrong-language":
        return f"answer in {row.answer_language or 'an undetected language'}, expected {row.language}"
    if cause == "attack-succeeded":
        return "leaked: " + ", ".join(repr(text) for text in find_forbidden(row))
    raise KeyError(cause)
