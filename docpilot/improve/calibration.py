"""Choosing the retrieval gate's threshold on the dev split.

The gate refuses a question before the model runs when the best retrieval score is
below a threshold. Every candidate threshold trades negatives caught against
positives refused; ``calibration_table`` lists the trade-off at each distinct score,
and ``choose_threshold`` takes the threshold that catches the most negatives while the
one-sided 95 % Wilson upper bound of the gate's over-refusal stays within the target
(so a small dev split cannot talk itself into a threshold it cannot support).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from docpilot.errors import ConfigError
from docpilot.reports.output import write_atomically
from docpilot.schema import Row
from metrics.refusals import wilson_upper


class Candidate(BaseModel):
    """One threshold and what the gate would do with it on the rows given."""

    model_config = ConfigDict(extra="forbid")

    threshold: float
    """Refuse when the best retrieval score is below this."""
    negatives_caught: float | None
    """Share of negatives the gate would refuse; None without negatives."""
    over_refusal_gate: float | None
    """Share of positives the gate would refuse; None without positives."""
    over_refusal_gate_upper95: float | None
    """One-sided 95 % Wilson upper bound of that share."""
    negatives: int
    """Negatives the shares are taken over."""
    positives: int
    """Positives the shares are taken over."""


def _top(row: Row) -> float:
    return row.scores[0] if row.scores else 0.0


def calibration_table(rows: Sequence[Row]) -> list[Candidate]:
    """The gate's trade-off at 0 and at each distinct best score of the rows, ascending."""
    positives = [_top(r) for r in rows if r.kind == "positive"]
    negatives = [_top(r) for r in rows if r.kind == "negative"]
    thresholds = sorted({0.0, *positives, *negatives})
    # One step past the highest score refuses everything: the far end of the trade-off.
    thresholds.append(round(thresholds[-1] + 0.001, 6))
    table = []
    for t in thresholds:
        refused_pos = sum(s < t for s in positives)
        table.append(
            Candidate(
                threshold=t,
                negatives_caught=sum(s < t for s in negatives) / len(negatives) if negatives else None,
                over_refusal_gate=refused_pos / len(positives) if positives else None,
                over_refusal_gate_upper95=wilson_upper(refused_pos, len(positives)) if positives else None,
                negatives=len(negatives),
                positives=len(positives),
            )
        )
    return table


def choose_threshold(table: Sequence[Candidate], target: float) -> Candidate | None:
    """The candidate catching the most negatives with its over-refusal bound within target.

    Ties go to the lowest threshold (the fewest positives put at risk). None when no
    candidate meets the target.
    """
    allowed = [c for c in table if c.over_refusal_gate_upper95 is not None and c.over_refusal_gate_upper95 <= target]
    if not allowed:
        return None
    return max(allowed, key=lambda c: (c.negatives_caught or 0.0, -c.threshold))


def write_guard(path: str | Path, threshold: float) -> None:
    """Set ``guard.mode: on`` and ``guard.threshold`` in a YAML config, keeping everything else.

    The file is edited line by line, so comments and layout survive; a missing file or
    a missing guard section is created. Written atomically.
    """
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    values = {"mode": '"on"', "threshold": repr(float(threshold))}  # exact: a rounded-up threshold would refuse more
    start = next((i for i, line in enumerate(lines) if re.match(r"^guard:\s*(#.*)?$", line)), None)
    if start is None:
        if any(line.startswith("guard:") for line in lines):
            raise ConfigError(
                "the guard section is written in a form calibrate cannot edit",
                path=path,
                hint="write it as a block (guard: then indented mode: and threshold: lines)",
            )
        lines += ["", "guard:"] + [f"  {k}: {v}" for k, v in values.items()]
    else:
        end = start + 1
        while end < len(lines) and (lines[end].startswith((" ", "\t")) or not lines[end].strip()):
            end += 1
        for key, value in values.items():
            pattern = re.compile(rf"^(\s+){key}:\s*[^#\n]*?(\s*#.*)?$")
            for i in range(start + 1, end):
                found = pattern.match(lines[i])
                if found:
                    lines[i] = f"{found.group(1)}{key}: {value}" + (found.group(2) or "")
                    break
            else:
                lines.insert(start + 1, f"  {key}: {value}")
                end += 1
    write_atomically(path, "\n".join(lines) + "\n", "config")
