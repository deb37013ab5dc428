"""The extractive baseline: quotes matching sentences with markers, refuses on weak evidence."""

from __future__ import annotations

import asyncio

from docpilot.corpus.markdown import parse_page
from docpilot.models.base import Prompt, Source, parse_refusal
from docpilot.models.extractive import ExtractiveModel, document_frequencies

TEXTS = [
    "Rotate a token every ninety days. The old token stops working one hour later.",
    "Run `acme rollback` to return to the previous release. Acme keeps the last ten releases.",
    "Install Acme with `pip install acme-cli`. It needs Python 3.11 or newer.",
]
MODEL = ExtractiveModel(idf=document_frequencies(TEXTS), min_evidence=0.4, max_sentences=2)


def prompt(question: str) -> Prompt:
    sources = [Source(n=i + 1, section_id=f"p{i}#s", title=f"Page {i}", text=t) for i, t in enumerate(TEXTS)]
    return Prompt(question=question, sources=sources)


def test_answers_with_the_best_sentence_and_its_marker():
    turn = asyncio.run(MODEL.complete(prompt("How often should I rotate a token?")))
    assert not turn.refused
    assert turn.answer.startswith("Rotate a token every ninety days. [1]")
    assert turn.first_token_ms is not None and turn.first_token_ms <= turn.latency_ms


def test_refuses_when_no_sentence_covers_the_question():
    turn = asyncio.run(MODEL.complete(prompt("Does Acme support Kubernetes clusters?")))
    assert turn.refused and turn.refusal_cause == "not-answerable"
    assert parse_refusal(turn.answer) == "not-answerable"


def test_refuses_with_no_sources():
    turn = asyncio.run(MODEL.complete(Prompt(question="How do I install it?")))
    assert turn.refused


def test_is_deterministic():
    question = "Which Python version does Acme need to install?"
    assert MODEL.compose(prompt(question)) == MODEL.compose(prompt(question))
    assert "[3]" in MODEL.compose(prompt(question))


def test_code_fences_are_not_quoted():
    source = Source(n=1, section_id="p#s", title="T", text="```\nrotate token rotate token every day\n```\nRotate a token every ninety days.")
    answer = MODEL.compose(Prompt(question="How often do I rotate a token?", sources=[source]))
    assert answer == "Rotate a token every ninety days. [1]"


def test_parse_refusal_reads_the_protocol():
    assert parse_refusal("REFUSE: out-of-scope\nsorry") == "out-of-scope"
    assert parse_refusal("  refuse: unsafe") == "unsafe"
    assert parse_refusal("REFUSE: because") == "not-answerable"
    assert parse_refusal("The answer is REFUSE: x") is None


# Regression: a doc sentence holding "[7]" was quoted as is and read as a citation marker.
def test_brackets_in_quoted_text_do_not_become_markers():
    source = Source(n=1, section_id="p#s", title="T", text="A marker such as [7] that names no source is removed.")
    answer = MODEL.compose(Prompt(question="What happens to a marker that names no source?", sources=[source]))
    assert answer == "A marker such as (7) that names no source is removed. [1]"


# A page as Poetry's docs write it, read by the parser as the corpus gives it to the model.
ENVIRONMENTS = """\
## Deleting the environments

Finally, you can delete existing virtual environments by using `env remove`:

```bash
poetry env remove /full/path/to/python
poetry env remove python3.7
```

If you want to remove all the environments at once, you can simply use the command as shown below:

```bash
poetry env remove --all
```

The environments are listed by `poetry env list`. Each one lives in the cache folder:

```bash
poetry config cache-dir
ls ~/.cache/pypoetry/virtualenvs
poetry env list --full-path
poetry env info --path
```

The cache folder is shared by every project.

```bash
poetry cache clear --all pypi
```
"""


def _environments_prompt(question: str) -> Prompt:
    [section] = parse_page(ENVIRONMENTS, source="managing-environments.md", mdx=False).sections
    return Prompt(question=question, sources=[Source(n=1, section_id="managing-environments#deleting-the-environments",
                                                     title=section.title, text=section.text)])


def _model(**settings) -> ExtractiveModel:
    return ExtractiveModel(idf=document_frequencies([ENVIRONMENTS, *TEXTS]), min_evidence=0.3, **settings)


def test_a_sentence_that_introduces_a_short_code_block_keeps_it():
    answer = _model(max_sentences=1).compose(_environments_prompt("How do I remove all the environments at once?"))
    assert answer == (
        "If you want to remove all the environments at once, you can simply use the command as shown below: [1]"
        "\n\n```bash\npoetry env remove --all\n```"
    )
    # identifier recall reads the answer text, so the command in the block counts.
    assert "poetry env remove --all" in answer


def test_a_block_longer_than_the_limit_or_not_introduced_stays_out():
    model = _model(max_sentences=2)
    # "Each one lives in the cache folder:" introduces four lines: over the limit of three.
    assert model.compose(_environments_prompt("Where does each listed environment live?")) == (
        "Each one lives in the cache folder: [1] The environments are listed by `poetry env list`. [1]"
    )
    # A sentence that says nothing of the block after it does not bring it.
    shared = model.compose(_environments_prompt("Is the cache folder shared by every project?"))
    assert "cache clear" not in shared and shared.startswith("The cache folder is shared by every project. [1]")


def test_the_limit_is_a_setting():
    question = "How do I delete existing virtual environments?"
    assert "poetry env remove python3.7\n```" in _model(max_sentences=1).compose(_environments_prompt(question))
    assert "```" not in _model(max_sentences=1, max_code_lines=1).compose(_environments_prompt(question))
    assert "```" not in _model(max_sentences=1, max_code_lines=0).compose(_environments_prompt(question))


def test_sentences_before_and_after_a_code_block_stand_apart_from_it():
    answer = _model(max_sentences=3).compose(
        _environments_prompt("How do I remove the environments listed in the cache folder?"))
    assert answer == (
        "Each one lives in the cache folder: [1] The cache folder is shared by every project. [1]\n\n"
        "Finally, you can delete existing virtual environments by using `env remove`: [1]\n\n"
        "```bash\npoetry env remove /full/path/to/python\npoetry env remove python3.7\n```"
    )
