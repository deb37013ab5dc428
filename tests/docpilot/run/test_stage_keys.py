"""Every input a stage reads is in its key, and a stored reply is read by today's rules."""

from __future__ import annotations

import yaml

from docpilot.cache import StageCache
from docpilot.config.model import Config
from docpilot.run.job import EvalJob
from tests.support.evals import run_eval
from tests.support.openai_server import OpenAIScript, Reply, serve_openai

# A long page no question may draw from (the records' scope leaves it out): it is never
# ranked or primed, but its chunks count in the extractive model's word weights.
FILLER = " ".join(f"Paragraph {n} of the release notes lists changes to the install steps and tokens."
                  for n in range(30))
PAGES = {
    "guide/install.md": "# Install\n\nInstall Acme with pip install acme-cli. It needs Python 3.11 or newer.\n",
    "guide/tokens.md": "# Tokens\n\nExport the token as ACME_TOKEN before you run any command of the cli.\n",
    "notes/history.md": f"# History\n\n{FILLER}\n",
}
RECORDS = [
    {"id": "install", "question": "How do I install Acme with pip?", "gold": ["guide/install"], "scope": ["guide"]},
    {"id": "token", "question": "Which variable holds the token?", "gold": ["guide/tokens"], "scope": ["guide"]},
]


def _job(tmp_path, **corpus) -> EvalJob:
    docs = tmp_path / "docs"
    for name, text in PAGES.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, encoding="utf-8")
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump(RECORDS), encoding="utf-8")
    config = Config(corpus={"docs": str(docs), **corpus}, golden=str(golden),
                    cache_dir=str(tmp_path / "cache"), reports_dir=str(tmp_path / "reports"))
    return EvalJob(config=config, golden=str(golden))


# Regression: the extractive model's key held the corpus's bytes but not corpus.chunk_words,
# which its word weights (idf over the chunks) depend on, so other weights' answers were reused.
def test_another_chunk_words_answers_the_extractive_model_again(tmp_path):
    first = run_eval(_job(tmp_path, chunk_words=220), "inline")
    again = run_eval(_job(tmp_path, chunk_words=220), "inline")
    assert again.cache_stats["model"] == {"reused": 2, "computed": 0}
    cut = run_eval(_job(tmp_path, chunk_words=60), "inline")
    # The same prompts (the short pages are cut alike), yet the weights they are answered with moved.
    assert [r.primed for r in cut.rows] == [r.primed for r in first.rows] and all(r.primed for r in cut.rows)
    assert cut.cache_stats["model"] == {"reused": 0, "computed": 2}


def _hosted(job: EvalJob, base_url: str) -> EvalJob:
    job.config.model.provider, job.config.model.base_url, job.config.model.name = "openai", base_url, "scripted"
    return job


def test_a_stored_reply_that_todays_rules_call_no_answer_is_asked_again(tmp_path):
    script = OpenAIScript(default=Reply(answer="Install it with pip [1]."))
    with serve_openai(script) as base_url:
        run_eval(_hosted(_job(tmp_path), base_url), "inline")
        # A reply stored without the finish_reason that every answer now needs.
        cache = StageCache(tmp_path / "cache")
        try:
            keys = [k for k in cache._store.iterkeys() if str(k).startswith("model:")]
            for key in keys:
                entry = cache.get(key)
                entry["reply"]["finish_reason"] = None
                cache.set(key, entry)
        finally:
            cache.close()
        again = run_eval(_hosted(_job(tmp_path), base_url), "inline")
    assert len(keys) == 2 and again.cache_stats["model"] == {"reused": 0, "computed": 2}
    assert all(r.error is None and not r.refused for r in again.rows)
