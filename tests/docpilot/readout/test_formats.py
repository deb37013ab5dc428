"""A new readable format is one renderer module and one entry in ``readout.formats``: both commands take it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import DATA
from tests.support.tree_copy import copy_tree, edit_source, eval_from

PLAIN = '''"""Every record's id and verdict on a line, for the formats' test."""


def render_plain(readout):
    return "".join(f"{row.id}\\n" for row in readout.report.rows)
'''

ENTRY = '''    "plain": Format("docpilot.readout.plain:render_plain", "plain list", "the record ids, one a line", ".txt"),
'''


@pytest.mark.slow
def test_a_format_added_by_one_module_and_one_entry_is_written_by_report_and_eval(tmp_path):
    tree = copy_tree(tmp_path / "tree")
    (tree / "docpilot" / "readout" / "plain.py").write_text(PLAIN, encoding="utf-8")
    edit_source(tree, "docpilot/readout/formats.py", '    "markdown": Format(', ENTRY + '    "markdown": Format(')
    env = dict(os.environ, PYTHONPATH=str(tree))

    listed = tmp_path / "small.txt"
    command = [sys.executable, "-m", "docpilot", "report", str(DATA / "reports" / "small.json"), "--plain", str(listed)]
    result = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"plain: {listed}" in result.stdout and listed.read_text().splitlines()

    ran = tmp_path / "run.txt"
    report = eval_from(tree, tmp_path / "run.json", "--docs", str(DATA / "pipeline" / "docs"),
                       "--golden", str(DATA / "pipeline" / "golden.yaml"), "--orchestrator", "inline",
                       "--plain", str(ran), cwd=tmp_path)
    assert ran.read_text().splitlines() == [row["id"] for row in report["rows"]]
