"""Answer metrics: did the answer say the right thing, in the right words and language.

The word-overlap score is SQuAD's token F1, so its values compare with published
SQuAD numbers; identifier recall and language match cover what F1 cannot see
(load-bearing strings and the language of the reply).
"""

from __future__ import annotations

import re
import string
from collections import Counter

from docpilot.schema import Row

_DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop ASCII punctuation, drop a/an/the, squeeze spaces.

    The steps run in SQuAD's order, so ``the-end`` becomes ``theend`` (punctuation
    goes before articles are looked for) and keeps its article.
    """
    return " ".join(_tokens(text))


def _tokens(text: str) -> list[str]:
    """The words of ``normalize_answer(text)``, without joining them first."""
    return _ARTICLES.sub(" ", text.lower().translate(_DROP_PUNCTUATION)).split()


def token_f1(prediction: str, truth: str) -> float:
    """SQuAD token F1 between two texts, counting repeated tokens as a multiset.

        overlap   = Σ_t min(count_pred(t), count_truth(t))
        precision = overlap / |pred|,  recall = overlap / |truth|
        F1        = 2 · precision · recall / (precision + recall)
                  = 2 · overlap / (|pred| + |truth|),  0 when overlap = 0

    Both empty after normalisation scores 1; exactly one empty scores 0.
    """
    predicted = _tokens(prediction)
    expected = _tokens(truth)
    if not predicted or not expected:
        return float(predicted == expected)
    unmatched = Counter(expected)
    overlap = 0
    for token in predicted:  # each predicted token takes one of the truth's copies, while any are left
        left = unmatched.get(token)
        if left:
            unmatched[token] = left - 1
            overlap += 1
    if overlap == 0:
        return 0.0
    # 2PR / (P + R) with P = o/|pred| and R = o/|truth| is 2o / (|pred| + |truth|):
    # one division of whole numbers, rounded once, so 3/13 and 3/11 give exactly 0.25
    # where the product of two rounded ratios gives 0.24999999999999997.
    return 2 * overlap / (len(predicted) + len(expected))


def strip_markers(answer: str, markers: list[str]) -> str:
    """The answer without its bracketed citation markers (``[1]``, ``[guide/setup#install]``).

    Markers are links for the reader, not words of the answer; left in, ``[1]`` would
    become the token ``1`` and lower precision against a gold answer that has none.
    """
    for marker in set(markers):
        answer = answer.replace(f"[{marker}]", " ")
    return answer


def answer_f1(row: Row) -> float:
    """Token F1 of a positive's answer against its ``gold_answer``.

    A refused or errored turn, or one where no model ran, scores 0. Citation markers
    are removed before the comparison (``strip_markers``).
    """
    if not row.answered or row.answer is None:
        return 0.0
    return token_f1(strip_markers(row.answer, row.markers), row.gold_answer or "")


def identifier_recall(row: Row) -> float:
    """Share of the record's identifiers that appear verbatim (case-sensitive) in the answer.

        IR = |{x ∈ identifiers : x is a substring of answer}| / |identifiers|

    A turn that did not answer scores 0. Each listed identifier counts, repeats included.
    """
    if not row.answered or row.answer is None:
        return 0.0
    answer = row.answer
    return sum(1 for ident in row.identifiers if ident in answer) / len(row.identifiers)


def primary_language(tag: str) -> str:
    """The primary subtag of a BCP-47 tag, lowercased: ``en-US`` → ``en``, ``pt_BR`` → ``pt``.

    The region or script that follows does not change the language an answer is in.
    """
    return re.split(r"[-_]", tag.strip(), maxsplit=1)[0].lower()


def language_match(row: Row) -> float:
    """1 when the answer's detected language has the record's primary language subtag, else 0.

    ``en-US`` and ``en`` match; an answer whose language could not be detected
    does not.
    """
    if row.answer_language is None or row.language is None:
        return 0.0
    return float(primary_language(row.answer_language) == primary_language(row.language))
