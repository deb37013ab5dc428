"""A field run: a production log scored without gold, its coverage gaps found, its report written.

``score_log`` opens the docs and the retriever as ``eval --gate-only`` does
(``assistant.workspace.open_workspace``), streams the log turn by turn through the
scorer, the summary and the gap finder, and writes each scored turn to a JSONL file as it
goes: memory holds the summary's times, the remembered rankings and the gap groups,
never the log.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from docpilot.assistant.language import corpus_language
from docpilot.assistant.workspace import open_workspace
from docpilot.config.logs import LogMapping
from docpilot.config.model import Config
from docpilot.errors import ConfigError
from docpilot.field.gaps import GapFinder
from docpilot.field.log import Part, log_format, read_log, split_log
from docpilot.field.summary import FieldSummary
from docpilot.field.turns import TurnScorer
from docpilot.targets.sources import SourceResolver

__all__ = ["FIELD_SCHEMA_VERSION", "choose_mapping", "score_log"]

FIELD_SCHEMA_VERSION = 1


def choose_mapping(config: Config, name: str | None) -> tuple[str, LogMapping]:
    """The log mapping named ``name``, or the config's only one; ``ConfigError`` listing the names otherwise."""
    named = ", ".join(config.logs) or "none: add a `logs:` section (docs/field.md)"
    if name is None:
        if len(config.logs) == 1:
            return next(iter(config.logs.items()))
        raise ConfigError(f"which log mapping? the config has {named}", hint="name one with --log NAME")
    if name not in config.logs:
        raise ConfigError(f"log mapping {name!r} is not in the config (it has {named})",
                          hint="add it under `logs:`, or name one it has")
    return name, config.logs[name]


@dataclass
class _Tally:
    """What scoring one part of a log leaves: the summary, the gap turns and each conversation's turn count."""

    summary: FieldSummary
    gaps: GapFinder
    turns: dict[str, int]
    searches: int


# The state a forked worker scores with: set by ``score_log`` just before the workers start,
# so each worker reads the parent's opened corpus and index rather than opening its own.
_STATE: dict[str, Any] = {}


def _score_part(part: Part | None, rows: Path | None) -> _Tally:
    """Score one part of the log (or the whole of it), writing its turns to ``rows``: the one road of a run."""
    path, mapping, make_scorer, chunk_texts = (_STATE[k] for k in ("path", "mapping", "scorer", "chunks"))
    scorer: TurnScorer = make_scorer()
    summary, gaps = FieldSummary(), GapFinder(chunk_texts)
    handle = rows.open("w", encoding="utf-8") if rows is not None else None
    try:
        for logged in read_log(path, mapping, part):
            turn = scorer.score(logged)
            summary.add(turn)
            gaps.add(turn)
            if handle is not None:
                handle.write(json.dumps(turn.record(), ensure_ascii=False) + "\n")
    finally:
        if handle is not None:
            handle.close()
    return _Tally(summary, gaps, scorer._turns, scorer.searches)


def score_log(config: Config, path: Path, mapping_name: str | None = None, *,
              rows_out: Path | None = None, workers: int = 1) -> dict[str, Any]:
    """The field report of the log at ``path``; each scored turn is written to ``rows_out`` when given.

    With ``workers`` above 1 a JSONL log is cut into that many runs of whole lines, each
    scored by a forked process over the corpus and index opened here, and the parts are
    joined in file order (turns renumbered within conversations that cross a cut). A CSV
    log is read by one process, since a quoted cell may hold a line break.
    """
    name, mapping = choose_mapping(config, mapping_name)
    started = time.perf_counter()
    workspace = open_workspace(config, use_cache=False)
    corpus = workspace.corpus
    language = corpus_language(corpus)
    resolver, retriever, idf = SourceResolver(corpus), workspace.retriever, workspace.idf
    _STATE.update(path=path, mapping=mapping, chunks=[c.text for c in corpus.chunks],
                  scorer=lambda: TurnScorer(mapping, resolver, retriever, language, config.corpus.base_url, idf))
    parts = split_log(path, workers) if workers > 1 and log_format(path, mapping) == "jsonl" else [None]
    if rows_out is not None:
        rows_out.parent.mkdir(parents=True, exist_ok=True)
    part_rows = [None if rows_out is None else rows_out.with_name(f"{rows_out.name}.part{i}")
                 for i in range(len(parts))]
    opened = time.perf_counter()
    try:
        tallies = _run_parts(parts, part_rows)
    finally:
        _STATE.clear()
    total = tallies[0]
    for tally in tallies[1:]:
        total.summary.merge(tally.summary)
        total.gaps.merge(tally.gaps)
        total.searches += tally.searches
    conversations = set(tallies[0].turns)
    for tally in tallies[1:]:
        conversations.update(tally.turns)
    total.summary.conversations = len(conversations)
    if rows_out is not None:
        _join_rows(part_rows, [t.turns for t in tallies], rows_out)
    groups = total.gaps.groups()
    done = time.perf_counter()
    return {
        "schema_version": FIELD_SCHEMA_VERSION,
        "run_id": uuid.uuid4().hex[:12],
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "log": str(path),
        "mapping": name,
        "corpus": corpus.fingerprint,
        "near_evidence": mapping.near_evidence,
        "rows": str(rows_out) if rows_out is not None else None,
        "summary": total.summary.metrics(),
        "gaps": groups,
        "gaps_uncounted": total.gaps.far_overflow,
        "runtime": {"open_s": round(opened - started, 3), "score_s": round(done - opened, 3),
                    "rankings": total.searches, "workers": len(parts)},
    }


def _run_parts(parts: list[Part | None], rows: list[Path | None]) -> list[_Tally]:
    if len(parts) == 1:
        return [_score_part(parts[0], rows[0])]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=len(parts), mp_context=context) as pool:
        return list(pool.map(_score_part, parts, rows))


_CONVERSATION = re.compile(r'"conversation": ("(?:[^"\\]|\\.)*")')


def _join_rows(parts: list[Path], counts: list[dict[str, int]], out: Path) -> None:
    """The parts' turns in file order into ``out``; a conversation that crossed a cut goes on numbering."""
    seen: dict[str, int] = {}
    with out.open("w", encoding="utf-8") as joined:
        for part, turns in zip(parts, counts, strict=True):
            offsets = {c: seen[c] for c in turns if c in seen}
            with part.open(encoding="utf-8") as lines:
                for line in lines:
                    found = _CONVERSATION.search(line) if offsets else None
                    if found is not None and json.loads(found.group(1)) in offsets:
                        record = json.loads(line)
                        record["turn"] += offsets[record["conversation"]]
                        line = json.dumps(record, ensure_ascii=False) + "\n"
                    joined.write(line)
            part.unlink()
            for conversation, n in turns.items():
                seen[conversation] = seen.get(conversation, 0) + n


def save_field_run(config: Config, log: Path, mapping_name: str | None = None, *, out: Path | None = None,
                   workers: int = 1) -> tuple[dict[str, Any], Path]:
    """Score ``log`` and write its report, and each scored turn in a JSONL file beside it; the report and its path.

    Without ``out`` the report is ``field-<run id>.json`` under ``reports_dir``, where
    ``docpilot field-history`` finds it.
    """
    rows = out.with_suffix(".turns.jsonl") if out else Path(config.reports_dir) / "field-turns.jsonl"
    report = score_log(config, log, mapping_name, rows_out=rows, workers=workers)
    if out is None:
        out = Path(config.reports_dir) / f"field-{report['run_id']}.json"
        final_rows = out.with_suffix(".turns.jsonl")
        Path(report["rows"]).replace(final_rows)
        report["rows"] = str(final_rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report, out
