"""What a command loads before its first piece of work: its own code, not every command's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from docpilot.cli import COMMANDS, main
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

OTHER_COMMANDS = sorted({f"docpilot.cli.{module}" for module in COMMANDS.values()} - {"docpilot.cli.eval"})


def _fresh(code: str, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_an_eval_loads_no_other_commands_code(tmp_path):
    code = (
        "import json, sys\n"
        "from docpilot.cli import main\n"
        "try:\n"
        "    main(['eval', '--gate-only', '--orchestrator', 'inline', '--out', sys.argv[1]])\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        "print(json.dumps({'code': code, 'loaded': sorted(m for m in sys.modules if m.startswith('docpilot.cli.'))}))\n"
    )
    result = _fresh(code, str(tmp_path / "r.json"))
    assert result["code"] == 0
    assert "docpilot.cli.eval" in result["loaded"]
    assert not set(OTHER_COMMANDS) & set(result["loaded"])
    assert (tmp_path / "r.json").exists()


def test_checking_the_gates_needs_no_numpy(tmp_path):
    # The endpoint's probe goes out right after the settings are checked; NumPy loads after it.
    config = tmp_path / "docpilot.yaml"
    config.write_text('gates: {"recall@8": ">= 0.8", "answer_f1": ">= 0.5", "errors": "== 0"}\n')
    code = (
        "import json, sys\n"
        "from docpilot.cli.eval import check_settings\n"
        "from docpilot.config.loading import load_config\n"
        "config = load_config(sys.argv[1])\n"
        "check_settings(config)\n"
        "print(json.dumps({'gates': len(config.gates), 'numpy': 'numpy' in sys.modules}))\n"
    )
    result = _fresh(code, str(config))
    assert result == {"gates": 3, "numpy": False}


def test_help_lists_every_command_with_its_summary():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == sorted(COMMANDS)
    assert "Run the golden set through the assistant" in result.output


def test_an_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(main, ["evaluate"])
    assert result.exit_code == 2 and "No such command 'evaluate'" in result.output
