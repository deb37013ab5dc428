"""Vocabulary entries chosen over every failing dev record, and `docpilot improve --apply` writing them.

The module builds a small docs folder on disk and runs the real `docpilot eval --gate-only`
on it once, in a fresh process; each test gets its own copy of those files (docs, report
and cache) and runs the real `docpilot improve` on them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docpilot.corpus.pages import load_corpus
from docpilot.improve.evidence import Evidence, content_word
from docpilot.improve.taxonomy import RunSettings
from docpilot.improve.vocabulary import spelling_variants
from docpilot.reports.report import load_report

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]

# Twenty-four filler pages, each a section on its own topic that says "widget": "widget"
# is then a word of every page, and no entry may map from or to it.
_TOPICS = [
    "install", "upgrade", "backup", "restore", "logging", "metrics", "tracing", "alerts", "quotas", "billing",
    "regions", "networking", "storage", "queues", "workers", "secrets", "tokens", "webhooks", "plugins",
    "templates", "exports", "imports", "search", "archives",
]


def _docs(root: Path, vocabulary: str | None = None) -> Path:
    docs = root / "docs"
    for topic in _TOPICS:
        page = docs / f"{topic}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"# {topic.title()}\n\n## {topic.title()} settings\n\n"
                        f"The widget {topic} settings control {topic} for every widget.\n", encoding="utf-8")
    (docs / "themes.md").write_text(
        "# Themes\n\n## Color palette\n\nPick the color palette of the dashboard in Settings, then save.\n",
        encoding="utf-8")
    (docs / "shutdown.md").write_text(
        "# Shutdown\n\n## Graceful stop\n\nSend SIGTERM; the widget finishes its current job first.\n",
        encoding="utf-8")
    if vocabulary is not None:
        (docs / "vocabulary.json").write_text(vocabulary, encoding="utf-8")
    return docs


_GOLDEN = """
- id: colour
  question: "Can the colour be changed?"
  gold: ["themes#color-palette"]
  split: dev
- id: turn-off
  question: "How do I turn it off?"
  gold: ["shutdown#graceful-stop"]
  split: dev
- id: backup
  question: "How do I back up everything?"
  gold: ["backup#backup-settings"]
  split: dev
- id: dashboard
  question: "Where do I pick the dashboard palette?"
  gold: ["themes#color-palette"]
  split: dev
- id: held-out
  question: "Which colour schemes are there?"
  gold: ["themes#color-palette"]
  split: test
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "DOCPILOT_CACHE_DIR": str(tmp_path / "cache"),
            "DOCPILOT_REPORTS_DIR": str(tmp_path / "reports"), "PYTHONPATH": str(ROOT)}


def _docpilot(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "docpilot", *args], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def _dev_run(tmp_path_factory) -> Path:
    """The folder of one dev gate-only run over the small docs, made once for the module and never changed:
    docs/, golden.yaml, the report dev.json, and the cache (with its index) the run filled."""
    folder = tmp_path_factory.mktemp("dev-run")
    docs = _docs(folder, '{\n    "auth": "tokens",\n    "sso": ["tokens", "secrets"]\n}\n')
    golden = folder / "golden.yaml"
    golden.write_text(_GOLDEN, encoding="utf-8")
    done = _docpilot(folder, "eval", "--gate-only", "--split", "dev", "--docs", str(docs),
                     "--golden", str(golden), "--out", str(folder / "dev.json"))
    assert done.returncode in (0, 1), done.stderr
    return folder


@pytest.fixture
def run(_dev_run, tmp_path):
    """A dev gate-only run over the small docs, as this test's own files: (docs folder, report path).

    A copy of the module's run, with its cache: the files are those the eval wrote, so a test
    may edit the docs or apply entries without touching another test's.
    """
    shutil.copytree(_dev_run, tmp_path, dirs_exist_ok=True)
    return tmp_path / "docs", tmp_path / "dev.json"


def test_stop_words_numbers_and_corpus_wide_words_are_not_content_words(tmp_path):
    corpus = load_corpus(_docs(tmp_path))
    evidence = Evidence(report=None, run=RunSettings(), corpus=corpus)  # type: ignore[arg-type]
    for word in ("off", "back", "the", "it", "without", "2000", "widget", "docs", "documentation"):
        assert not content_word(word, evidence), word
    for word in ("colour", "dashboard", "sigterm"):
        assert content_word(word, evidence), word


def test_spelling_variants_are_one_word_in_two_forms():
    assert spelling_variants("colour", "color") and spelling_variants("cancelled", "canceled")
    assert spelling_variants("config", "configuration") and spelling_variants("retry", "retries")
    assert not spelling_variants("off", "offset") and not spelling_variants("page", "pager-duty")


# Regression: improve mapped function words ("off", "back") to whatever the gold section said.
def test_improve_proposes_the_related_entry_and_never_a_stop_or_corpus_wide_word(run, tmp_path):
    docs, report = run
    done = _docpilot(tmp_path, "improve", str(report), "--docs", str(docs), "--json")
    assert done.returncode == 0, done.stderr
    diagnosis = json.loads(done.stdout)
    chosen = {c["word"]: c for c in diagnosis["vocabulary"]}
    assert "colour" in chosen and chosen["colour"]["targets"] == ["color"]
    assert chosen["colour"]["relations"]["color"] == "spelling"
    assert chosen["colour"]["fixes"] == {"colour": "-→1"}
    assert "lowers no record that passed" in chosen["colour"]["reason"]
    proposed = {w for c in diagnosis["vocabulary"] for w in (c["word"], *c["targets"])}
    for failure in diagnosis["failures"]:
        for edit in failure["edits"]:
            if edit["kind"] == "vocabulary":
                proposed |= {w for k, v in edit["value"].items() for w in (k, *v)}
            if edit["kind"] == "heading":
                proposed |= set(edit["value"]["words"])
    assert not proposed & {"off", "back", "it", "up", "widget", "everything", "do"}, proposed
    turn_off = next(f for f in diagnosis["failures"] if f["id"] == "turn-off")
    assert not [e for e in turn_off["edits"] if e["kind"] == "vocabulary"]


def test_apply_merges_keeping_the_users_entries_and_order_then_names_the_proof(run, tmp_path):
    docs, report = run
    before = (docs / "vocabulary.json").read_text(encoding="utf-8")
    os.chmod(docs / "vocabulary.json", 0o640)
    done = _docpilot(tmp_path, "improve", str(report), "--docs", str(docs), "--apply")
    assert done.returncode == 0, done.stderr
    assert f'changed {docs / "vocabulary.json"}' in done.stdout
    assert '+ "colour": add \'color\'' in done.stdout
    assert "docpilot eval --split test --gate-only" in done.stdout and "docpilot improve compare" in done.stdout
    text = (docs / "vocabulary.json").read_text(encoding="utf-8")
    assert list(json.loads(text)) == ["auth", "sso", "colour"]
    assert json.loads(text) == {"auth": "tokens", "sso": ["tokens", "secrets"], "colour": ["color"]}
    assert text.startswith('{\n    "auth"'), text  # the file's own indentation
    assert os.stat(docs / "vocabulary.json").st_mode & 0o777 == 0o640
    assert before != text
    # The entry does what it says: the record it fixes is found now.
    golden = tmp_path / "golden.yaml"
    again = _docpilot(tmp_path, "eval", "--gate-only", "--split", "dev", "--docs", str(docs),
                      "--golden", str(golden), "--out", str(tmp_path / "after.json"))
    assert again.returncode in (0, 1), again.stderr
    rows = {r.id: r for r in load_report(tmp_path / "after.json").rows}
    assert rows["colour"].retrieved[0] == "themes#color-palette"
    # Applying again adds nothing.
    twice = _docpilot(tmp_path, "improve", str(tmp_path / "after.json"), "--docs", str(docs), "--apply")
    assert twice.returncode == 0 and "nothing to write" in twice.stdout
    assert (docs / "vocabulary.json").read_text(encoding="utf-8") == text


def test_dry_run_prints_the_merged_file_and_writes_nothing(run, tmp_path):
    docs, report = run
    before = (docs / "vocabulary.json").read_bytes()
    done = _docpilot(tmp_path, "improve", str(report), "--docs", str(docs), "--apply", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert '"colour": ["color"]' in done.stdout and "would change" in done.stdout
    assert (docs / "vocabulary.json").read_bytes() == before


def test_apply_names_only_the_causes_asked_for(run, tmp_path):
    docs, report = run
    done = _docpilot(tmp_path, "improve", str(report), "--docs", str(docs), "--apply", "model-refused")
    assert done.returncode == 0, done.stderr
    assert "move retrieval causes only" in done.stdout and "nothing to write" in done.stdout
    done = _docpilot(tmp_path, "improve", str(report), "--docs", str(docs), "--apply", "not-retrieved")
    assert done.returncode == 0 and '"colour"' in done.stdout


@pytest.mark.parametrize("broken", ['{"auth": "tokens",\n  "sso": ]\n', '["not", "an", "object"]\n',
                                    '{"auth": 3}\n'])
def test_apply_on_a_malformed_vocabulary_is_exit_2_and_leaves_it_alone(run, tmp_path, broken):
    docs, report = run
    path = docs / "vocabulary.json"
    path.write_text(broken, encoding="utf-8")
    stamp = os.stat(path).st_mtime_ns
    done = _docpilot(tmp_path, "improve", str(report), "--docs", str(docs), "--apply")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert str(path) in done.stderr and "Traceback" not in done.stderr
    assert path.read_text(encoding="utf-8") == broken and os.stat(path).st_mtime_ns == stamp
    assert not list(docs.glob(".vocabulary.json.*"))


def test_causes_without_apply_are_a_usage_error(run, tmp_path):
    docs, report = run
    done = _docpilot(tmp_path, "improve", str(report), "not-retrieved")
    assert done.returncode == 2 and "without --apply" in done.stderr
