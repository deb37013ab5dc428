"""The history of field runs: each saved field report's headline numbers, oldest first.

Field reports are the JSON files `docpilot field` writes (``field-<run id>.json`` under
``reports_dir``, or wherever ``--out`` put them); a file that is not one is skipped
with a line saying why, never an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docpilot.field.run import FIELD_SCHEMA_VERSION

__all__ = ["HEADLINE", "field_history"]

HEADLINE = ("turns", "refusal_rate", "refusal_rate_upper95", "hallucinated_citations", "unlinked_answers",
            "uncited_answers", "sources_outside_docs", "language_match", "latency_p95", "near_docs")
"""The summary keys each line of the history shows."""


def field_history(folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every field report in ``folder`` as one line (its time, log, headline numbers and top gap), and what was skipped."""
    lines, skipped = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            skipped.append(f"{path}: not JSON ({exc})")
            continue
        if not isinstance(report, dict) or "gaps" not in report or "summary" not in report:
            continue  # an eval report, or another file: not a field run
        if report.get("schema_version") != FIELD_SCHEMA_VERSION:
            skipped.append(f"{path}: field report schema {report.get('schema_version')!r}, this version reads "
                           f"{FIELD_SCHEMA_VERSION}")
            continue
        top = report["gaps"][0] if report["gaps"] else None
        lines.append({
            "created_at": report.get("created_at"), "run_id": report.get("run_id"), "log": report.get("log"),
            "report": str(path), **{k: report["summary"].get(k) for k in HEADLINE},
            "top_gap": None if top is None else {"label": top["label"], "asks": top["asks"], "verdict": top["verdict"]},
        })
    lines.sort(key=lambda line: (line["created_at"] or "", line["run_id"] or ""))
    return lines, skipped
