"""Trying ``model.min_evidence`` on the dev split, as a vocabulary entry is tried: on every dev record, before it is proposed.

The extractive model refuses when no source sentence covers ``min_evidence`` of the
question. A lower value answers more positives and more negatives too; a higher one
the reverse. Proposed without a trial, each run's refused positives ask for a lower
value again (0.3 → 0.25 → 0.2), each step trading negatives caught for fewer refusals
without saying so. Here the value is tried: every dev record is searched with the
run's retriever, primed as the run primes it, and answered by the extractive model
at the current value and at the new one, and the dev outcomes are set side by side
(negatives caught, answers refused, answer F1). The value is proposed only when no
outcome gets worse and some failing dev record passes: a value applied once is not
asked for again unless dev shows a gain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import ValidationError

from docpilot.assistant.primer import prime
from docpilot.config.model import ModelConfig
from docpilot.improve.evidence import Evidence
from docpilot.metrics.answer import token_f1
from docpilot.models.extractive import REFUSAL, build

_MARKER = re.compile(r"\s*\[\d+\]")
_SAME = 1e-9


@dataclass(frozen=True)
class Trial:
    """One value of ``model.min_evidence`` tried on the dev records, beside the run's own value."""

    value: float
    """The value tried."""
    current: float
    """The run's value."""
    before: dict[str, float | None]
    """Dev outcome → its value at the run's setting (negatives_caught, over_refusal_answer, answer_f1)."""
    after: dict[str, float | None]
    """The same outcomes at ``value``."""
    fixed: list[str]
    """Dev records whose refusal decision turns right."""
    broken: list[str]
    """Dev records whose refusal decision turns wrong."""

    @property
    def worse(self) -> list[str]:
        """The outcomes that get worse at ``value``."""
        lower_is_better = {"over_refusal_answer"}
        found = []
        for name, old in self.before.items():
            new = self.after[name]
            if old is None or new is None:
                continue
            if (new > old + _SAME) if name in lower_is_better else (new < old - _SAME):
                found.append(name)
        return found

    @property
    def gains(self) -> bool:
        """Whether dev says to make the change: some record turns right and no outcome gets worse."""
        return bool(self.fixed) and not self.worse

    def describe(self) -> str:
        """Every outcome before → after on dev, with the records that move."""
        moves = ", ".join(f"{name} {_figure(self.before[name])} → {_figure(self.after[name])}" for name in self.before)
        turned = (f"; right now: {', '.join(self.fixed[:5])}" if self.fixed else "") + \
                 (f"; wrong now: {', '.join(self.broken[:5])}" if self.broken else "")
        return f"tried on dev at {self.value:g} (now {self.current:g}): {moves}{turned}"


def try_min_evidence(evidence: Evidence, value: float) -> Trial | None:
    """``model.min_evidence`` at ``value`` on the run's dev records; None when it cannot be tried.

    It cannot be tried without the docs, without dev records, or for a model other than
    the extractive one. Trials are kept on ``evidence``: records asking for the same
    value share one.
    """
    key = f"model.min_evidence={value:.4f}"
    if key in evidence.trials:
        return evidence.trials[key]
    evidence.trials[key] = trial = _trial(evidence, value)
    return trial


def _trial(evidence: Evidence, value: float) -> Trial | None:
    corpus, retriever = evidence.corpus, evidence.retriever()
    # A record the gate refused was decided before any model ran: no value of the model's changes it.
    rows = [r for r in evidence.report.rows if r.split == "dev" and r.kind in ("positive", "negative")
            and r.error is None and r.refused_by != "gate"]
    if corpus is None or retriever is None or not rows or evidence.report.gate_only:
        return None
    try:
        settings = ModelConfig.model_validate(evidence.config.get("model") or {})
    except ValidationError:
        return None
    if settings.provider != "extractive":
        return None
    current = build(settings, corpus=corpus)
    tried = build(settings.model_copy(update={"min_evidence": value}), corpus=corpus, idf=current.idf)
    chunks = {chunk.id: chunk for chunk in corpus.chunks}
    before: list[tuple[str, bool, float]] = []
    after: list[tuple[str, bool, float]] = []
    for row in rows:
        prompt = prime(row.question, retriever.search(row.question, scope=row.scope), chunks,
                       k=evidence.run.prime_k)
        for model, out in ((current, before), (tried, after)):
            reply = model.compose(prompt)
            refused = reply == REFUSAL
            f1 = 0.0 if refused or row.kind != "positive" else token_f1(_MARKER.sub("", reply), row.gold_answer or "")
            out.append((row.id, refused, f1))
    kinds = {r.id: r.kind for r in rows}
    right = {i: (refused == (kinds[i] == "negative")) for i, refused, _ in before}
    right_after = {i: (refused == (kinds[i] == "negative")) for i, refused, _ in after}
    return Trial(
        value=value, current=settings.min_evidence,
        before=_outcomes(before, kinds, rows), after=_outcomes(after, kinds, rows),
        fixed=[i for i in right if right_after[i] and not right[i]],
        broken=[i for i in right if right[i] and not right_after[i]],
    )


def _outcomes(decided: list[tuple[str, bool, float]], kinds: dict[str, str], rows) -> dict[str, float | None]:
    negatives = [refused for i, refused, _ in decided if kinds[i] == "negative"]
    positives = [(refused, f1) for i, refused, f1 in decided if kinds[i] == "positive"]
    with_gold = {r.id for r in rows if r.kind == "positive" and r.gold_answer is not None}
    f1s = [f1 for i, _, f1 in decided if i in with_gold]
    return {
        "negatives_caught": sum(negatives) / len(negatives) if negatives else None,
        "over_refusal_answer": sum(r for r, _ in positives) / len(positives) if positives else None,
        "answer_f1": sum(f1s) / len(f1s) if f1s else None,
    }


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
