"""One run as the run index holds it, and how a report becomes a row of the index and a row becomes a run again."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docpilot.schema import Report

COLUMNS = (
    "file", "size", "mtime_ns", "problem", "run_id", "created_at", "series", "golden", "selection", "record_set",
    "split", "gate_only", "runtime", "corpus", "config_digest", "model_digest", "code_digest", "variant",
    "version", "model", "records", "verdict", "summary", "counts", "config", "pages", "side_files", "headline",
    "shown", "stale_gold",
)
RUN_FIELDS = ", ".join(COLUMNS[4:])
"""The columns of a readable run, after the file's name, size, time and problem."""


def series_key(golden: str | None, record_set: str, split: str, selection: Any, gate_only: bool,
               runtime: str) -> str:
    """The comparable-run key (``docpilot.reports.store.COMPARABLE_FIELDS``) as one string SQLite can match."""
    return json.dumps([golden, record_set, split, selection, gate_only, runtime])


@dataclass
class IndexedRun:
    """One run as the index holds it: enough to plot it and to say what changed since another run.

    It carries the attributes ``docpilot.reports.moves`` and ``docpilot.reports.changes``
    read from a report (``summary``, ``counts``, ``config``, ``page_fingerprints``,
    ``side_file_fingerprints``), so those compare indexed runs as they compare reports.
    """

    file: str
    """The report's file name in the folder."""
    run_id: str
    """The run's id."""
    created_at: str
    """When the run finished, ISO 8601 in UTC."""
    series: str
    """The comparable-run key: runs with equal keys form one series."""
    golden: str | None
    """The golden set's fingerprint."""
    selection: str
    """The selection, as the command line wrote it."""
    record_set: str
    """Which record set ran."""
    split: str
    """Which split ran."""
    gate_only: bool
    """Retrieval only."""
    runtime: str
    """Where the assistant ran."""
    corpus: str | None
    """The corpus fingerprint."""
    config_digest: str | None
    """The config fingerprint."""
    model_digest: str | None
    """The model settings' fingerprint."""
    code_digest: str | None
    """The code fingerprint."""
    variant: str | None
    """The variant's name in a run of several; None for a run of one."""
    version: str | None
    """The DocPilot version that wrote the report; None for reports older than the field."""
    model: str
    """`provider/name`, or `none (gate-only)`."""
    records: int
    """Rows in the report."""
    verdict: str
    """`pass` or `fail`."""
    _summary: str = field(default="{}", repr=False)
    _counts: str = field(default="{}", repr=False)
    _headline: str = field(default="[]", repr=False)
    _shown: str = field(default="{}", repr=False)
    _config: str = field(default="{}", repr=False)
    _pages: str = field(default="{}", repr=False)
    _side_files: str = field(default="{}", repr=False)
    _stale_gold: str = field(default="{}", repr=False)

    @property
    def set(self) -> str:
        """The record set, by its report name."""
        return self.record_set

    @property
    def fingerprints(self) -> dict[str, str | None]:
        """The report's fingerprints, by their report names."""
        return {"corpus": self.corpus, "golden": self.golden, "model": self.model_digest,
                "config": self.config_digest, "code": self.code_digest}

    # Each is decoded when first asked for: a long series is listed to find its runs,
    # and only the runs shown, or compared for the first time, are read any further.
    @cached_property
    def summary(self) -> dict[str, float | int | None]:
        """The report's summary."""
        return json.loads(self._summary)

    @cached_property
    def counts(self) -> dict[str, int]:
        """How many records each summary value is over."""
        return json.loads(self._counts)

    @cached_property
    def headline(self) -> list[str]:
        """The run's headline metrics (``docpilot.reports.scorecard.headline_metrics``)."""
        return json.loads(self._headline)

    @cached_property
    def shown(self) -> dict[str, str]:
        """Metric id → its value as the scorecard prints it."""
        return json.loads(self._shown)

    @cached_property
    def config(self) -> dict[str, Any]:
        """The report's (redacted) configuration."""
        return json.loads(self._config)

    @cached_property
    def page_fingerprints(self) -> dict[str, str]:
        """Page id → fingerprint; empty for reports older than page fingerprints."""
        return json.loads(self._pages)

    @cached_property
    def side_file_fingerprints(self) -> dict[str, str | None]:
        """Side file → fingerprint; empty for reports older than them."""
        return json.loads(self._side_files)

    @cached_property
    def stale_gold(self) -> dict[str, int]:
        """Rows whose gold went stale since the golden set was locked, by ``gold_state``; empty when none did."""
        return json.loads(self._stale_gold)

    def describe(self) -> dict[str, object]:
        """The run's identity as plain JSON-ready data."""
        return {"run_id": self.run_id, "created_at": self.created_at, "file": self.file, "verdict": self.verdict,
                "model": self.model, "version": self.version, "variant": self.variant}


def row_of(name: str, signature: tuple[int, int], report: Report) -> tuple[object, ...]:
    """The index row of a readable report: the file's name and signature, then the run's fields."""
    from docpilot.reports.scorecard import format_value, headline_metrics

    fingerprints = report.fingerprints
    model = (report.config or {}).get("model") or {}
    model_name = "none (gate-only)" if report.gate_only else f"{model.get('provider', '?')}/{model.get('name', '?')}"
    key = series_key(fingerprints.get("golden"), report.set, report.split, report.selection.key(),
                     report.gate_only, report.runtime)
    return (
        name, *signature, None, report.run_id, report.created_at, key, fingerprints.get("golden"),
        report.selection.describe(), report.set, report.split, int(report.gate_only), report.runtime,
        fingerprints.get("corpus"), fingerprints.get("config"), fingerprints.get("model"), fingerprints.get("code"),
        getattr(report, "variant", None), getattr(report, "docpilot_version", None), model_name, len(report.rows),
        report.verdict, json.dumps(report.summary), json.dumps(report.counts), json.dumps(report.config or {}),
        json.dumps(report.page_fingerprints), json.dumps(report.side_file_fingerprints),
        json.dumps(headline_metrics(report)),
        json.dumps({metric: format_value(metric, value) for metric, value in report.summary.items()}),
        json.dumps(dict(Counter(row.gold_state for row in report.rows if row.gold_state is not None))),
    )


def run_of(row: tuple[Any, ...]) -> IndexedRun:
    """The run of an index row read with ``RUN_FIELDS`` after the file name."""
    (file, run_id, created_at, series, golden, selection, record_set, split, gate_only, runtime, corpus,
     config_digest, model_digest, code_digest, variant, version, model, records, verdict, summary, counts,
     config, pages, side_files, headline, shown, stale_gold) = row
    return IndexedRun(
        file=file, run_id=run_id, created_at=created_at, series=series, golden=golden, selection=selection,
        record_set=record_set, split=split, gate_only=bool(gate_only), runtime=runtime, corpus=corpus,
        config_digest=config_digest, model_digest=model_digest, code_digest=code_digest, variant=variant,
        version=version, model=model, records=records, verdict=verdict, _summary=summary, _counts=counts,
        _headline=headline, _shown=shown, _config=config, _pages=pages, _side_files=side_files,
        _stale_gold=stale_gold,
    )
