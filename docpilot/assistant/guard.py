"""The retrieval gate: refusing before the model when the best evidence is too weak.

One rule for the eval's prime stage and the server's turn, so a question the gate
refuses in an eval is refused the same way when the assistant is served.
"""

from __future__ import annotations

from collections.abc import Sequence

from docpilot.config.model import GuardConfig
from docpilot.retrieval.rankers import Hit


def gate_refuses(guard: GuardConfig, hits: Sequence[Hit]) -> bool:
    """Whether the gate refuses: it is on and the top hit scores below its threshold (no hit scores 0)."""
    top = hits[0].score if hits else 0.0
    return guard.mode == "on" and top < guard.threshold
