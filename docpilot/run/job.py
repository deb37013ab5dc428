"""One eval run's description, and the records it covers."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from docpilot.config.model import Config
from docpilot.errors import InputError
from docpilot.golden.loading import load_probes, read_golden
from docpilot.golden.selection import check_ids_in_split, select_records
from docpilot.schema import GoldenRecord, Selection
from docpilot.userfiles.intake import GOLDEN_SET, PROBE_FILE, read_bytes


class EvalJob(BaseModel):
    """Everything an eval run needs to know, small enough to pass to an orchestrator."""

    model_config = ConfigDict(extra="forbid")

    config: Config
    """The effective configuration."""
    golden: str
    """Path of the record file: the golden set, or the attack probes when ``set`` is adversarial."""
    set: Literal["golden", "adversarial"] = "golden"
    """Which record set runs: questions with known answers, or attack probes."""
    split: Literal["dev", "test", "all"] = "all"
    """Which records run."""
    selection: Selection = Field(default_factory=Selection)
    """Which records of the split run (`--id`, `--tag`, `--limit`); empty means all of them."""
    gate_only: bool = False
    """Retrieval only: no model is called."""
    use_cache: bool = True
    """Read and write cached stage results; False computes everything and stores nothing."""
    refresh: list[Literal["retrieve", "model"]] = Field(default_factory=list)
    """Stages to compute afresh (and store again) even where a cached result exists."""
    allow_errors: bool = False
    """Errored records are counted but do not fail the run."""
    runtime: Literal["local", "server"] = "local"
    """Where the assistant runs: in this process, or behind `docpilot serve` over HTTP."""
    url: str | None = None
    """The server's base URL for the server runtime; None starts a local one for the run."""
    out: str | None = None
    """Where to write the report; None for the reports folder."""
    corpus_fingerprint: str | None = None
    """The corpus the run started with: every stage, here or on a worker, must rank that corpus."""
    variant: str | None = None
    """The variant this job runs in a run of several (``docpilot.run.variants``): its rows carry the
    name, and its report joins the others' in one file instead of being written on its own."""
    run_key: str = Field(default_factory=lambda: uuid.uuid4().hex)
    """Which run this is, in this process: its stages find the run's state by it (``docpilot.run.context``)."""


# Record files parsed in this process, by kind, path and content digest: a job's records
# are read by every stage, and a Dask worker or a schedule reads the same file run after
# run. Keyed by content, so an edited file is parsed again; locked, so evals on several
# threads share it safely; a few files at most.
_PARSED: OrderedDict[tuple[str, str, str], tuple[list, list]] = OrderedDict()
_PARSED_FILES = 4
_PARSED_LOCK = threading.Lock()


def read_records(path: str, kind: str = "golden") -> list:
    """A golden set's records (or, for ``adversarial``, a probe file's probes), parsed once
    per process for the same file content."""
    return _read(path, kind)[0]


def record_warnings(path: str) -> list:
    """The golden set's warnings (``docpilot.golden.warnings``), from the same single parse as its records."""
    return _read(path, "golden")[1]


def _read(path: str, kind: str) -> tuple[list, list]:
    try:
        # Through the same reader as the parse: a named pipe or /dev/zero must not hang or fill the memory here.
        data = read_bytes(Path(path), PROBE_FILE if kind == "adversarial" else GOLDEN_SET)
        key = (kind, str(Path(path).resolve()), hashlib.sha256(data).hexdigest())
    except (OSError, InputError):
        key = None
    if key is not None:
        with _PARSED_LOCK:
            if key in _PARSED:
                _PARSED.move_to_end(key)
                return _PARSED[key]
    if kind == "adversarial":
        loaded = (load_probes(path), [])
    else:
        checked = read_golden(path)
        loaded = (checked.records, checked.warnings)
    if key is None:
        return loaded  # the parse said what is wrong with the path, in the user's terms
    with _PARSED_LOCK:
        _PARSED[key] = loaded
        while len(_PARSED) > _PARSED_FILES:
            _PARSED.popitem(last=False)
    return loaded


def job_records(job: EvalJob) -> list[GoldenRecord]:
    """The job's records, in file order, filtered to its split and its selection."""
    records = read_records(job.golden, job.set)
    if job.split != "all":
        records = [r for r in records if r.split == job.split]
    return select_records(records, job.selection, job.golden)


def shards(items: Sequence, size: int, *, first: int | None = None) -> Iterator[list]:
    """Consecutive slices of at most ``size`` items; the first one, and the last, hold at most ``first``.

    A run's first shard is one round of turns, to get the model going while the rest
    is ranked. Its last shard is one round too, when the run is longer than a round
    and a shard: the shard before it is then answered a round before the run ends, and
    is rendered and scored while the model answers that last round, not after it.
    """
    cut = [0]
    start, end = 0, len(items)
    if first is not None and first < min(size, len(items)):
        cut.append(first)
        start = first
        if end - start > size:
            end -= first
    cut += list(range(start + size, end, size)) + [end, len(items)]
    # A conversation's turns travel together (its follow-ups carry the turns before them): no cut inside one.
    cut = sorted({_after_conversation(items, at) for at in cut if at > 0})
    previous = 0
    for at in cut:
        if at > previous:
            yield list(items[previous:at])
            previous = at


def _after_conversation(items: Sequence, at: int) -> int:
    """``at``, or past the end of the conversation whose turns it would cut."""
    while 0 < at < len(items) and getattr(items[at], "turn", None) not in (None, 1) \
            and getattr(items[at], "conversation", None) == getattr(items[at - 1], "conversation", None):
        at += 1
    return at


def build_job(
    config: str | Config | None = None,
    *,
    overrides: dict | None = None,
    record_set: Literal["golden", "adversarial"] = "golden",
    check_corpus: bool = True,
    **settings,
) -> EvalJob:
    """The job of a configuration, its records read and checked.

    ``config`` is a configuration file (None: ``configs/docpilot.yaml`` if present),
    read with ``overrides``, or a configuration already read.

    The record file is the configuration's golden set, or its attack probes for the
    adversarial set. Its records are parsed now, so a mistake in them stops the run
    before anything is loaded or called; with ``check_corpus`` the golden set's gold
    entries are also checked against the docs (which loads the corpus and its index),
    and the job records the corpus's fingerprint, which every stage then holds to.
    ``settings`` are the job's other fields (split, gate_only, use_cache, …).
    """
    from docpilot.config.loading import load_config
    from docpilot.golden.loading import validate_against_corpus

    if not isinstance(config, Config):
        config = load_config(config, overrides=overrides)
    elif overrides:
        raise ValueError("overrides apply to a configuration file, not to a configuration already read")
    path = config.golden if record_set == "golden" else config.adversarial
    records = read_records(path, record_set)
    job = EvalJob(config=config, golden=path, set=record_set, **settings)
    check_ids_in_split(records, job.split, job.selection.ids, path)
    in_split = [r for r in records if job.split == "all" or r.split == job.split]
    select_records(in_split, job.selection, path)  # a wrong --id or --tag stops here, before any work
    if not check_corpus:
        return job
    from docpilot.assistant.workspace import open_workspace

    corpus = open_workspace(config, use_cache=False, ranks=False).corpus  # the index and cache open with the run
    if record_set == "golden":
        validate_against_corpus(records, corpus, path)
    # Every stage of the run, here or on a worker, ranks the corpus loaded now.
    return job.model_copy(update={"corpus_fingerprint": corpus.fingerprint})
