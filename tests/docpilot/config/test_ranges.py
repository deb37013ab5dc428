"""Every numeric option has a range, and every layer holds a value to it.

The options are read off the model itself, so an option added without bounds, or
with bounds its default breaks, is caught here; the command-line runs of the same
checks are in tests/docpilot/cli/test_number_options.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from docpilot.config.loading import load_config
from docpilot.config.model import Config
from docpilot.config.ranges import NumberRange, numeric_options
from docpilot.errors import ConfigError

OPTIONS = numeric_options(Config)
NOT_NUMBERS = {".nan": "nan", ".inf": "inf", "-.inf": "-inf", "true": "true"}


def _file(tmp_path: Path, dotted: str, value: str) -> Path:
    """A config file setting the option ``dotted`` to ``value`` as written, on its last line."""
    *sections, key = dotted.split(".")
    lines = [f"{'  ' * depth}{section}:" for depth, section in enumerate(sections)]
    lines.append(f"{'  ' * len(sections)}{key}: {value}")
    path = tmp_path / "docpilot.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _error(*args, **kwargs) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(*args, **kwargs)
    return str(caught.value)


def test_the_sweep_finds_every_numeric_option():
    assert len(OPTIONS) >= 29
    assert {"retrieval.k1", "retrieval.b", "guard.threshold", "model.temperature"} <= set(OPTIONS)


@pytest.mark.parametrize("dotted", OPTIONS)
def test_every_numeric_option_is_bounded_and_its_default_is_inside(dotted):
    numbers = OPTIONS[dotted]
    assert numbers.ge is not None or numbers.gt is not None, f"{dotted} has no lower bound"
    assert numbers.default is None or numbers.holds(numbers.default), dotted


# Regression: float options took nan and infinity from the file (`retrieval.k1: .nan` ran to recall@8 0.000).
@pytest.mark.parametrize("written", NOT_NUMBERS)
@pytest.mark.parametrize("dotted", OPTIONS)
def test_no_numeric_option_takes_nan_infinity_or_true_from_the_file(tmp_path, dotted, written):
    path = _file(tmp_path, dotted, written)
    line = dotted.count(".") + 1
    words = OPTIONS[dotted].words()
    assert f"{path}:{line}: {dotted} must be {words}, got {NOT_NUMBERS[written]}" in _error(path, env={})


# Regression: the environment's `nan` reached float options (`DOCPILOT_RETRIEVAL__B=nan`).
@pytest.mark.parametrize("dotted", OPTIONS)
def test_no_numeric_option_takes_nan_from_the_environment(tmp_path, monkeypatch, dotted):
    monkeypatch.chdir(tmp_path)
    variable = "DOCPILOT_" + dotted.upper().replace(".", "__")
    text = _error(env={variable: "nan"})
    assert text.startswith(f"environment variable {variable}='nan': {dotted} must be {OPTIONS[dotted].words()}")


def _edges(numbers: NumberRange) -> tuple[list[float], list[float]]:
    """Values just inside the range and just outside it."""
    step = 1 if numbers.whole else 0.001
    inside, outside = [], []
    for bound, closed, direction in ((numbers.ge, True, -1), (numbers.gt, False, -1),
                                     (numbers.le, True, 1), (numbers.lt, False, 1)):
        if bound is None:
            continue
        (inside if closed else outside).append(bound)
        outside.append(bound + direction * step)
        if not closed:
            inside.append(bound - direction * step)
    return inside, outside


@pytest.mark.parametrize("dotted", OPTIONS)
def test_each_bound_is_where_the_model_says(tmp_path, monkeypatch, dotted):
    monkeypatch.chdir(tmp_path)  # no configs/docpilot.yaml here: the flags layer stands alone
    inside, outside = _edges(OPTIONS[dotted])
    *sections, key = dotted.split(".")
    for value in inside + outside:
        overrides: dict = {key: value}
        for section in reversed(sections):
            overrides = {section: overrides}
        if value in inside:
            load_config(_file(tmp_path, dotted, repr(value)), env={})
            load_config(env={}, overrides=overrides)
        else:
            assert f"{dotted} must be {OPTIONS[dotted].words()}" in _error(_file(tmp_path, dotted, repr(value)), env={})
            assert f"command-line option: {dotted} must be" in _error(env={}, overrides=overrides)


def test_an_empty_optional_number_is_still_allowed(tmp_path):
    config = load_config(_file(tmp_path, "model.price_prompt_per_million", "null"), env={})
    assert config.model.price_prompt_per_million is None


def test_the_message_offers_the_default_as_an_example(tmp_path):
    text = _error(_file(tmp_path, "retrieval.k1", "0"), env={})
    assert "retrieval.k1 must be a finite number > 0, got 0" in text
    assert "fix: write a finite number > 0, such as 1.2, the default" in text
