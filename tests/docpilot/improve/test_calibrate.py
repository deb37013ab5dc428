"""Gate calibration: the trade-off table, the choice under the Wilson bound, and the config edit."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from docpilot.metrics.refusals import wilson_upper

from docpilot.cli import main
from docpilot.config.loading import load_config
from docpilot.improve.calibration import (
    calibration_table,
    choose_threshold,
    write_guard,
)
from docpilot.schema import Row
from tests.conftest import DATA, ROOT


def row(kind: str, top: float | None) -> Row:
    return Row(id=f"{kind}-{top}", kind=kind, split="dev", question="q", gold=["p"] if kind == "positive" else [],
               scores=[] if top is None else [top, 0.1])


ROWS = [row("positive", s) for s in (5.0, 6.0, 7.0, 8.0, 2.0)] + [row("negative", s) for s in (1.0, 3.0, None)]


def test_the_table_counts_what_each_threshold_refuses():
    table = {c.threshold: c for c in calibration_table(ROWS)}
    assert table[0.0].negatives_caught == 0 and table[0.0].over_refusal_gate == 0
    assert table[1.0].negatives_caught == pytest.approx(1 / 3)  # only the no-hit negative (score 0)
    assert table[3.0].negatives_caught == pytest.approx(2 / 3) and table[3.0].over_refusal_gate == pytest.approx(1 / 5)
    assert table[3.0].over_refusal_gate_upper95 == pytest.approx(wilson_upper(1, 5))
    assert max(table) > 8.0 and table[max(table)].over_refusal_gate == 1.0


def test_the_choice_catches_most_negatives_within_the_bound():
    table = calibration_table(ROWS)
    loose = choose_threshold(table, target=0.7)
    assert loose.threshold == 5.0 and loose.negatives_caught == 1.0  # refuses 3.0, 1.0, 0 and the 2.0 positive
    strict = choose_threshold(table, target=wilson_upper(0, 5))
    assert strict.over_refusal_gate == 0 and strict.threshold == 2.0
    assert choose_threshold(table, target=0.01) is None


def test_write_guard_keeps_comments_and_other_options(tmp_path):
    config = tmp_path / "docpilot.yaml"
    config.write_text((ROOT / "configs" / "docpilot.yaml").read_text())
    write_guard(config, 2.5)
    text = config.read_text()
    assert "# off: only the model refuses" in text
    before = (ROOT / "configs" / "docpilot.yaml").read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, text.splitlines(), strict=True) if a != b]
    assert [b.split("#")[0].strip() for _, b in changed] == ['mode: "on"', "threshold: 2.5"]  # every other byte kept
    loaded = load_config(config)
    assert loaded.guard.mode == "on" and loaded.guard.threshold == 2.5
    assert loaded.model_dump(exclude={"guard"}) == load_config(ROOT / "configs" / "docpilot.yaml").model_dump(exclude={"guard"})


def test_write_guard_adds_a_missing_section(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("shard_size: 10\n")
    write_guard(config, 1.25)
    assert yaml.safe_load(config.read_text()) == {"shard_size": 10, "guard": {"mode": "on", "threshold": 1.25}}


def test_the_command_prints_the_table_and_writes_the_threshold(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("gates: {}\n")
    pipeline = DATA / "pipeline"
    result = CliRunner().invoke(main, ["calibrate", "--config", str(config), "--docs", str(pipeline / "docs"),
                                       "--golden", str(pipeline / "golden.yaml"), "--target", "0.9", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["chosen"]["negatives_caught"] == 1.0  # the dev negative retrieves nothing
    assert payload["written"] == str(config)
    assert load_config(config).guard.threshold == payload["chosen"]["threshold"]


# Regression: the threshold was written by regular expressions at two spaces into a guard
# block indented by four, and the file no longer parsed; it was also left at mode 0600.
def test_write_guard_keeps_a_four_space_config_valid_and_its_mode(tmp_path):
    config = tmp_path / "docpilot.yaml"
    config.write_text(
        "# team settings\n"
        "guard:\n"
        "    mode: 'off'      # the model refuses alone\n"
        "    threshold: 0.0\n"
        "    max_over_refusal: 0.2\n"
        "gates:\n"
        "    recall@8: '>= 0.8'\n"
    )
    config.chmod(0o644)
    write_guard(config, 3.07745)
    text = config.read_text()
    assert "    threshold: 3.07745\n" in text and "    max_over_refusal: 0.2\n" in text
    assert "# team settings" in text and "# the model refuses alone" in text
    assert yaml.safe_load(text)["guard"] == {"mode": "on", "threshold": 3.07745, "max_over_refusal": 0.2}
    assert load_config(config).guard.threshold == 3.07745
    assert config.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["docpilot.yaml"]  # no temporary file left beside it
