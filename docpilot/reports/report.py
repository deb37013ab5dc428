"""Writing, reading and re-scoring report files.

A report is written atomically, by the writer every output file goes through
(``docpilot.reports.output``): a reader never sees half a report, a crash leaves the
previous one intact, and a path that is not a regular file is refused.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import math
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from docpilot import __version__
from docpilot.errors import ReportError
from docpilot.redact import redact, redact_config
from docpilot.reports.output import write_atomically
from docpilot.schema import FlakyRecord, LeakFound, Report, Row, Stability
from docpilot.userfiles.intake import REPORT_FILE, read_text

_CODE_PACKAGES = ("docpilot", "metrics", "tasks", "flows")


def new_run_id() -> str:
    """A sortable, unique run id: UTC time then a random suffix."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def now_iso() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def file_fingerprint(path: str | Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@functools.cache
def code_fingerprint() -> str:
    """sha256 over the project's Python sources, so a report says which code produced it.

    Worked out once per process: the code that runs is the code that was loaded.
    """
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for package in _CODE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


_TURN_FIELDS = {"conversation", "turn", "retrieval_query"}
"""A row's fields for a turn of a conversation, all None in a run of single questions."""


def write_report(report: Report, path: str | Path) -> Path:
    """Write a report atomically (see ``docpilot.reports.output``) and return its path."""
    return write_atomically(path, report.model_dump_json(indent=1, exclude=_unused_fields(report)), "report")


def _unused_fields(report: Report) -> dict | None:
    """The fields a report leaves out of its file because its run had no use for them.

    A run of one keeps the shape reports had before variants (no empty variant fields), and a
    run of single questions the shape they had before conversations (no turn slices, no row
    fields of turns): such a report is written byte for byte as it was, and reads back the same.
    """
    rows: set[str] = set()
    exclude: dict = {}
    if not report.variants:
        exclude |= {"variants": True, "paired": True}
        rows.add("variant")
    if not any(row.conversation is not None or row.turn is not None or row.retrieval_query is not None
               for row in report.rows):
        exclude["turns"] = True
        rows |= _TURN_FIELDS
        if report.variants:
            exclude["variants"] = {"__all__": {"turns"}}
    if rows:
        exclude["rows"] = {"__all__": rows}
    return exclude or None


def load_report(path: str | Path) -> Report:
    """Read a report file, with an error that says what is wrong with it."""
    path = Path(path)
    text = read_text(path, REPORT_FILE, error=_unreadable)
    try:
        with collector_paused():
            return Report.model_validate_json(text)  # parsed and checked in one pass, without Python's JSON objects
    except RecursionError:
        raise ReportError(f"{path}: nested too deeply to be a DocPilot report") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise _not_json(path, text) from None
        where = ".".join(str(p) for p in first["loc"])
        raise ReportError(
            f"{path}: not a DocPilot report: {where}: {first['msg']} ({exc.error_count()} problem(s))"
        ) from None


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off for the block, and on again after it if it was on.

    For work over a report: its rows hold no reference cycles, so the collections that
    tens of thousands of new objects set off find nothing, yet each walks every object
    made so far (docs/architecture.md#measurements).
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _not_json(path: Path, text: str) -> ReportError:
    """Why a report's text is not JSON, with the line Python's reader stops at."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return ReportError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); is this a DocPilot report?")
    except RecursionError:
        pass
    return ReportError(f"{path}: nested too deeply to be a DocPilot report")


def _unreadable(message: str, *, path: Path, line: int | None = None, hint: str | None = None) -> ReportError:
    """Why a report file cannot be read (missing, no regular file, over its size cap, not UTF-8), as a ReportError."""
    if message == "file not found":
        return ReportError(f"{path}: no such report; reports are written under .docpilot/reports/")
    return ReportError(f"{path}{f':{line}' if line else ''}: {message}; fix: {hint}")


def check_consistency(report: Report, path: str | Path) -> Report:
    """The report unchanged when its rows could have come from a run; ReportError naming the first problem otherwise.

    A report edited by hand must not pass: a gate-only report holds no model rows (so
    ``"gate_only": true`` cannot hide errored turns from the gates), every time is
    a finite, non-negative number of milliseconds, and a row's ``retrieved`` names each
    section once.
    """
    problems: list[str] = []
    for row in report.rows:
        # The fields of _model_results, tested without building its list: most rows have none.
        if report.gate_only and (row.answer is not None or row.error is not None or row.refused_by == "model"
                                 or row.usage or row.first_token_ms is not None or "model" in row.stages_ms):
            problems.append(f"record {row.id!r} has model results ({', '.join(_model_results(row))}) "
                            "in a gate-only report")
        for name, value in _times(row):
            problems.append(f"record {row.id!r} has {name} = {value}; times are finite and not negative")
        if not all(map(math.isfinite, row.scores)):
            problems.append(f"record {row.id!r} has a retrieval score that is not a finite number")
        if len(set(row.retrieved)) < len(row.retrieved):
            # A repeat would count twice in context precision and once in recall and nDCG.
            problems.append(f"record {row.id!r} lists section {_repeated(row.retrieved)!r} more than once in "
                            "retrieved; a run ranks each section once")
    if report.wall_ms is not None and not (math.isfinite(report.wall_ms) and report.wall_ms >= 0):
        problems.append(f"wall_ms = {report.wall_ms}; times are finite and not negative")
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise ReportError(f"{path}: the report is not consistent: {problems[0]}{more}; it cannot be scored; "
                          "fix: run `docpilot eval` again instead of editing the report")
    return report


def _model_results(row: Row) -> list[str]:
    """The fields of a row that only a model's turn fills in, among those the row has."""
    return [name for name, present in (
        ("answer", row.answer is not None), ("error", row.error is not None),
        ("refused_by: model", row.refused_by == "model"), ("usage", bool(row.usage)),
        ("first_token_ms", row.first_token_ms is not None), ("stages_ms.model", "model" in row.stages_ms),
    ) if present]  # fmt: skip


def _times(row: Row) -> list[tuple[str, float]]:
    """A row's times that are no finite, non-negative number of milliseconds, by name (none, for a row a run wrote)."""
    latency, first_token, first_thought = row.latency_ms, row.first_token_ms, row.first_thought_ms
    if ((latency is None or 0 <= latency < math.inf) and (first_token is None or 0 <= first_token < math.inf)
            and (first_thought is None or 0 <= first_thought < math.inf)
            and all(0 <= value < math.inf for value in row.stages_ms.values())):  # NaN fails both comparisons
        return []
    times = (("latency_ms", latency), ("first_token_ms", first_token), ("first_thought_ms", first_thought),
             *((f"stages_ms.{name}", value) for name, value in row.stages_ms.items()))
    return [(name, value) for name, value in times if value is not None and not 0 <= value < math.inf]


def _repeated(sections: list[str]) -> str | None:
    """The first section id that appears a second time in a ranked list; None when each appears once."""
    seen: set[str] = set()
    for section in sections:
        if section in seen:
            return section
        seen.add(section)
    return None


def score(rows, conditions: dict[str, str], *, gate_only: bool, allow_errors: bool = False,
          record_set: str = "golden", ahead=None):
    """Summary, counts, gates and verdict of a list of rows: a pure function of the rows.

    ``ahead`` (``metrics.summary.Ahead``) holds row values worked out while the run went on.
    The summary reads each record's samples by their mean; the gates read them by the
    conditions' ``rule`` (``metrics.gates.gate_rule``), so under ``majority`` or ``all`` a
    gate's value is that rule's, beside the summary's mean.
    """
    from docpilot.metrics.gates import check_gates, gate_rule, verdict
    from docpilot.metrics.stability import sampled
    from docpilot.metrics.summary import summarize

    summary, counts = summarize(rows, gate_only=gate_only, ahead=ahead)
    rule = gate_rule(conditions)
    read = summary if rule == "mean" or not sampled(rows) else summarize(rows, gate_only=gate_only, ahead=ahead,
                                                                           rule=rule)[0]
    gates = check_gates(read, rows, conditions, gate_only=gate_only, allow_errors=allow_errors,
                        record_set=record_set)
    return summary, counts, gates, verdict(gates)


def headline_intervals(rows, *, gate_only: bool, ahead=None) -> dict[str, tuple[float, float]]:
    """The headline metrics' page-clustered 95 % intervals (``metrics.intervals``), from ``ahead``'s values where
    the run has them."""
    from docpilot.metrics.intervals import headline_intervals as intervals

    return intervals(rows, gate_only=gate_only, ahead=ahead)


def stability_of(rows) -> Stability | None:
    """How steady a run of several samples per record was (``metrics.stability``); None for one sample each."""
    from docpilot.metrics.stability import flip_rate, pass_hat_k, record_stability, sampled

    if not sampled(rows):
        return None
    records = record_stability(rows)
    flaky = sorted((r for r in records if r.flaky), key=lambda r: (r.pass_rate, r.id))
    return Stability(
        samples=max(r.samples for r in records), records=len(records),
        flip_rate=flip_rate(records), pass_hat_k=pass_hat_k(records),
        flaky=[FlakyRecord(id=r.id, samples=r.samples, pass_rate=r.pass_rate, answer_f1_mean=r.answer_f1_mean,
                           answer_f1_spread=r.answer_f1_spread) for r in flaky],
    )


def leaks_of(rows) -> list[LeakFound]:
    """Every forbidden text the attack probes' turns produced, with the probe and where."""
    from docpilot.metrics.attacks import list_leaks

    return list_leaks(rows)


def rescore(report: Report) -> Report:
    """The report with summary, counts, slices, bands, turns, gates and verdict recomputed from its rows alone."""
    from docpilot.metrics.slices import slice_by_overlap, slice_by_tag, slice_by_turn
    from docpilot.metrics.summary import Ahead

    conditions = report.config.get("gates", {}) or {}
    ahead = Ahead()  # the ranked metrics worked out once, for the summary and the intervals
    summary, counts, gates, outcome = score(
        report.rows, conditions, gate_only=report.gate_only, allow_errors=report.allow_errors,
        record_set=report.set, ahead=ahead,
    )
    leaks = leaks_of(report.rows)
    slices = slice_by_tag(report.rows, gate_only=report.gate_only)
    bands = slice_by_overlap(report.rows, gate_only=report.gate_only)
    turns = slice_by_turn(report.rows, gate_only=report.gate_only)
    update = {"summary": summary, "counts": counts, "slices": slices, "bands": bands, "turns": turns, "gates": gates,
              "verdict": outcome,
              "leaks": leaks, "replayed": _replayed(report.rows, gate_only=report.gate_only),
              "stability": stability_of(report.rows),
              "intervals": headline_intervals(report.rows, gate_only=report.gate_only, ahead=ahead)}
    return report.model_copy(update=update)


def _replayed(rows, *, gate_only: bool) -> dict[str, int]:
    from docpilot.metrics.summary import replayed_counts

    return replayed_counts(rows, gate_only=gate_only)


def assemble_report(job, rows, *, wall_ms: float, orchestrator: str, corpus_fingerprint: str,
                    orchestrator_reason: str | None = None, orchestrator_other: str | None = None,
                    page_fingerprints: dict[str, str] | None = None,
                    side_file_fingerprints: dict[str, str | None] | None = None, ahead=None) -> Report:
    """The report of one run: its settings and fingerprints, rows, summary and verdict.

    ``ahead`` (``metrics.summary.Ahead``) holds row values worked out while the run went on.
    """
    from docpilot.clock import command_ms
    from docpilot.config.loading import public_config
    from docpilot.metrics.slices import slice_by_overlap, slice_by_tag, slice_by_turn
    from docpilot.models.registry import model_identity
    from docpilot.reports.changes import comparable_config

    settings = public_config(job.config)
    # The fingerprints hash the settings before redaction, so a value the stored copy hides
    # (a query value) still moves them; what they leave out is what never changes a run's
    # results: URL credentials, the local server's port of the day, and (in the model's)
    # the corpus, which has its own fingerprint.
    compared = redact_config(comparable_config(settings), queries=False)
    model = redact_config(model_identity(job.config.model, corpus_fingerprint=corpus_fingerprint,
                                         chunk_words=job.config.corpus.chunk_words), queries=False)
    model.pop("corpus", None)
    fingerprints = {
        "corpus": corpus_fingerprint,
        "golden": file_fingerprint(job.golden),
        "model": hashlib.sha256(json.dumps(model, sort_keys=True).encode()).hexdigest(),
        "config": hashlib.sha256(json.dumps(compared, sort_keys=True).encode()).hexdigest(),
        "code": code_fingerprint(),
    }
    # Credentials in a base_url and a configured key quoted in an error are removed here,
    # before the report is stored and every readout (HTML, JUnit, Markdown) is made from it.
    config = redact_config(settings)
    rows = [row.model_copy(update={"error": redact(row.error)}) if row.error else row for row in rows]
    summary, counts, gates, outcome = score(
        rows, job.config.gates, gate_only=job.gate_only, allow_errors=job.allow_errors, record_set=job.set,
        ahead=ahead,
    )
    return Report(
        run_id=new_run_id(),
        created_at=now_iso(),
        config=config,
        fingerprints=fingerprints,
        page_fingerprints=page_fingerprints or {},
        side_file_fingerprints=side_file_fingerprints or {},
        set=job.set,
        runtime=job.runtime,
        split=job.split,
        selection=job.selection,
        gate_only=job.gate_only,
        allow_errors=job.allow_errors,
        cache_stats=cache_stats(rows, gate_only=job.gate_only, runtime=job.runtime),
        orchestrator=orchestrator,
        orchestrator_reason=orchestrator_reason,
        orchestrator_other=orchestrator_other,
        wall_ms=round(wall_ms, 1),
        command_ms=round(command_ms(), 1),
        rows=rows,
        summary=summary,
        counts=counts,
        slices=slice_by_tag(rows, gate_only=job.gate_only, ahead=ahead),
        bands=slice_by_overlap(rows, gate_only=job.gate_only, ahead=ahead),
        turns=slice_by_turn(rows, gate_only=job.gate_only, ahead=ahead),
        replayed=_replayed(rows, gate_only=job.gate_only),
        gates=gates,
        verdict=outcome,
        leaks=leaks_of(rows),
        stability=stability_of(rows),
        intervals=headline_intervals(rows, gate_only=job.gate_only, ahead=ahead),
        docpilot_version=__version__,
    )


def cache_stats(rows, *, gate_only: bool, runtime: str = "local") -> dict[str, dict[str, int]]:
    """Per cached stage, how many records reused a stored result and how many computed one."""
    if runtime == "server":
        return {}  # the server runs the stages; nothing is cached on this side
    stages = ("retrieve",) if gate_only else ("retrieve", "model")
    stats = {}
    for stage in stages:
        ran = [r for r in rows if stage == "retrieve" or r.refused_by != "gate"]
        reused = sum(stage in r.cached for r in ran)
        stats[stage] = {"reused": reused, "computed": len(ran) - reused}
    return stats
