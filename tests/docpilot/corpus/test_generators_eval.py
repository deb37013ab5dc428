"""A Hugo docs folder through the real commands: `index` says what it dropped, `eval` answers and links cleanly.

The folder is the Hugo one of ``test_generators`` (shortcodes, a relref inside a link,
a command introduced by "as shown below"); an eval over it must show no template
braces in any answer panel of its HTML report, read in a real headless browser.
"""

from __future__ import annotations

import json

import pytest
from docpilot.metrics.answer import identifier_recall

from docpilot.schema import Row
from tests.docpilot.corpus.test_generators import HUGO, TEMPLATE
from tests.support.cli_runs import run_all

pytestmark = pytest.mark.slow

# Short gold answers: each quotation scores an answer F1 below 0.25, so the report shows every record's panel.
RECORDS = [
    {"id": "remove-all", "question": "How do I remove every environment at once?",
     "gold": ["managing-environments#deleting-the-environments"], "gold_answer": "With the remove command.",
     "identifiers": ["poetry env remove --all"]},
    {"id": "in-project", "question": "Does Poetry create the virtualenv in the project?",
     "gold": ["managing-environments#"], "gold_answer": "No, not by default.",
     "identifiers": ["virtualenvs.in-project"]},
    {"id": "root-directory", "question": "Where does virtualenvs.in-project create the virtualenv?",
     "gold": ["configuration#virtualenvsin-project"], "gold_answer": "In its root folder."},
]


@pytest.fixture(scope="module")
def hugo_run(tmp_path_factory):
    project = tmp_path_factory.mktemp("hugo")
    for name, text in HUGO.items():
        (project / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (project / "docs" / name).write_text(text, encoding="utf-8")
    (project / "golden.jsonl").write_text(
        "".join(json.dumps({"split": "dev", **record}) + "\n" for record in RECORDS), encoding="utf-8")
    runs = run_all({"index": ["index", "--docs", "docs"]}, cwd=project, timeout=120)
    evals = run_all({"eval": ["eval", "--docs", "docs", "--golden", "golden.jsonl", "--orchestrator", "inline",
                              "--out", "report.json", "--html", "report.html"]}, cwd=project, timeout=180)
    return project, runs["index"], evals["eval"]


def test_index_names_what_each_page_lost(hugo_run):
    _, index, _ = hugo_run
    assert index.returncode == 0, index.stderr
    assert "managing-environments: dropped 1 Hugo shortcode" in index.stdout
    assert "configuration: dropped" not in index.stdout


def test_answers_keep_the_command_and_cite_the_section_a_relref_names(hugo_run):
    project, _, run = hugo_run
    assert run.returncode in (0, 1), run.stderr
    rows = {row["id"]: row for row in json.loads((project / "report.json").read_text())["rows"]}
    for row in rows.values():
        assert not TEMPLATE.search(row["answer"] or ""), row["answer"]
    # The command the sentence introduces rides with it, and identifier recall finds it there.
    assert "```bash\npoetry env remove --all\n```" in rows["remove-all"]["answer"]
    assert identifier_recall(Row.model_validate(rows["remove-all"])) == 1.0
    # The relref's words stay in the quoted sentence; the section it names is the one cited for it.
    assert "virtualenvs.in-project" in rows["in-project"]["answer"]
    assert "configuration#virtualenvsin-project" in rows["root-directory"]["citations"]


def test_the_html_answer_panels_show_no_template_braces(hugo_run, browser):
    project, _, _ = hugo_run
    page = browser.new_page()
    try:
        page.goto((project / "report.html").as_uri())
        panels = page.evaluate("Array.from(document.querySelectorAll('.panel')).map(p => p.innerText)")
        code = page.evaluate("Array.from(document.querySelectorAll('.panel pre code')).map(c => c.innerText)")
        links = page.evaluate("Array.from(document.querySelectorAll('.panel a')).map(a => a.href)")
    finally:
        page.close()
    assert len(panels) == len(RECORDS)
    assert not [text for text in panels if TEMPLATE.search(text)]
    assert "poetry env remove --all" in code
    assert any(link.endswith("/configuration#virtualenvsin-project") for link in links)
