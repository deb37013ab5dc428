"""The metrics package stays free of the orchestrator (STYLE §1)."""

from __future__ import annotations

import subprocess
import sys


def test_importing_metrics_does_not_import_prefect() -> None:
    code = (
        "import sys\n"
        "import docpilot.schema, metrics\n"
        "from metrics import answer, attacks, citations, gates, gold, latency\n"
        "from metrics import refusals, registry, relevance, retrieval, summary\n"
        "leaked = sorted(m for m in sys.modules if m == 'prefect' or m.startswith('prefect.'))\n"
        "print(','.join(leaked))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""
