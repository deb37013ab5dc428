"""How steady a run of several samples per record was, in words: the scorecard's lines and the readouts' list.

The numbers are the report's ``stability`` (``docpilot.reports.report.stability_of``,
formulas in ``metrics.stability``); this module only says them.
"""

from __future__ import annotations

from rich.console import Console

from docpilot.reports.terminal import clean
from docpilot.schema import FlakyRecord, Report, VariantResult

MAX_FLAKY = 10
"""Flaky records the scorecard names; the rest are counted."""


def render_stability(report: Report, console: Console) -> None:
    """Print a run of several samples per record's stability line and its flaky records (the scorecard's part)."""
    for line in filter(None, [stability_line(report), *flaky_lines(report)]):
        # markup=False, clean: record ids come from the golden file.
        console.print(clean(line), highlight=False, markup=False)


def stability_line(report: Report | VariantResult) -> str | None:
    """One line: samples per record, flip rate and pass^k; None for a run of one sample per record.
    A variant of a run of several says its own."""
    found = report.stability
    if found is None:
        return None
    rate = "n/a" if found.flip_rate is None else f"{found.flip_rate:.3f}"
    every = "n/a" if found.pass_hat_k is None else f"{found.pass_hat_k:.3f}"
    return (f"samples: {found.samples} per record, {found.records} records; flip rate {rate} "
            f"({len(found.flaky)} flaky), pass^{found.samples} {every}")


def flaky_lines(report: Report | VariantResult, *, limit: int = MAX_FLAKY) -> list[str]:
    """The flaky records, lowest pass rate first, one line each; empty when none is flaky."""
    found = report.stability
    if found is None or not found.flaky:
        return []
    lines = [f"flaky records ({len(found.flaky)}): outcome differed between samples"]
    lines += [f"  {describe_flaky(record)}" for record in found.flaky[:limit]]
    if len(found.flaky) > limit:
        lines.append(f"  … and {len(found.flaky) - limit} more (the report's stability.flaky)")
    return lines


def describe_flaky(record: FlakyRecord) -> str:
    """A flaky record in a few words: its id, how many samples passed, its answer F1's mean and spread."""
    passed = round(record.pass_rate * record.samples)
    text = f"{record.id}: {passed} of {record.samples} samples passed"
    if record.answer_f1_mean is not None:
        text += f", answer F1 {record.answer_f1_mean:.3f}"
        if record.answer_f1_spread is not None:
            text += f" ± {record.answer_f1_spread:.3f}"
    return text
