"""What a golden set can detect before any run: per split, the smallest change each 0/1 outcome's paired test calls.

``golden check`` prints it (and ``--json`` gives it as ``detectable``). With no two runs to read a discordance from, the share of
records whose outcome flips between two versions is assumed (``ASSUMED_DISCORDANCE``);
``improve compare`` and the variants' verdict say the same figure from the discordance
they saw (``docpilot.reports.compare.detectable_change``). Formulas: ``metrics.power``.
"""

from __future__ import annotations

from collections.abc import Sequence

from docpilot.metrics.power import ALPHA, POWER, mcnemar_detectable, records_needed
from docpilot.schema import GoldenRecord

ASSUMED_DISCORDANCE = 0.2
"""The share of records assumed to flip an outcome between two versions, before two runs show it."""

TARGET_CHANGE = 0.1
"""The change in a rate whose records needed ``golden check`` names: ten points."""


def detectable_by_split(records: Sequence[GoldenRecord], *,
                        discordance: float = ASSUMED_DISCORDANCE) -> dict[str, dict[str, dict[str, float | int | None]]]:
    """Split → outcome → its records ``n`` and ``detectable`` change (None: no change would be called).

    ``recall@8`` is paired over the split's positives, ``refusal_correct`` over its
    positives and negatives (``docpilot.reports.compare.OUTCOMES``).
    """
    found: dict[str, dict[str, dict[str, float | int | None]]] = {}
    for split in sorted({r.split for r in records}):
        positives = sum(1 for r in records if r.split == split and r.kind == "positive")
        questions = sum(1 for r in records if r.split == split)
        found[split] = {
            outcome: {"n": n, "detectable": mcnemar_detectable(n, discordance)}
            for outcome, n in (("recall@8", positives), ("refusal_correct", questions))
        }
    return found


def detectable_figures(records: Sequence[GoldenRecord], *, discordance: float = ASSUMED_DISCORDANCE,
                       change: float = TARGET_CHANGE) -> dict:
    """What each split can detect and what it assumes: ``golden check --json``'s ``detectable``, and what its
    text says (``detectable_lines``).

    ``splits`` is ``detectable_by_split``'s; ``records_needed`` is how many records a
    split needs for the test to call a change of ``change`` in a rate.
    """
    return {"test": "mcnemar", "alpha": ALPHA, "power": POWER, "assumed_discordance": discordance,
            "splits": detectable_by_split(records, discordance=discordance),
            "change": change, "records_needed": records_needed(change, discordance)}


def detectable_lines(records: Sequence[GoldenRecord], *, discordance: float = ASSUMED_DISCORDANCE,
                     change: float = TARGET_CHANGE) -> list[str]:
    """``golden check``'s lines: what each split can detect, and how many records a ten-point change needs."""
    figures = detectable_figures(records, discordance=discordance, change=change)
    lines = [f"detectable change (exact McNemar, α {ALPHA:g}, power {POWER:g}, "
             f"assuming {discordance:.0%} of records flip between two versions):"]
    for split, outcomes in figures["splits"].items():
        parts = []
        for outcome, found in outcomes.items():
            seen = found["detectable"]
            parts.append(f"{outcome} ±{seen:.3f} over {found['n']}" if seen is not None
                         else f"{outcome} nothing over {found['n']}")
        lines.append(f"  {split}: " + "; ".join(parts))
    lines.append(f"  a change of {change:g} in a rate needs {figures['records_needed']} records in a split")
    return lines
