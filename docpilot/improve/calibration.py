"""Choosing the retrieval gate's threshold on the dev split.

The gate refuses a question before the model runs when the best retrieval score is
below a threshold. Every candidate threshold trades negatives caught against
positives refused; ``calibration_table`` lists the trade-off at each distinct score,
and ``choose_threshold`` takes the threshold that catches the most negatives while the
one-sided 95 % Wilson upper bound of the gate's over-refusal stays within the target
(so a small dev split cannot talk itself into a threshold it cannot support).
"""

from __future__ import annotations

import io
import math
import stat
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from ruamel.yaml import YAML, CommentedMap, YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from ruamel.yaml.util import load_yaml_guess_indent

from docpilot.errors import ConfigError
from docpilot.metrics.refusals import wilson_upper
from docpilot.reports.output import write_atomically
from docpilot.schema import Row


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


def top_score(row: Row) -> float:
    """The best retrieval score of a row, the number the gate compares (0 with nothing retrieved)."""
    return row.scores[0] if row.scores else 0.0


def threshold_below(score: float) -> float:
    """The largest two-decimal threshold not above ``score``: a gate there lets the record through."""
    value = math.floor(score * 100 + 1e-9) / 100
    return round(value - 0.01 if value > score else value, 2)


def threshold_above(score: float) -> float:
    """The smallest two-decimal threshold above ``score``: a gate there refuses the record."""
    value = math.floor(score * 100 + 1e-9) / 100 + 0.01
    return round(value + 0.01 if value <= score else value, 2)


def threshold_effect(rows: Sequence[Row], threshold: float) -> str:
    """What a gate at ``threshold`` would refuse among a run's rows, in a sentence."""
    positives = [r for r in rows if r.kind == "positive"]
    negatives = [r for r in rows if r.kind == "negative"]
    lost = [r.id for r in positives if top_score(r) < threshold]
    caught = [r.id for r in negatives if top_score(r) < threshold]
    shown = ", ".join(lost[:5]) + (" …" if len(lost) > 5 else "")
    return (f"on this run the gate would refuse {len(caught)} of {len(negatives)} negatives and "
            f"{len(lost)} of {len(positives)} positives" + (f" ({shown})" if lost else ""))


def calibration_table(rows: Sequence[Row]) -> list[Candidate]:
    """The gate's trade-off at 0 and at each distinct best score of the rows, ascending."""
    positives = [top_score(r) for r in rows if r.kind == "positive"]
    negatives = [top_score(r) for r in rows if r.kind == "negative"]
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
    """Set ``guard.mode: on`` and ``guard.threshold`` in a YAML config, keeping everything else (see ``write_config``)."""
    # quoted: a bare on is a boolean to YAML 1.1 readers; exact: a rounded-up threshold would refuse more
    write_config(path, "guard", {"mode": DoubleQuotedScalarString("on"), "threshold": float(threshold)})


def write_config(path: str | Path, section: str, values: dict[str, object]) -> None:
    """Set ``values`` in one section of a YAML config, keeping everything else.

    The file is read and written by a round-trip YAML parser, so comments, key order and
    the file's own indentation survive; a missing file or section is created. The
    file is replaced atomically and keeps its permissions.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    yaml = YAML()  # round trip
    yaml.preserve_quotes = True
    yaml.width = 4096  # long lines stay as they were written
    yaml.representer.add_representer(type(None), _null)
    try:
        _, indent, offset = load_yaml_guess_indent(text) if text.strip() else (None, 2, 0)
        document = yaml.load(text) if text.strip() else None
    except YAMLError as exc:
        raise ConfigError(f"the config is not valid YAML: {exc}", path=path,
                          hint="fix the YAML, then run the command again") from None
    if document is None:
        document = CommentedMap()
    if not isinstance(document, CommentedMap):
        raise ConfigError("the config's top level is not a mapping of sections", path=path,
                          hint=f"start the file with sections such as `{section}:`")
    mapping = document.get(section)
    if mapping is None:
        mapping = document[section] = CommentedMap()
    if not isinstance(mapping, CommentedMap):
        raise ConfigError(f"the {section} section is not a mapping", path=path,
                          hint=f"write it as `{section}:` with `{next(iter(values))}:` beneath")
    for key, value in values.items():
        mapping[key] = value
    yaml.indent(mapping=indent or 2, sequence=(indent or 2) + (offset or 0), offset=offset or 0)
    buffer = io.StringIO()
    yaml.dump(document, buffer)
    # The user's own file, edited in place: it keeps its mode; a new one gets the outputs' mode.
    mode = stat.S_IMODE(path.stat().st_mode) if path.is_file() else None
    write_atomically(path, buffer.getvalue(), "config", mode=mode)


def _null(representer, _value):
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")  # as people write it, not empty

