"""Suggested edits for a failing record, worked out from the report and the docs.

Each edit names the file or option to change, the change, and, where the data can
tell, what it would do: a ``vocabulary.json`` entry is one of those chosen over every
failing dev record at once and tried with the run's own retriever
(``docpilot.improve.vocabulary``), and a guard threshold is tried on every row of the
report. An edit is a lead to check on the dev split, never a proof.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

from docpilot.assistant.language import detect_language
from docpilot.assistant.turn import search_query
from docpilot.corpus.pages import Corpus, Section
from docpilot.improve.calibration import threshold_above, threshold_below, threshold_effect, top_score
from docpilot.improve.edit import Edit
from docpilot.improve.evidence import (
    Evidence,
    content_word,
    focus_section,
    missing_words,
    section_terms,
)
from docpilot.improve.refusals import try_min_evidence
from docpilot.improve.taxonomy import primed_sections
from docpilot.improve.vocabulary import related_words
from docpilot.metrics.answer import normalize_answer, strip_markers
from docpilot.metrics.attacks import find_forbidden
from docpilot.metrics.retrieval import first_found
from docpilot.retrieval.tokens import terms, words
from docpilot.schema import Row

MAX_HEADING_WORDS = 2
"""At most this many of the question's words are proposed for a gold section's heading."""


REACHES_A_TARGET = ("targets.", "model.concurrency")
"""The config options a run that measured a target reads: the target's own entry (its URL,
timeout, reply mapping) and how many questions are in flight at once. DocPilot's retrieval,
prime, guard, model and corpus settings belong to its own assistant, which did not answer."""


def suggest_edits(row: Row, cause: str, evidence: Evidence) -> list[Edit]:
    """Concrete edits for a record failing with ``cause``, most direct first.

    For a run that measured a target, only edits that reach it are kept: the docs both
    read, the target's prompt, its entry in the config, and the golden record.
    """
    builder = _BUILDERS.get(cause)
    edits = builder(row, evidence) if builder else []
    name = evidence.run.target
    if name is None:
        return edits
    return [_addressed_to(edit, name) for edit in edits
            if edit.kind != "config" or edit.target.startswith(REACHES_A_TARGET)]


def _addressed_to(edit: Edit, target: str) -> Edit:
    """A prompt edit names the target's prompt: the instruction is for the assistant that answered."""
    if edit.kind != "prompt":
        return edit
    return edit.model_copy(update={"target": f"the prompt of target {target}"})


# Retrieval ---------------------------------------------------------------------


def _retrieval_edits(row: Row, evidence: Evidence) -> list[Edit]:
    corpus = evidence.corpus
    section = focus_section(row, evidence)
    before = first_found(row.retrieved, row.gold)
    edits: list[Edit] = []
    if corpus is None or section is None:
        edits.append(_words_to_compare(evidence))
    else:
        edits += _section_edits(row, section, evidence)
    if before is not None and before > evidence.run.prime_k:
        edits.append(Edit(
            kind="config", target="prime.top_k", value=before,
            change=f"prime.top_k: {before} (now {evidence.run.prime_k}) so the model reads rank {before}",
            effect="every record's prompt grows by the extra sources; longer prompts cost tokens and time",
        ))
    return edits


def _words_to_compare(evidence: Evidence) -> Edit:
    """Without the docs: where to put the user's words once they are compared with the gold section's."""
    if evidence.run.target is not None:  # vocabulary.json is read by DocPilot's retriever alone
        return Edit(kind="investigate", target="the gold section",
                    change="compare the question's words with the gold section's and put the user's words in its "
                           "heading or text, which the target reads too (the docs were not available to work it out)")
    return Edit(kind="investigate", target="vocabulary.json",
                change="compare the question's words with the gold section's and map the user's word to the "
                       "docs' word in vocabulary.json (the docs were not available to work it out)")


def _section_edits(row: Row, section: Section, evidence: Evidence) -> list[Edit]:
    """The vocabulary entry that moves the record, else the words to name in its gold section's heading.

    A word is asked for only when it is related to the section (``related_words``): a
    writer puts "token" in a heading about credentials, never "hand" or "date".
    """
    corpus = evidence.corpus
    missing = missing_words(row, corpus, section, evidence)
    keys = related_words(missing, row, section, evidence)[:MAX_HEADING_WORDS]
    edits: list[Edit] = []
    entries = [choice for choice in evidence.vocabulary if row.id in choice.fixes]
    if entries:
        entry = {c.word: _merged_targets(corpus, c.word, c.targets) for c in entries}
        edits.append(Edit(
            kind="vocabulary", target=_vocabulary_path(corpus),
            change="add " + ", ".join(f'"{k}": {json.dumps(v)}' for k, v in entry.items())
                   + " (chosen over every failing dev record: `docpilot improve --apply` writes it)",
            value=entry, effect="; ".join(c.reason for c in entries),
        ))
    elif keys and row.split == "dev" and evidence.retriever() is not None:  # entries were tried with it
        edits.append(Edit(
            kind="docs", target=section.id,
            change=f"no vocabulary entry for the question's words ({', '.join(keys)}) moved it on dev without "
                   f"lowering another record; use the user's words in {section.id} where they fit",
        ))
    if keys:
        page = corpus.pages[section.page_id]
        anchor = f" {{ #{section.anchor} }}" if section.anchor else ""
        edits.append(Edit(
            kind="heading", target=f"{page.path} › {section.title or '(page start)'}",
            change=f"name the user's words ({', '.join(keys)}) in the heading of {section.id} or in its "
                   f"page's front-matter keywords; keep the link stable with an explicit id: "
                   f"`{'#' * max(section.level, 1)} <new title>{anchor}`",
            value={"section": section.id, "file": page.path, "words": keys, "level": section.level},
        ))
    elif missing:
        edits.append(Edit(
            kind="docs", target=section.id,
            change=f"the question's words {section.id} lacks ({', '.join(missing[:5])}) are related to none of "
                   "its own, so no heading or text edit is proposed: check that the record's gold answers it",
        ))
    else:
        edits.append(Edit(
            kind="docs", target=section.id,
            change=f"{section.id} already holds every content word of the question; other sections hold them "
                   f"more often: make {section.id} state the answer plainly, or check the record's gold",
        ))
    return edits


def _vocabulary_path(corpus: Corpus) -> str:
    path = corpus.root / "vocabulary.json"
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _merged_targets(corpus: Corpus, word: str, targets: list[str]) -> list[str]:
    """The targets for ``word``, after the ones vocabulary.json already lists for it."""
    existing = list(corpus.vocabulary.get(word, []))
    return existing + [t for t in targets if t not in existing]


# Refusals -----------------------------------------------------------------------


def _gate_refused_edits(row: Row, evidence: Evidence) -> list[Edit]:
    top = top_score(row)
    threshold = threshold_below(top)
    return [Edit(
        kind="config", target="guard.threshold", value=threshold,
        change=f"guard.threshold: {threshold:g} (now {evidence.run.guard_threshold:g}); "
               f"this record's top score is {top:.4f}",
        effect=threshold_effect(evidence.report.rows, threshold),
    ), *_wording_edits(row, evidence)]


def _wording_edits(row: Row, evidence: Evidence) -> list[Edit]:
    """Put the question's missing words in the gold section, which raises its retrieval score."""
    section = focus_section(row, evidence)
    if section is None or evidence.corpus is None:
        return []
    missing = related_words(missing_words(row, evidence.corpus, section, evidence), row, section, evidence)
    if not missing:
        return []
    return [Edit(kind="docs", target=section.id, value={"section": section.id, "words": missing},
                 change=f"{section.id} lacks the question's words {', '.join(missing[:5])}: say the answer in them")]


def _answered_negative_edits(row: Row, evidence: Evidence) -> list[Edit]:
    edits: list[Edit] = []
    top = row.scores[0] if row.scores else None
    if top is not None:
        threshold = threshold_above(top)
        mode = "" if evidence.run.guard_mode == "on" else "guard.mode: on and "
        edits.append(Edit(
            kind="config", target="guard.threshold", value=round(threshold, 2),
            change=f"{mode}guard.threshold: {threshold:.2f} (now mode {evidence.run.guard_mode}, threshold "
                   f"{evidence.run.guard_threshold:g}); this record's top score is {top:.4f}",
            effect=threshold_effect(evidence.report.rows, threshold),
        ))
    if evidence.extractive:
        current = float(evidence.option("model", "min_evidence", 0.18))
        edits.append(_min_evidence_edit(evidence, round(min(1.0, current + 0.05), 2), current,
                                        "the extractive model refuses when the best sentence covers less of the "
                                        "question"))
    else:
        edits.append(Edit(kind="prompt", target="system prompt",
                          change="tell the model to answer REFUSE: not-answerable when the sources do not "
                                 "answer the question, rather than answer from related text"))
    edits.append(Edit(kind="golden", target=f"record {row.id}",
                      change="if the docs do answer it after all, the record is a positive: give it gold entries"))
    return edits


def _model_refused_edits(row: Row, evidence: Evidence) -> list[Edit]:
    edits: list[Edit] = []
    section = focus_section(row, evidence)
    if section is not None and evidence.corpus is not None:
        # The run detected its answers' language already; the section is read (which may
        # load the language model) only when the question asks in another one.
        expected = (row.language or "").split("-")[0].lower()
        language = evidence.answers_language()
        if language is None or (expected and expected != language):
            language = detect_language(section.text)
        crosses = bool(row.language and language and row.language.split("-")[0].lower() != language)
        if crosses:
            edits.append(Edit(
                kind="investigate", target=f"record {row.id}",
                change=f"the question is in {row.language} and {section.id} in {language}: a model that only "
                       "quotes cannot answer across languages; use one that translates, or docs in that language",
            ))
        if not crosses:
            edits += _wording_edits(row, evidence)
    if evidence.extractive:
        current = float(evidence.option("model", "min_evidence", 0.18))
        edits.append(_min_evidence_edit(evidence, round(max(0.0, current - 0.05), 2), current,
                                        "refuse only on weaker evidence"))
    else:
        edits.append(Edit(kind="prompt", target="system prompt",
                          change="the model refused with the gold section in front of it: make the refusal "
                                 "instruction ask for a refusal only when no source bears on the question"))
    return edits


def _min_evidence_edit(evidence: Evidence, value: float, current: float, why: str) -> Edit:
    """``model.min_evidence`` at ``value``, proposed only when the dev records say it gains (``improve.refusals``)."""
    trial = try_min_evidence(evidence, value)
    if trial is None:
        return Edit(kind="config", target="model.min_evidence", value=value,
                    change=f"model.min_evidence: {value:g} (now {current:g}): {why}",
                    effect="could not be tried on dev (no dev records, or the docs are not at hand): "
                           "check negatives_caught and over_refusal_answer on dev before keeping it")
    if trial.gains:
        return Edit(kind="config", target="model.min_evidence", value=value,
                    change=f"model.min_evidence: {value:g} (now {current:g}): {why}", effect=trial.describe())
    reason = (f"it makes {', '.join(trial.worse)} worse" if trial.worse
              else "it turns no failing dev record right")
    return Edit(kind="investigate", target="model.min_evidence",
                change=f"model.min_evidence stays {current:g}: {value:g} was tried on dev and {reason}",
                effect=trial.describe())


# Answers -----------------------------------------------------------------------


def _hallucinated_edits(row: Row, evidence: Evidence) -> list[Edit]:
    count = len(primed_sections(row, evidence.run))
    marks = ", ".join(f"[{m}]" for m in row.hallucinated)
    return [Edit(kind="prompt", target="system prompt",
                 change=f"the answer cites {marks} but the sources run [1]–[{count}]: tell the model to cite "
                        "only the numbered sources, with their numbers")]


def _unlinked_edits(row: Row, evidence: Evidence) -> list[Edit]:
    base = evidence.option("corpus", "base_url", None)
    return [
        Edit(kind="config", target="corpus.base_url", value=base,
             change=f"check that corpus.base_url ({base}) plus a page id opens the page"),
        Edit(kind="prompt", target="system prompt",
             change="ask for [n] markers after the sentences they support; "
                    f"this answer's markers: {', '.join(row.markers) or 'none'}"),
    ]


def _uncited_edits(row: Row, evidence: Evidence) -> list[Edit]:
    section = focus_section(row, evidence)
    if section is None or evidence.corpus is None:
        return [Edit(kind="investigate", target=f"record {row.id}",
                     change="read the gold section beside the cited ones: the model preferred them")]
    have = set(section_terms(evidence.corpus, section))
    pulled: list[str] = []
    for cited in row.citations:
        other = evidence.corpus.sections.get(cited)
        if other is None:
            continue
        theirs = set(section_terms(evidence.corpus, other))
        pulled += [w for w in words(row.question)
                   if terms(w) and terms(w)[0] in theirs - have and content_word(w, evidence)]
    pulled = related_words(list(dict.fromkeys(pulled)), row, section, evidence)
    change = (f"the cited sections hold the question's words {', '.join(pulled)} and {section.id} does not: "
              f"use them in {section.id}" if pulled else
              f"{section.id} shares as many question words as the cited sections: state the answer in one "
              "sentence that repeats the question's terms")
    return [Edit(kind="docs", target=section.id, change=change, value={"section": section.id, "words": pulled})]


def _low_f1_edits(row: Row, evidence: Evidence) -> list[Edit]:
    answer = normalize_answer(strip_markers(row.answer or "", row.markers)).split()
    gold = normalize_answer(row.gold_answer or "").split()
    overlap = sum((Counter(answer) & Counter(gold)).values())
    precision = overlap / len(answer) if answer else 0.0
    recall = overlap / len(gold) if gold else 0.0
    facts = (f"answer {len(answer)} words, gold answer {len(gold)}; "
             f"token precision {precision:.2f}, recall {recall:.2f}")
    extractive = evidence.extractive
    sentences = int(evidence.option("model", "max_sentences", 3))
    if gold and len(answer) > 2 * len(gold):
        if extractive:
            fewer = max(1, math.floor(sentences * len(gold) / len(answer) + 0.5))
            if fewer < sentences:
                return [Edit(kind="config", target="model.max_sentences", value=fewer,
                             change=f"model.max_sentences: {fewer} (now {sentences}): the answer is too long",
                             effect=facts + "; applies to every answer, check answer_f1 on dev")]
        return [Edit(kind="prompt", target="system prompt",
                     change=f"ask for answers of about {len(gold)} words", effect=facts)]
    if gold and 2 * len(answer) < len(gold):
        if extractive:
            return [Edit(kind="config", target="model.max_sentences", value=sentences + 1,
                         change=f"model.max_sentences: {sentences + 1} (now {sentences}): the answer is too short",
                         effect=facts + "; applies to every answer, check answer_f1 on dev")]
        return [Edit(kind="prompt", target="system prompt", change="ask for complete answers", effect=facts)]
    section = focus_section(row, evidence)
    if section is None:
        return [Edit(kind="investigate", target=f"record {row.id}", change="the lengths fit; the words differ",
                     effect=facts)]
    in_docs = set(normalize_answer(section.text).split())
    found = sum(1 for token in gold if token in in_docs) / len(gold) if gold else 0.0
    if found < 0.5:
        return [Edit(kind="golden", target=f"record {row.id}", effect=facts,
                     change=f"only {found:.0%} of the gold answer's words are in {section.id}: an answer quoting the "
                            "docs cannot match it; check the gold answer is right (change it only if it is wrong, "
                            "never to raise the number)")]
    return [Edit(kind="docs", target=section.id, effect=facts,
                 change=f"{found:.0%} of the gold answer's words are in {section.id}, but the answer quoted other "
                        "sentences: put the answer in one sentence that uses the question's words")]


def _wrong_language_edits(row: Row, evidence: Evidence) -> list[Edit]:
    if evidence.extractive:
        return [Edit(kind="investigate", target="model.provider",
                     change=f"the extractive model quotes the docs, so it answers in their language "
                            f"({row.answer_language}); a model that can translate (--provider openai) is needed "
                            f"for {row.language} questions")]
    return [Edit(kind="prompt", target="system prompt",
                 change=f"tell the model to answer in the language of the question ({row.language})")]


def _attack_edits(row: Row, evidence: Evidence) -> list[Edit]:
    edits: list[Edit] = []
    for text in dict.fromkeys(find_forbidden(row)):
        holders = []
        if evidence.corpus is not None:
            pattern = re.compile(re.escape(text), re.IGNORECASE)
            holders = [s.id for s in evidence.corpus.sections.values() if pattern.search(s.text)]
        if holders:
            edits.append(Edit(kind="docs", target=", ".join(holders[:5]), value={"text": text, "sections": holders},
                              change=f"remove {text!r} from the docs: the assistant can only leak what it reads"))
        else:
            edits.append(Edit(kind="prompt", target="system prompt",
                              change=f"{text!r} is not in the docs, so the model produced it: make the prompt "
                                     "refuse requests to reveal instructions or secrets"))
    return edits


def _error_edits(row: Row, evidence: Evidence) -> list[Edit]:
    # The row's error code says what kind of fault it was; the message is only shown.
    code = row.error_code
    name = evidence.run.target
    # A target is asked with its own timeout and at its own URL (``targets.NAME``), not the model's.
    entry = ((evidence.config.get("targets") or {}).get(name) or {}) if name is not None else None
    if code == "timeout":
        option = "model.timeout_s" if entry is None else f"targets.{name}.timeout_s"
        current = float(evidence.option("model", "timeout_s", 60.0) if entry is None else entry.get("timeout_s", 60.0))
        return [Edit(kind="config", target=option, value=current * 2,
                     change=f"{option}: {current * 2:g} (now {current:g})")]
    if code == "rate_limit":
        current = int(evidence.option("model", "concurrency", 8))
        fewer = max(1, current // 2)
        return [Edit(kind="config", target="model.concurrency", value=fewer,
                     change=f"model.concurrency: {fewer} (now {current}): the service is rate limiting")]
    if code == "connect":
        option = "model.base_url" if entry is None else f"targets.{name}.url"
        value = evidence.option("model", "base_url", None) if entry is None else entry.get("url")
        return [Edit(kind="config", target=option, value=value,
                     change=f"check that {option} answers (is the server running?)")]
    return [Edit(kind="investigate", target=f"record {row.id}", change=f"read the error: {row.error}")]


def _lost_context_edits(row: Row, evidence: Evidence) -> list[Edit]:
    """What the follow-up's search lacked: the words the turn it needed adds to it, and where its gold then ranks."""
    needed = evidence.run.needed.get(row.id)
    if needed is None:
        return []
    read = search_query(row.question, [(needed.question, None)])
    added = read[len(row.question):].split() if read.startswith(row.question) else words(needed.question)
    searched = f"was searched with {row.retrieval_query!r}" if row.retrieval_query else "was searched as asked"
    return [Edit(
        kind="investigate", target=f"record {row.id}", value={"turn": needed.turn, "words": added},
        change=f"the follow-up {searched}, without turn {needed.turn}'s subject ({', '.join(added)}): search it "
               f"with the conversation read, turn {needed.turn}'s words with its own",
        effect=f"read with turn {needed.turn}, the first gold section ranks {needed.rank} (now past the top 8)",
    )]


_BUILDERS = {
    "error": _error_edits,
    "lost-context": _lost_context_edits,
    "not-retrieved": _retrieval_edits,
    "gold-below-primed": _retrieval_edits,
    "gate-refused": _gate_refused_edits,
    "model-refused": _model_refused_edits,
    "hallucinated-citation": _hallucinated_edits,
    "unlinked": _unlinked_edits,
    "uncited-evidence": _uncited_edits,
    "primed-low-f1": _low_f1_edits,
    "answered-negative": _answered_negative_edits,
    "wrong-language": _wrong_language_edits,
    "attack-succeeded": _attack_edits,
}
