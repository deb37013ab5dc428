"""What the demo set can detect, per split, as golden check prints it: held to a simulation of the real test."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from docpilot.metrics.power import mcnemar_power, records_needed

from docpilot.cli import main
from docpilot.reports.compare import mcnemar
from docpilot.reports.detectable import ASSUMED_DISCORDANCE, detectable_by_split, detectable_figures, detectable_lines
from docpilot.run.job import read_records
from tests.conftest import ROOT

DEMO = ROOT / "evals" / "golden.yaml"


def _simulated_power(n: int, psi: float, delta: float, reps: int, seed: int) -> float:
    """How often the real exact McNemar test calls a change δ on n records that flip with probability ψ."""
    rng = np.random.default_rng(seed)
    called = 0
    for _ in range(reps):
        kinds = rng.choice(3, size=n, p=[(psi + delta) / 2, (psi - delta) / 2, 1 - psi])  # better, worse, same
        a = [0.0 if k == 0 else 1.0 for k in kinds]
        b = [0.0 if k == 1 else 1.0 for k in kinds]
        called += mcnemar(a, b)[2] < 0.05
    return called / reps


@pytest.mark.parametrize("split", ["dev", "test"])
def test_the_demo_sets_detectable_change_matches_a_simulation_of_the_paired_test(split):
    found = detectable_by_split(read_records(str(DEMO)))[split]
    for outcome in ("recall@8", "refusal_correct"):
        n, delta = found[outcome]["n"], found[outcome]["detectable"]
        psi = max(ASSUMED_DISCORDANCE, delta)
        reps = 2000
        simulated = _simulated_power(n, psi, delta, reps, seed=n)
        exact = mcnemar_power(n, psi, delta)
        assert exact >= 0.8
        assert abs(simulated - exact) <= 3 * np.sqrt(exact * (1 - exact) / reps)


def test_the_demo_sets_detectable_change_shrinks_as_the_set_grows():
    records = read_records(str(DEMO))
    once = detectable_by_split(records)["dev"]["refusal_correct"]
    twice = detectable_by_split([*records, *records])["dev"]["refusal_correct"]
    four = detectable_by_split([*records] * 4)["dev"]["refusal_correct"]
    assert twice["n"] == 2 * once["n"] and once["detectable"] > twice["detectable"] > four["detectable"]


@pytest.mark.slow  # reads the demo docs
def test_golden_check_prints_what_each_split_can_detect(monkeypatch):
    monkeypatch.chdir(ROOT)
    lines = detectable_lines(read_records(str(DEMO)))
    result = CliRunner().invoke(main, ["golden", "check"])
    assert result.exit_code in (0, 1), result.output
    assert all(line in result.output for line in lines)
    assert lines[1].startswith("  dev: recall@8 ±") and "a change of 0.1 in a rate needs" in lines[-1]


def test_the_figures_are_what_the_lines_say():
    records = read_records(str(DEMO))
    figures = detectable_figures(records)
    assert figures["splits"] == detectable_by_split(records) and figures["records_needed"] == records_needed(0.1, 0.2)
    assert (figures["test"], figures["alpha"], figures["power"], figures["assumed_discordance"], figures["change"]) == (
        "mcnemar", 0.05, 0.8, ASSUMED_DISCORDANCE, 0.1)
    lines = detectable_lines(records)
    for split, outcomes in figures["splits"].items():
        line = next(line for line in lines if line.startswith(f"  {split}: "))
        for outcome, found in outcomes.items():
            assert f"{outcome} ±{found['detectable']:.3f} over {found['n']}" in line
    assert f"needs {figures['records_needed']} records in a split" in lines[-1]


@pytest.mark.slow  # reads the demo docs
def test_golden_check_json_gives_the_detectable_change_the_text_prints(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["golden", "check", "--json"])
    assert result.exit_code in (0, 1), result.output
    shown = json.loads(result.output)["detectable"]
    assert shown == detectable_figures(read_records(str(DEMO)))
    dev = shown["splits"]["dev"]
    # the demo set's dev split: its single questions and its conversations' turns
    assert dev["recall@8"]["n"] == 56 and dev["refusal_correct"]["n"] == 66
    assert round(dev["recall@8"]["detectable"], 3) == 0.167 and round(dev["refusal_correct"]["detectable"], 3) == 0.155
    assert shown["records_needed"] == 168
