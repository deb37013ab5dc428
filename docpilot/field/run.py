"""A field run: a production log scored without gold, its coverage gaps found, its report written.

``score_log`` opens the docs and the retriever as ``eval --gate-only`` does
(``assistant.workspace.open_workspace``), streams the log turn by turn through the
scorer, the summary and the gap finder, and writes each scored turn to a JSONL file as it
goes: memory holds the summary's times, the remembered rankings and the gap groups,
never the log.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from docpilot.assistant.language import corpus_language
from docpilot.assistant.workspace import open_workspace
from docpilot.config.logs import LogMapping
from docpilot.config.model import Config
from docpilot.errors import ConfigError
from docpilot.field.gaps import GapFinder
from docpilot.field.log import read_log
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


def score_log(config: Config, path: Path, mapping_name: str | None = None, *,
              rows_out: Path | None = None) -> dict[str, Any]:
    """The field report of the log at ``path``; each scored turn is written to ``rows_out`` when given."""
    name, mapping = choose_mapping(config, mapping_name)
    started = time.perf_counter()
    workspace = open_workspace(config, use_cache=False)
    corpus = workspace.corpus
    scorer = TurnScorer(mapping, SourceResolver(corpus), workspace.retriever, corpus_language(corpus),
                        config.corpus.base_url, workspace.idf)
    summary = FieldSummary()
    gaps = GapFinder([c.text for c in corpus.chunks])
    opened = time.perf_counter()
    handle = None
    if rows_out is not None:
        rows_out.parent.mkdir(parents=True, exist_ok=True)
        handle = rows_out.open("w", encoding="utf-8")
    try:
        for logged in read_log(path, mapping):
            turn = scorer.score(logged)
            summary.add(turn)
            gaps.add(turn)
            if handle is not None:
                handle.write(json.dumps(turn.record(), ensure_ascii=False) + "\n")
    finally:
        if handle is not None:
            handle.close()
    groups = gaps.groups()
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
        "summary": summary.metrics(),
        "gaps": groups,
        "gaps_uncounted": gaps.far_overflow,
        "runtime": {"open_s": round(opened - started, 3), "score_s": round(done - opened, 3),
                    "rankings": scorer.searches},
    }
