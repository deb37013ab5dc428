"""Numbers typed on the command line, held to the same range as the option they set.

Click's own ``FloatRange`` lets ``nan`` through (every comparison with it is false),
and a range typed again here would drift from the model's. So a flag that sets a
config option takes its type from that option's field: ``option_number(ModelConfig,
"concurrency")`` accepts exactly what ``model.concurrency`` accepts in the file.
"""

from __future__ import annotations

from typing import Any

import click
from pydantic import BaseModel

from docpilot.config.ranges import NumberRange, field_range


class RangedNumber(click.ParamType):
    """A whole or finite number within a ``NumberRange``; anything else is a usage error (exit 2)."""

    def __init__(self, numbers: NumberRange) -> None:
        self.numbers = numbers
        self.name = "integer" if numbers.whole else "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number: int | float = value
        else:
            text = str(value).strip()
            try:
                number = int(text) if self.numbers.whole else float(text)
            except ValueError:
                self.fail(f"{value!r} is not {self.numbers.words()}", param, ctx)
        if not self.numbers.holds(number):
            self.fail(f"{value!r} is not {self.numbers.words()}", param, ctx)
        return number

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "INTEGER" if self.numbers.whole else "NUMBER"


def option_number(model: type[BaseModel], field: str) -> RangedNumber:
    """The click type of a flag that sets ``model``'s numeric ``field``."""
    numbers = field_range(model, field)
    if numbers is None:
        raise TypeError(f"{model.__name__}.{field} takes no number")
    return RangedNumber(numbers)


def number(*, whole: bool = False, **bounds: float) -> RangedNumber:
    """The click type of a numeric flag that sets no config option, within ``bounds`` (ge, gt, le, lt)."""
    return RangedNumber(NumberRange(whole=whole, **bounds))
