"""The range of each numeric option, read off the configuration model and said in words.

A bound is written once, on the option's field in ``docpilot.config.model``; the
messages of the config loader, the command line's number types and the docs all
take it from there, so a file, a variable and a flag are held to the same range.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, get_args, get_origin

import annotated_types
from pydantic import BaseModel


@dataclass(frozen=True)
class NumberRange:
    """Which numbers an option takes: whole or not, and its bounds (None where open)."""

    whole: bool
    """Only whole numbers."""
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    optional: bool = False
    """Empty (null) is also allowed."""
    default: Any = None
    """The option's default, shown as an example."""

    def words(self) -> str:
        """The range as a person would say it: `a finite number > 0`, `a whole number from 1 to 1,024`."""
        what = "a whole number" if self.whole else "a finite number"
        low = (">=", self.ge) if self.ge is not None else (">", self.gt) if self.gt is not None else None
        high = ("<=", self.le) if self.le is not None else ("<", self.lt) if self.lt is not None else None
        if low and high and low[0] == ">=" and high[0] == "<=":
            said = f"{what} from {_number(low[1])} to {_number(high[1])}"
            return f"{said} (or null)" if self.optional else said
        parts = [f"{side[0]} {_number(side[1])}" for side in (low, high) if side]
        said = f"{what} {' and '.join(parts)}" if parts else what
        return f"{said} (or null)" if self.optional else said

    def holds(self, value: float) -> bool:
        """Whether ``value`` is in the range (finite, whole where it must be, within the bounds)."""
        if not math.isfinite(value) or (self.whole and value != int(value)):
            return False
        return not ((self.ge is not None and value < self.ge) or (self.gt is not None and value <= self.gt)
                    or (self.le is not None and value > self.le) or (self.lt is not None and value >= self.lt))

    def example(self) -> str:
        """A value to write instead: the default when there is one."""
        if self.default is None:
            return ""
        return f"such as {self.default!r}, the default" if isinstance(self.default, float) else \
            f"such as {self.default}, the default"


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


def field_range(model: type[BaseModel], name: str) -> NumberRange | None:
    """The range of ``model``'s numeric field ``name``; None for a field that takes no number."""
    info = model.model_fields.get(name)
    if info is None:
        return None
    annotation, optional = info.annotation, False
    if get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        optional = len(members) < len(get_args(annotation))
        annotation = members[0] if len(members) == 1 else None
    if annotation not in (int, float):
        return None
    bounds = {}
    for item in info.metadata:
        for key, kind in (("ge", annotated_types.Ge), ("gt", annotated_types.Gt),
                          ("le", annotated_types.Le), ("lt", annotated_types.Lt)):
            if isinstance(item, kind):
                bounds[key] = getattr(item, key)
    return NumberRange(whole=annotation is int, optional=optional, default=info.default, **bounds)


def option_range(model: type[BaseModel], loc: Sequence[Any]) -> NumberRange | None:
    """The range of the option at ``loc`` (such as ``("retrieval", "k1")``) under ``model``.

    None when the option takes no number.
    """
    for key in loc[:-1]:
        info = model.model_fields.get(key) if isinstance(key, str) else None
        annotation = info.annotation if info is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return field_range(model, loc[-1]) if loc and isinstance(loc[-1], str) else None


def numeric_options(model: type[BaseModel], prefix: str = "") -> dict[str, NumberRange]:
    """Every numeric option under ``model`` by its dotted name, in field order."""
    found: dict[str, NumberRange] = {}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found.update(numeric_options(annotation, f"{prefix}{name}."))
        elif (numbers := field_range(model, name)) is not None:
            found[prefix + name] = numbers
    return found
