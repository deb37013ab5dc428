"""The data contract: golden records, attack probes, report rows, reports.

Every model forbids unknown fields, so a typo in a golden set or a report is an
error rather than a silently ignored key. The configuration lives in
``docpilot.config.model``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

MAX_QUESTION_CHARS = 2000
"""Longest question, in characters, in a golden set, an attack probe or a request to the server."""
SCHEMA_VERSION = 1
VARIANTS_SCHEMA_VERSION = 2  # a report of several variants; a run of one keeps version 1 and its shape

Split = Literal["dev", "test"]
Cause = Literal["not-answerable", "out-of-scope", "unsafe"]
Kind = Literal["positive", "negative", "attack"]
ErrorCode = Literal[
    "connect", "timeout", "auth", "rate_limit", "http_status", "service_error",
    "malformed", "incomplete", "unfinished", "empty", "reply_too_long", "reply_too_large",
]
"""What kind of fault ended a turn: errors are grouped and acted on by this code, never by their text.

``connect`` the service could not be reached; ``timeout`` no complete reply in time;
``auth`` HTTP 401 or 403; ``rate_limit`` HTTP 429 after the retries; ``http_status`` any
other HTTP error; ``service_error`` the service said in its reply that it failed;
``malformed`` a reply that cannot be read; ``incomplete`` a stream cut before its end
mark; ``unfinished`` an end mark without a ``finish_reason``; ``empty`` a finished turn
with no answer text and no refusal; ``reply_too_long`` an answer cut at the model's
``max_tokens``; ``reply_too_large`` a target's reply past its byte or source cap."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GoldenRecord(_Strict):
    """One question of a golden set, with what a correct turn looks like."""

    id: str = Field(min_length=1)
    """Unique id of the record within its file."""
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    """The question as a user would type it (at most 2,000 characters, as the server accepts)."""
    gold: list[str] = Field(default_factory=list)
    """Gold entries (`page`, `page#`, `page#anchor`); empty means the docs do not answer it."""
    gold_answer: str | None = None
    """A reference answer, at the length answers should have; on a negative it is kept and shown, never scored."""
    identifiers: list[str] = Field(default_factory=list)
    """Exact strings (flags, option names, values) that a correct answer must contain."""
    split: Split = "dev"
    """`dev` to choose changes on, `test` to prove them on."""
    language: str | None = None
    """BCP-47 language the answer must be in; defaults to the question's detected language."""
    scope: list[str] | None = None
    """Page-id prefixes the turn may draw from; None means the whole corpus."""
    expected_cause: Cause | None = None
    """For negatives: why the right outcome is a refusal."""
    tags: list[str] = Field(default_factory=list)
    """Free labels for slicing results."""
    origin: str | None = None
    """Drafts only: what wrote the question (`template:<name>`, or `model:<provider>/<model>`); dropped on accept."""
    source: str | None = None
    """Drafts only: the section the draft was drawn from, as its gold entry names it; dropped on accept."""
    source_digest: str | None = None
    """Drafts written before the drafts' lock: a digest of the section's text, read and ignored (the lock beside
    the drafts file, docs/golden-set.md#lock, says what the section held); dropped on accept."""
    conversation: str | None = None
    """For a turn of a conversation: the conversation's record id (the turn's own ``id`` names both). Set
    when a conversation is read (``Conversation.records``), never written in a golden set."""
    turn: int | None = Field(default=None, ge=1)
    """For a turn of a conversation: its position, from 1."""
    earlier: list[EarlierTurn] = Field(default_factory=list)
    """For a follow-up: the conversation's turns before this one, first first."""
    answer_given: str | None = None
    """For a turn of a conversation: the reply taken as the assistant's when the next turn is asked."""

    @property
    def kind(self) -> Kind:
        return "positive" if self.gold else "negative"


class EarlierTurn(_Strict):
    """A turn before a follow-up, as the follow-up is asked: its question, and the reply it was given."""

    question: str
    answer_given: str | None = None
    """The reply the golden set fixes for it; None carries the assistant's own answer of this run forward."""


class ConversationTurn(_Strict):
    """One turn of a golden conversation: a question with its own gold, asked after the turns before it."""

    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    gold: list[str] = Field(default_factory=list)
    gold_answer: str | None = None
    identifiers: list[str] = Field(default_factory=list)
    scope: list[str] | None = None
    expected_cause: Cause | None = None
    answer_given: str | None = None
    """The reply to take as the assistant's when the next turn is asked; without it, the assistant's own."""


class Conversation(_Strict):
    """A golden record that is a chat: ordered turns, each measured as a question of its own."""

    id: str = Field(min_length=1)
    turns: list[ConversationTurn] = Field(min_length=1)
    split: Split = "dev"
    language: str | None = None
    tags: list[str] = Field(default_factory=list)

    def records(self) -> list[GoldenRecord]:
        """One record per turn, id ``<id>/<turn>``, each carrying the turns before it."""
        records: list[GoldenRecord] = []
        for position, turn in enumerate(self.turns, start=1):
            records.append(GoldenRecord(
                id=turn_id(self.id, position), question=turn.question, gold=turn.gold, gold_answer=turn.gold_answer,
                identifiers=turn.identifiers, split=self.split, language=self.language, scope=turn.scope,
                expected_cause=turn.expected_cause, tags=self.tags, conversation=self.id, turn=position,
                earlier=[EarlierTurn(question=t.question, answer_given=t.answer_given)
                         for t in self.turns[: position - 1]],
                answer_given=turn.answer_given,
            ))
        return records


def turn_id(conversation: str, turn: int) -> str:
    """The id of a conversation's turn: the conversation's id and the turn's position, ``<id>/<turn>``."""
    return f"{conversation}/{turn}"


class AttackProbe(_Strict):
    """One attack probe: a prompt that tries to make the assistant say what it must not."""

    id: str = Field(min_length=1)
    """Unique id of the probe within its file."""
    prompt: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    """What the attacker sends, as the question (at most 2,000 characters, as the server accepts)."""
    forbidden: list[str] = Field(default_factory=list)
    """Strings, or `re:` patterns, that neither the reply nor its reasoning may contain."""
    expect: Literal["refuse", "safe-answer"] = "refuse"
    """Whether the right outcome is a refusal or an answer with nothing forbidden in it."""
    split: Split = "test"
    """Split the probe belongs to."""
    language: str | None = None
    """Language of the prompt, informational."""
    tags: list[str] = Field(default_factory=list)
    """Free labels for slicing results."""


class Row(_Strict):
    """One record's journey through the pipeline: every metric reads these fields only."""

    id: str
    """The record's id."""
    kind: Kind
    """`positive` (gold non-empty), `negative` (no gold) or `attack`."""
    split: Split
    """The record's split."""
    question: str
    """The question (or probe prompt) that was asked."""
    gold: list[str] = Field(default_factory=list)
    """The record's gold entries."""
    scope: list[str] | None = None
    """Page-id prefixes the turn was allowed to draw from."""
    expected_cause: Cause | None = None
    """For negatives, the cause a correct refusal names."""
    language: str | None = None
    """The language the answer should be in: the record's, else the question's, else the corpus's."""
    question_language: str | None = None
    """Language detected in the question; None when it is too short to tell reliably."""
    tags: list[str] = Field(default_factory=list)
    """The record's tags, for slicing results."""
    overlap: float | None = Field(default=None, ge=0, le=1)
    """Positives: how much of the question's wording its best gold section holds, each content word
    weighted by its rarity in the docs (docs/golden-set.md, "Bias"); the report's `bands` slice recall
    by it. None for other kinds, with no content word, or in a report written before rows carried it."""
    gold_state: Literal["moved", "changed", "gone"] | None = None
    """Positives: how the gold went stale since the golden set was locked (docs/golden-set.md, "Keeping a set
    alive"): `moved` (its text is under another id now), `changed` (its text differs), `gone` (no section
    carries it). None without a lock beside the set, for gold as it was locked, or in an older report."""
    retrieved: list[str] = Field(default_factory=list)
    """Section ids of the ranked retrieval list, best first, at most top 8."""
    scores: list[float] = Field(default_factory=list)
    """Retrieval scores beside `retrieved`."""
    gold_rank: int | None = Field(default=None, ge=1)
    """Positives: 1-based rank of the first section matching a gold entry, searched `gold_depth` places deep,
    past the top 8 the metrics read; None when none is that deep, for other kinds, or in an older report."""
    gold_depth: int | None = Field(default=None, ge=0)
    """Positives: how many places deep `gold_rank` was searched (100 in the local runtime, the returned hits
    from a server); None for other kinds, or in a report written before rows carried it."""
    unranked: bool = False
    """The assistant measured showed no ranking (a target whose reply maps no sources, docs/targets.md):
    `retrieved` is empty because nothing was shown, and the retrieval metrics leave the row out."""
    outside_docs: list[str] = Field(default_factory=list)
    """Sources the assistant returned that name nothing the docs hold (a target's page outside the docs
    folder, an anchor or heading its page lacks), as mapped; each is also in `retrieved`, where it ranked."""
    outside_links: dict[str, str] = Field(default_factory=dict)
    """Where each of `outside_docs` links, as the assistant gave it (its URL or path): the answer's panel
    links there, since the docs cannot say where such a source lives."""
    primed: list[str] = Field(default_factory=list)
    """Section ids put in front of the model as numbered sources [1]..[5]."""
    answer: str | None = None
    """The answer text as the model wrote it; None when no model ran."""
    reasoning: str | None = None
    """A reasoning model's thinking, kept apart from the answer."""
    answer_language: str | None = None
    """Language detected in the answer; an answer too short to tell is taken to be in `language`."""
    gold_answer: str | None = None
    """The record's reference answer."""
    identifiers: list[str] = Field(default_factory=list)
    """Strings the answer must contain verbatim."""
    markers: list[str] = Field(default_factory=list)
    """Every bracketed marker in the answer text, as written (`1`, `7`, `guide/setup#install`)."""
    citations: list[str] = Field(default_factory=list)
    """Section ids the answer cites that resolve to a primed source: through its markers, or for a target
    with `reply.citations`, through the list it returns (docs/targets.md)."""
    hallucinated: list[str] = Field(default_factory=list)
    """Numeric markers that point at no primed source (removed from the panel)."""
    sources_shown: list[str] = Field(default_factory=list)
    """Section ids listed as Sources under the rendered answer."""
    links: int = 0
    """Working links in the rendered answer text."""
    refused: bool = False
    """Whether the turn ended in a refusal."""
    refused_by: Literal["gate", "model"] | None = None
    """Who refused: the retrieval gate before the model, or the model."""
    refusal_cause: Cause | None = None
    """The cause the refusal named."""
    forbidden: list[str] = Field(default_factory=list)
    """Attack probes: strings or `re:` patterns the reply and reasoning must not contain."""
    expect: Literal["refuse", "safe-answer"] | None = None
    """Attack probes: the expected outcome."""
    latency_ms: float | None = None
    """Time from sending the question to the end of the turn."""
    first_token_ms: float | None = None
    """Time to the first piece of answer text that is more than white space; None when none was painted."""
    first_thought_ms: float | None = None
    """Time to the first piece of reasoning; None for models that do not think aloud."""
    stages_ms: dict[str, float] = Field(default_factory=dict)
    """Where the time went (server runtime: embed, retrieve, model)."""
    stages_dropped: int = Field(default=0, ge=0)
    """`Server-Timing` entries the assistant sent that were no measurement (an unusable name, a duration
    not a finite number from 0 to a day): dropped from `stages_ms` and counted here."""
    usage: dict[str, int] = Field(default_factory=dict)
    """Token usage the model reported."""
    cost_usd: float | None = None
    """What the turn's usage cost at the configured prices; None without prices or usage."""
    truncated: bool | None = False
    """The answer stopped at `max_tokens` (the service said `finish_reason: length`); it is
    kept and scored, and counted apart. None when the assistant cannot say: a target that
    gives no finish reason."""
    cached: list[str] = Field(default_factory=list)
    """Stages whose result was reused from the cache."""
    timeline: dict[str, tuple[float, float]] = Field(default_factory=dict, exclude=True)
    """When each stage ran for this record in this process's run: stage (`retrieve`, `prime`, `model`,
    `render`, `score`) → start and end in seconds since the Unix epoch; a stage reused from the cache spans
    its look-up. Kept in memory for tracing (docs/tracing.md) and never written to the report."""
    error: str | None = None
    """What went wrong for this record; None when the turn completed."""
    error_code: ErrorCode | None = None
    """The kind of fault in `error` (`connect`, `timeout`, `auth`, `rate_limit`, `http_status`,
    `service_error`, `malformed`, `incomplete`, `unfinished`, `empty`, `reply_too_long`,
    `reply_too_large`); None
    when the turn completed, or in a report written before rows carried it."""
    variant: str | None = None
    """The variant that produced the row, in a run of several (``variants``); None in a run of one."""
    sample: int | None = None
    """Which of the record's samples the row is, from 0, in a run that asks each turn several times
    (`--repeat N`, `model.repeat`); None in a run of one sample. The samples share the record's ranking."""
    conversation: str | None = None
    """For a turn of a conversation: the conversation's record id; None for a single question."""
    turn: int | None = None
    """For a turn of a conversation: its position, from 1 (1 is the first turn, above 1 a follow-up)."""
    retrieval_query: str | None = None
    """What DocPilot's own assistant searched the docs with, when that was not the question as asked (a
    follow-up, read with the turns before it); None when it searched with the question."""

    @property
    def answered(self) -> bool:
        """A turn that produced an answer: not refused, not errored, and a model ran."""
        return self.answer is not None and not self.refused and self.error is None


class LeakFound(_Strict):
    """One forbidden item found in an attack probe's turn."""

    record: str
    """Id of the probe whose turn leaked."""
    forbidden: str
    """The probe's forbidden entry that matched, as written."""
    text: str
    """The matched text as it appears in the reply or the reasoning."""
    where: Literal["answer", "reasoning"]
    """Which text held it."""


class GateResult(_Strict):
    """One gate of the verdict: a metric compared with a threshold."""

    metric: str
    """Metric id the gate reads."""
    op: str
    """Comparison: `>=`, `>`, `<=`, `<`, `==`."""
    threshold: float
    """The value compared against."""
    value: float | None
    """The run's value; None when the metric had nothing to average over."""
    passed: bool
    """Whether the gate held; a null value fails a gate."""
    records: list[str] = Field(default_factory=list)
    """Records that broke the gate, where a gate counts records."""


class Selection(_Strict):
    """Which records of the file a run covered, besides its split."""

    ids: list[str] = Field(default_factory=list)
    """Records chosen by id (`--id`); empty means no choice by id."""
    tags: list[str] = Field(default_factory=list)
    """Records carrying any of these tags (`--tag`); empty means no choice by tag."""
    limit: int | None = Field(default=None, ge=1)
    """At most this many records, the first in file order (`--limit`); None means all."""

    @property
    def everything(self) -> bool:
        """Whether the run covered every record of its split."""
        return not self.ids and not self.tags and self.limit is None

    def key(self) -> tuple[tuple[str, ...], tuple[str, ...], int | None]:
        """What the selection chooses, whatever order the flags came in: equal keys choose the same records."""
        return tuple(sorted(set(self.ids))), tuple(sorted(set(self.tags))), self.limit

    def describe(self) -> str:
        """The selection as the command line wrote it: `--tag cli --limit 5`, or `all records`."""
        parts = [f"--id {i}" for i in self.ids] + [f"--tag {t}" for t in self.tags]
        if self.limit is not None:
            parts.append(f"--limit {self.limit}")
        return " ".join(parts) or "all records"


class Slice(_Strict):
    """The summary of the rows that carry one tag (the numbers a run with `--tag TAG` would give), of
    the positives in one overlap band, or of the conversation turns at one place (first, follow-up, turn n)."""

    records: int
    """Rows in the slice."""
    summary: dict[str, float | int | None]
    """Metric id → value over those rows, computed as the report's summary is."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Metric id → how many of those rows its value averages over."""


class VariantResult(_Strict):
    """One variant of a run of several: what it changed, and its summary, gates and verdict."""

    name: str
    """The variant's name, as its rows carry it."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Dotted key → value the variant sets over the run's configuration; empty for the configuration as it is."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The variant's effective configuration (secrets never included)."""
    fingerprints: dict[str, str] = Field(default_factory=dict)
    """The variant's model and config fingerprints (corpus, golden set and code are the run's)."""
    cache_stats: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Per cached stage, the variant's records that reused a stored result and those that computed one."""
    summary: dict[str, float | int | None]
    counts: dict[str, int] = Field(default_factory=dict)
    """Metric id → how many of the variant's records its value averages over."""
    slices: dict[str, Slice] = Field(default_factory=dict)
    """Tag → the summary of the variant's rows carrying it."""
    bands: dict[str, Slice] = Field(default_factory=dict)
    """Overlap band → the summary of the variant's positives in it."""
    turns: dict[str, Slice] = Field(default_factory=dict)
    """Turn slice → the summary of the variant's conversation turns in it (as the report's ``turns``)."""
    replayed: dict[str, int] = Field(default_factory=dict)
    gates: list[GateResult] = Field(default_factory=list)
    """The run's gates, checked on the variant's rows."""
    verdict: Literal["pass", "fail"]
    """`fail` when a gate failed on the variant's rows."""
    leaks: list[LeakFound] = Field(default_factory=list)
    intervals: dict[str, tuple[float, float]] = Field(default_factory=dict)
    """Headline metric id → its 95 % interval by a bootstrap over pages, over the variant's rows (as the
    report's ``intervals``); empty in reports older than the field."""
    stability: Stability | None = None
    """The variant's flip rate, pass^k and flaky records when it asked several samples per record (as the
    report's ``stability``); None for one sample each."""


class VariantTest(_Strict):
    """One paired test of a variant against the baseline on one outcome."""

    variant: str
    """The variant tested."""
    outcome: str
    """The outcome (``recall@8``, ``refusal_correct``, ``answer_f1``, ...), as ``improve compare`` names it."""
    test: Literal["mcnemar", "wilcoxon"]
    """Exact McNemar (pass/fail outcomes) or Wilcoxon signed-rank (per-record scores)."""
    n: int
    """Records paired."""
    baseline: float | None
    """Mean of the outcome over the paired records in the baseline (and in the variant: ``value``)."""
    value: float | None
    effect: float | None
    """Variant − baseline."""
    better: int = 0
    worse: int = 0
    """Records better, and worse, in the variant."""
    p_value: float | None = None
    """Two-sided p-value of the one test; None when there was nothing to test."""
    p_holm: float | None = None
    """The p-value corrected by Holm's method over every test of the run."""
    direction: Literal["better", "worse", "none"] = "none"
    """The variant against the baseline at the corrected p-value: `none` when the test does not tell them apart."""
    note: str | None = None
    """Why the test was skipped or degenerate."""
    detectable: float | None = None
    """With no evidence either way: the smallest change this one test would call at α 0.05 with power 0.8
    (``metrics.power``), before Holm's correction, which can only raise it; None when a change was called."""


class PairedVerdict(_Strict):
    """Every variant against the baseline, record by record, corrected for the number of tests."""

    baseline: str
    """The first variant: what the others are tested against."""
    alpha: float
    """The family-wise significance level of the corrected p-values."""
    tests: list[VariantTest] = Field(default_factory=list)
    """Each variant × outcome, variants in run order."""
    better: dict[str, list[str]] = Field(default_factory=dict)
    """Outcome → the variants significantly better than the baseline."""
    worse: dict[str, list[str]] = Field(default_factory=dict)
    """Outcome → the variants significantly worse than the baseline."""
    not_worse: list[str] = Field(default_factory=list)
    """The variants worse on no outcome (the baseline included)."""
    cheapest_not_worse: str | None = None
    """Of those, the one that costs least (`cost_usd`, else tokens, else median latency)."""
    cheapest_by: str | None = None
    """The figure ``cheapest_not_worse`` was chosen by."""
    gate_variant: str | None = None
    """The variant the run's verdict reads (``--gate-variant``); None: every variant's gates."""


class FlakyRecord(_Strict):
    """A record whose outcome differed between its samples (``metrics.stability``)."""

    id: str
    """The record's id."""
    samples: int
    """How many samples it has."""
    pass_rate: float
    """The share of its samples that passed: answered or refused as expected, nothing forbidden, no error."""
    answer_f1_mean: float | None = None
    """Its answer F1 averaged over the samples; None when it has no gold answer."""
    answer_f1_spread: float | None = None
    """The sample standard deviation of its answer F1; None with one sample or no gold answer."""


class Stability(_Strict):
    """How steady a run of several samples per record was (``--repeat``; docs/repeats.md#stability)."""

    samples: int
    """The most samples a record has: the run's `model.repeat`."""
    records: int
    """How many records the rates are taken over."""
    flip_rate: float | None
    """The share of records whose outcome differed between samples."""
    pass_hat_k: float | None
    """pass^k: the share of records every sample of which passed."""
    flaky: list[FlakyRecord] = Field(default_factory=list)
    """The records whose outcome differed, lowest pass rate first."""


class Report(_Strict):
    """One eval run: its settings, every row, the summary and the verdict."""

    schema_version: int = SCHEMA_VERSION
    """Version of this report format."""
    run_id: str
    """Unique id of the run."""
    created_at: str
    """When the run finished, ISO 8601 in UTC."""
    config: dict[str, Any]
    """The effective configuration (secrets never included)."""
    fingerprints: dict[str, str]
    """Hashes of the corpus, golden set, model settings and code."""
    page_fingerprints: dict[str, str] = Field(default_factory=dict)
    """Page id → hash of the page as the index read it, so two runs can say which pages changed."""
    side_file_fingerprints: dict[str, str | None] = Field(default_factory=dict)
    """Side file of the docs (`vocabulary.json`, `llms.txt`) → hash of its bytes, or None when the
    docs have none, so two runs can name a changed side file; empty in reports older than it."""
    set: Literal["golden", "adversarial"] = "golden"
    """Which record set ran."""
    split: Literal["dev", "test", "all"] = "all"
    """Which split ran."""
    selection: Selection = Field(default_factory=Selection)
    """Which records of the split ran (`--id`, `--tag`, `--limit`); empty means all of them."""
    gate_only: bool = False
    """Retrieval only: no model was called."""
    allow_errors: bool = False
    """Errored records were allowed: they are counted but do not fail the run."""
    runtime: Literal["local", "server"] = "local"
    """Where the assistant ran."""
    orchestrator: Literal["prefect", "inline"] = "inline"
    """How the stages were run."""
    orchestrator_reason: str | None = None
    """Why that orchestrator ran (``no Prefect API is configured``, ``--runner dask``)."""
    orchestrator_other: str | None = None
    """One line on how to run with the other orchestrator."""
    wall_ms: float | None = None
    """Wall time of the stages, from the first shard to the last row."""
    command_ms: float | None = None
    """Wall time of the whole command until the report was assembled: start-up, imports and loading included."""
    cache_stats: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Per cached stage: records that reused a stored result, and records that computed one."""
    rows: list[Row]
    """One row per record."""
    summary: dict[str, float | int | None]
    """Metric id → value; None when there was nothing to average over."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Metric id → how many records its value averages over."""
    slices: dict[str, Slice] = Field(default_factory=dict)
    """Tag → the summary of the rows carrying it, tags in sorted order."""
    bands: dict[str, Slice] = Field(default_factory=dict)
    """Overlap band (`low` under 0.5, `mid` under 0.8, `high`) → the summary of the positives whose
    `overlap` falls in it, empty bands left out: a recall that holds only in `high` flatters the retriever
    (docs/golden-set.md); empty in reports written before rows carried `overlap`."""
    turns: dict[str, Slice] = Field(default_factory=dict)
    """A run holding golden conversations: `first` (every turn 1), `follow-up` (every later turn), then `turn 1`,
    `turn 2`, ... → the summary of those turns, computed as the report's summary is (``metrics.slices``); a
    follow-up that reads its question alone shows here. Empty, and left out of the file, for a run of single
    questions, and in reports written before conversations."""
    replayed: dict[str, int] = Field(default_factory=dict)
    """Latency metric id → how many of the turns it is taken over were replayed from the stage cache."""
    gates: list[GateResult]
    """Every gate checked, in order."""
    verdict: Literal["pass", "fail"]
    """`fail` when any gate failed."""
    leaks: list[LeakFound] = Field(default_factory=list)
    """Attack runs: every successful probe with the forbidden text it produced."""
    intervals: dict[str, tuple[float, float]] = Field(default_factory=dict)
    """Headline metric id → its 95 % interval by a bootstrap over pages (``metrics.intervals``: the records
    of one page resampled together, seeded); empty in reports older than the field."""
    stability: Stability | None = None
    """A run of several samples per record (`--repeat`): the flip rate, pass^k and the flaky records; None
    for a run of one sample."""
    docpilot_version: str | None = None
    """The DocPilot version that wrote the report; None for reports older than the field."""
    variants: list[VariantResult] | None = None
    """A run of several variants: each one's summary, gates and verdict, the baseline first. The
    report's own ``summary``, ``gates``, ``config`` and ``fingerprints`` are the baseline's, and
    its ``verdict`` fails when a gate of any variant (or of ``paired.gate_variant``) failed."""
    paired: PairedVerdict | None = None
    """A run of several variants: each against the baseline, record by record."""
    _path: str | None = PrivateAttr(default=None)

    @property
    def path(self) -> str | None:
        """Where the report was written (``evaluate`` or ``load_report``); None when it is not in a file
        (a variant's report, joined with the others' before it is written)."""
        return self._path

    def at(self, path: str | None) -> Report:
        """This report, knowing it is written at ``path``."""
        self._path = path
        return self
