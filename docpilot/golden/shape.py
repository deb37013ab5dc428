"""What a golden set covers: its splits, its gold pins, the pages it touches, and its weak spots."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, get_args

from pydantic import BaseModel, ConfigDict

from docpilot.metrics.gold import TOP
from docpilot.schema import GoldenRecord

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus

_SMALL_SET = 100


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SplitShape(_Strict):
    """How many records of one split are positives and negatives."""

    positives: int = 0
    """Records with gold entries."""
    negatives: int = 0
    """Records with no gold: the right outcome is a refusal."""


class GoldenShape(_Strict):
    """What a golden set covers: its splits, its gold pins, the pages it touches, and its weak spots."""

    records: int
    """Number of records, each turn of a conversation counted as one (it is asked and scored as one)."""
    conversations: int = 0
    """Conversations among them (records written with `turns:`)."""
    turns: int = 0
    """Turns of those conversations; ``records - turns`` are single questions."""
    splits: dict[str, SplitShape]
    """Positives and negatives per split (`dev`, `test`)."""
    gold_forms: dict[str, int]
    """Gold entries per form: `page`, `page#` (any section of the page), `page#anchor`, and `page#(top)` (the
    text above the first heading) when a record uses it."""
    records_per_page: dict[str, int]
    """Page id → records whose gold touches it, most touched first."""
    pages: int | None = None
    """Pages in the docs; None when the set was described without them."""
    untouched_pages: list[str]
    """Pages of the docs that no record's gold touches."""
    warnings: list[str]
    """Weak spots of the set as a whole worth fixing before trusting the numbers."""
    record_warnings: list[str] = []
    """Records that run but weaken a number, each as `file:line, record 'id': what; fix: how`."""
    bias: dict[str, Any] | None = None
    """How much the questions borrow from their gold sections (``docpilot.retrieval.bias.SetBias``), per record
    and for the set; None when not measured."""
    bias_by_turn: dict[str, Any] | None = None
    """For a set with conversations: the bias summary of ``first turns`` (single questions with them) and of
    ``follow-ups``, apart (a follow-up leans on the turns before it, so it names less of its section); None
    without conversations."""
    detectable: dict[str, Any] | None = None
    """What each split can detect: the smallest change in an outcome's rate the paired test calls at α 0.05 with
    power 0.8, and the records a ten-point change needs (``docpilot.reports.detectable.detectable_figures``)."""
    lock: dict[str, Any] | None = None
    """What became of the gold since the set was locked: the lock's ``path``, the entries ``fixed`` (record id →
    {old → new}) and each positive not as locked under ``records`` (``docpilot.golden.staleness.RecordFinding``);
    None without a lock beside the set."""


def describe_golden(records: Sequence[GoldenRecord], corpus: Corpus | None = None) -> GoldenShape:
    """Summarise what a golden set covers and warn about what makes its numbers weak."""
    splits = {name: SplitShape() for name in get_args(GoldenRecord.model_fields["split"].annotation)}
    forms: Counter[str] = Counter({"page": 0, "page#": 0, "page#anchor": 0})
    page_ids = sorted(corpus.pages) if corpus is not None else None
    per_page: Counter[str] = Counter()
    for record in records:
        split = splits.setdefault(record.split, SplitShape())
        if record.gold:
            split.positives += 1
        else:
            split.negatives += 1
        for entry in record.gold:
            forms[_form(entry)] += 1
        per_page.update(_touched_pages(record.gold, page_ids))
    untouched = [page for page in page_ids or [] if page not in per_page]
    return GoldenShape(
        records=len(records),
        conversations=len({r.conversation for r in records if r.conversation is not None}),
        turns=sum(r.conversation is not None for r in records),
        splits=splits,
        gold_forms=dict(forms),
        records_per_page=dict(sorted(per_page.items(), key=lambda item: (-item[1], item[0]))),
        pages=len(page_ids) if page_ids is not None else None,
        untouched_pages=untouched,
        warnings=_warnings(len(records), splits, untouched, len(page_ids or [])),
    )


def _form(entry: str) -> str:
    """The form of a gold entry as the check counts it; `page#(top)` only appears when a record uses it."""
    if "#" not in entry:
        return "page"
    anchor = entry.partition("#")[2]
    return "page#" if not anchor else "page#(top)" if anchor == TOP else "page#anchor"


def _touched_pages(gold: Sequence[str], page_ids: Sequence[str] | None) -> set[str]:
    """Pages a record's gold entries match (a bare page id also covers the pages nested under it)."""
    touched = set()
    for entry in gold:
        page = entry.partition("#")[0]
        if page_ids is None or "#" in entry:
            touched.add(page)
        else:
            touched.update(p for p in page_ids if p == page or p.startswith(page + "/"))
    return touched


def _warnings(total: int, splits: dict[str, SplitShape], untouched: list[str], pages: int) -> list[str]:
    warnings = []
    if 0 < total < _SMALL_SET:
        warnings.append(
            f"small set ({total} records): every number moves by whole records: one record is "
            f"{100 / total:.1f} % of the set, so read a change as records gained or lost"
        )
    for name, split in splits.items():
        if split.positives + split.negatives == 0:
            warnings.append(f"split {name!r} has no records: nothing can be measured on it")
        elif split.negatives == 0:
            warnings.append(
                f"split {name!r} has no negatives: negatives caught and over-refusal cannot be measured on it"
            )
        elif split.positives == 0:
            warnings.append(
                f"split {name!r} has no positives: retrieval and answer metrics have nothing to average on it"
            )
    if untouched:
        shown = ", ".join(untouched[:10]) + (f" and {len(untouched) - 10} more" if len(untouched) > 10 else "")
        warnings.append(f"{len(untouched)} of {pages} pages are touched by no question: {shown}")
    return warnings
