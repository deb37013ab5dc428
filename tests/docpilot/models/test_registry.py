"""A new model provider is one module and one entry in the registry: the config, the CLI and the run follow."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from docpilot.models.registry import PROVIDERS, flag_overrides, provider_help
from tests.conftest import DATA
from tests.support.tree_copy import copy_tree, edit_source, eval_from

ECHO = '''"""A provider that answers every question with its first source's title, for the registry's test."""

from __future__ import annotations

from docpilot.models.base import Reply, read_reply


class EchoModel:
    async def complete(self, prompt):
        title = prompt.sources[0].title if prompt.sources else "nothing"
        return read_reply(Reply(answer=f"See {title} [1].", latency_ms=1.0, first_token_ms=1.0, finish_reason="stop"))


def build(settings, *, corpus, idf=None):
    return EchoModel()
'''

ENTRY = '''    "echo": Provider("docpilot.models.echo", ("docpilot.models.echo",), endpoint="none",
                     default_name="echo-1", summary="echoes its first source"),
'''


@pytest.mark.slow
def test_a_provider_added_by_one_module_and_one_entry_runs_an_eval_from_the_cli(tmp_path):
    tree = copy_tree(tmp_path / "tree")
    (tree / "docpilot" / "models" / "echo.py").write_text(ECHO, encoding="utf-8")
    edit_source(tree, "docpilot/models/registry.py", '    "openai": Provider(\n', ENTRY + '    "openai": Provider(\n')

    env = dict(os.environ, PYTHONPATH=str(tree))
    shown = subprocess.run([sys.executable, "-m", "docpilot", "eval", "--help"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert "echo" in shown.stdout and "echoes its first source" in shown.stdout.replace("\n", " ")

    report = eval_from(
        tree, tmp_path / "report.json", "--provider", "echo", "--docs", str(DATA / "pipeline" / "docs"),
        "--golden", str(DATA / "pipeline" / "golden.yaml"), "--orchestrator", "inline", cwd=tmp_path,
    )
    assert report["config"]["model"]["provider"] == "echo" and report["config"]["model"]["name"] == "echo-1"
    answered = [row for row in report["rows"] if row["answer"]]
    assert answered and all(row["answer"].startswith("See ") and row["error"] is None for row in answered)


def test_the_cli_choices_and_defaults_come_from_the_registry():
    assert set(PROVIDERS) == {"extractive", "openai", "local"}
    assert all(name in provider_help() for name in PROVIDERS)
    assert flag_overrides(provider="local")["model"] == {
        "provider": "local", "name": "SmolLM2-135M-Instruct", "base_url": None, "concurrency": 1,
    }
    assert flag_overrides(provider="openai")["model"]["name"] == "gpt-4o-mini"
    assert flag_overrides(provider="openai", model="mine", concurrency=4)["model"]["concurrency"] == 4
    assert flag_overrides()["model"]["name"] is None
