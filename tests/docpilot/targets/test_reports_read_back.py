"""Every report a run against a target writes, DocPilot reads back: arbitrary replies, every reader.

A real HTTP server on 127.0.0.1 answers a JSON target's questions in the order they come
with replies a hypothesis example draws: answers of any text (control characters, lone
surrogates, ``[n]`` markers in and out of range, brackets that name pages, Rich markup,
HTML, a quarter of a megabyte, nothing) or of no text at all (an object, a list, a number,
a boolean, null); sources and citations of any shape (URLs inside and outside the docs,
pages without an anchor, anchors the docs lack, junk, or no list at all); a refusal flag of
any JSON value; ``Server-Timing`` headers that measure nothing (NaN, inf, -1, 1e308, names
that are no token, empty, repeated); and statuses that refuse (401 and 403 echoing the key,
429, 500, 503, an HTML page, a body that is no JSON).

Most runs open with a reply their mapping reads; the others may stop at that first reply,
with one error and no report. ``docpilot eval --target`` writes the report with its HTML,
JUnit and Markdown readouts; then every command that reads a report reads it: ``score``
(its recomputed summary, gates and verdict are the stored ones), ``status``, ``history``,
``report`` in each format, ``improve`` and ``improve compare`` against a run of plain
replies, as text and as JSON where they offer both. Each ends 0 or 1, never 2 (not a
DocPilot report, or not consistent) nor 3 (a bug); its JSON parses and it prints nothing a
terminal obeys; the JUnit XML parses and the HTML runs no script of a reply's; and the key
the target reads from the environment is, not even in part, in any file written or any
command's output.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest
import uvicorn
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, Phase, event, example, given, settings
from hypothesis import strategies as st

from docpilot.cli import main
from tests.support.openai_server import _bind, running

pytestmark = pytest.mark.slow  # about ten seconds: a whole run and a dozen commands per example

DOCS = Path(__file__).resolve().parents[2] / "data" / "pipeline" / "docs"
BASE = "https://docs.acme.test/"
KEY_VARIABLE = "READBACK_KEY"
KEY = "zebra-7Qx2-lantern"
"""Not key-shaped, so only the target's own redaction (``Endpoint.clean``) can take it out; a token, so a
`Server-Timing` entry may carry it as a stage name."""
PIECES = tuple(KEY[i:i + 10] for i in range(len(KEY) - 9))
"""What of the key no output may hold: any ten characters of it in a row, so half a key quoted is a leak too."""
RECORDS = [
    {"id": "q0", "question": "How do I create a token?", "gold": ["guide/auth#tokens"],
     "gold_answer": "Run acme token create.", "split": "dev"},
    {"id": "q1", "question": "How do I roll back a deploy?", "gold": ["guide/deploy#rollback"],
     "gold_answer": "Run acme rollback.", "split": "test"},
    {"id": "q2", "question": "How do I install Acme?", "gold": ["index#install", "index#acme-cli"],
     "gold_answer": "Install it with pip.", "split": "dev"},
    {"id": "q3", "question": "How often should tokens rotate?", "gold": ["guide/auth#rotating-tokens"],
     "gold_answer": "Every ninety days.", "split": "test"},
    {"id": "neg-price", "question": "How much does Acme cost?", "expected_cause": "not-answerable", "split": "dev"},
    {"id": "neg-k8s", "question": "Does Acme run Kubernetes?", "expected_cause": "not-answerable",
     "split": "test"},
]
_MAPPING = {"answer": "answer", "sources": "sources", "refusal": "refused"}
_BOUNDS = {"retries": 0, "timeout_s": 10, "max_reply_bytes": 64 * 1024, "max_sources": 12}
TARGETS = {
    # [n] markers in the answer cite the sources; the key travels in a header.
    "marked": {"url": "{base}/ask", "headers": {"X-Api-Key": f"${{{KEY_VARIABLE}}}"},
               "body": {"question": "{question}", "id": "{id}"}, "reply": _MAPPING,
               "source_ids": {"base_url": BASE}, **_BOUNDS},
    # Citations listed beside the answer; the key travels in the URL's path and query, which faults quote.
    "cited": {"url": f"{{base}}/v1/${{{KEY_VARIABLE}}}/ask?key=${{{KEY_VARIABLE}}}", "body": {"question": "{question}"},
              "reply": {**_MAPPING, "citations": "citations"}, "source_ids": {"base_url": BASE}, **_BOUNDS},
    # No sources mapped: no ranking at all.
    "unranked": {"url": "{base}/ask", "headers": {"Authorization": f"Bearer ${{{KEY_VARIABLE}}}"},
                 "body": {"question": "{question}"}, "reply": {"answer": "answer", "refusal": "refused"}, **_BOUNDS},
}
OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x80-\x9f\u202a-\u202e\u2066-\u2069]")
"""What a terminal acts on when it is printed: C0 and C1 controls, where escape sequences start, and the
bidirectional overrides. Line breaks and tabs are text; DEL, which terminals ignore, may pass."""
EVERY_OUTCOME = (0, 1)
"""A reader ends 0 (the run passed) or 1 (a gate failed); 2 says the report is none of DocPilot's, 3 a bug."""


# --- the target: a real server answering from a queue --------------------------------------

@dataclass(frozen=True)
class Canned:
    """One reply exactly as the server sends it."""

    status: int
    body: bytes
    content_type: str = "application/json"
    timing: tuple[str, ...] = ()
    """`Server-Timing` header values, each sent as a header of its own."""


PLAIN = Canned(200, json.dumps({"answer": "Run acme token create [1].", "sources": [BASE + "guide/auth.html#tokens"],
                                "citations": [1], "refused": False}).encode(),
               timing=("retrieve;dur=2.5, generate;dur=40",))


class Replies:
    """An ASGI app that answers each request with the next queued reply, or ``PLAIN`` once the queue is empty."""

    def __init__(self) -> None:
        self.queue: deque[Canned] = deque()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:  # the question, read whole before the reply as a real service does
            more = (await receive()).get("more_body", False)
        reply = self.queue.popleft() if self.queue else PLAIN
        headers = [(b"content-type", reply.content_type.encode()),
                   *((b"server-timing", value.encode("latin-1")) for value in reply.timing)]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})


# --- what a target may send ------------------------------------------------------------------

_FRAGMENTS = st.sampled_from([
    "[1]", "[2]", "[3]", "[0]", "[99]", "[-1]", "[1][1]", "[guide/auth#x]", "[guide/auth#tokens]", "[index#]", "[",
    "]", "[[2]]", "REFUSE: not-answerable", "REFUSE:", "REFUSE: made-up-cause", "\x00", "\x1b[31mred\x1b[0m", "\r\n",
    "\u202e", "\ufeff", "<script>alert(1)</script>", "]]>", "&amp;", "<!--", "|", "\n# heading\n", "```", "\n---\n",
    "*", "_", "\\", '"', "'", "{{ x }}", "%s", "[/]", "[bold]", "[/red]", "[link=javascript:x]", "${HOME}", KEY,
    f"key={KEY}", f"Bearer {KEY}", " ", "\t", "Run acme token create.",
])
_CUT = "a" * 190 + KEY
"""The key across the 200 characters of a body a fault quotes: cut first and redacted after, half of it stays."""
_TEXT = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=30), st.characters(categories=["Cs"])), max_size=8).map(
    "".join)
_HUGE = st.sampled_from(["x " * 130_000, "[1] " * 5_000, "é" * 20_000 + "[2]"])
_ANSWER_TEXT = st.one_of(_TEXT, _TEXT, _TEXT, _HUGE, st.just(""), st.just("   "))
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                     st.floats(allow_nan=True, allow_infinity=True), _TEXT)
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
_SOURCE = st.one_of(
    st.sampled_from([
        BASE + "guide/auth.html#tokens", BASE + "guide/deploy.html#rollback", BASE + "index.html#install",
        BASE + "guide/auth.html", BASE + "guide/auth.html#", BASE + "guide/auth.html#no-such-anchor",
        BASE + "guide/nothing-here.html#x", BASE, "https://elsewhere.test/guide/auth.html#tokens",
        "/guide/deploy/", "guide/deploy#rollback", "index", "#", "?", "", " ", "javascript:alert(1)",
        f"{BASE}guide/auth.html?api_key={KEY}#tokens", f"{BASE}{KEY}.html#x", f"{BASE}guide/{KEY}#tokens",
        f"https://user:{KEY}@docs.acme.test/guide/auth.html#tokens", "guide/auth#tokens\x00", "guide/a b#c d",
        "guide/[/]#[bold]", BASE + "a" * (2000 - len(BASE) - 6) + KEY, {"note": _CUT},
    ]),
    _TEXT, _JSON,
)
_SOURCES = st.one_of(st.lists(_SOURCE, max_size=14), _JSON)
_CITATIONS = st.one_of(
    st.lists(st.one_of(st.integers(min_value=-2, max_value=20), _SOURCE, st.booleans()), max_size=6), _JSON)
_FIELDS = st.fixed_dictionaries({}, optional={
    "answer": st.one_of(_ANSWER_TEXT, _JSON), "sources": _SOURCES, "citations": _CITATIONS, "refused": _JSON})

_STAGE_NAMES = st.sampled_from(["retrieve", "generate", "model", "total", "retrieve", KEY, "", "na me", "é",
                                "x" * 70, "a,b", "db;x", "<b>"])
_DURATIONS = st.one_of(
    st.sampled_from(["NaN", "nan", "inf", "-inf", "Infinity", "-1", "-0", "1e308", "1e999", "86400001", "0", "12.5",
                     '"3"', "", "abc", "0x10", "1_000", " 7 "]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr))
_HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=20)
_ENTRY = st.one_of(
    st.builds(lambda name, dur, desc: f"{name};dur={dur}{desc}", _STAGE_NAMES, _DURATIONS,
              st.sampled_from(["", ';desc="x"', ";desc", f';desc="{KEY}"'])),
    _STAGE_NAMES, _HEADER_TEXT)
_TIMING = st.lists(st.lists(_ENTRY, max_size=4).map(", ".join), max_size=3).map(tuple)
"""`Server-Timing` header values: printable latin-1, which is what HTTP/1.1 lets a header carry."""


def _encoded(fields: dict, ascii_only: bool) -> bytes:
    """JSON as a service writes it; a lone surrogate goes out as its ``\\u`` escape, which JSON allows."""
    return json.dumps(fields, ensure_ascii=ascii_only or _has_surrogate(fields), allow_nan=True).encode()


def _has_surrogate(value: object) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


def _weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """A draw from one of the strategies, each chosen as often as its weight says."""
    return st.sampled_from([strategy for weight, strategy in choices for _ in range(weight)]).flatmap(lambda s: s)


def _replies(statuses: list[int], fields: st.SearchStrategy[dict]) -> st.SearchStrategy[Canned]:
    return st.builds(lambda status, body, ascii_only, timing: Canned(status, _encoded(body, ascii_only), timing=timing),
                     st.sampled_from(statuses), fields, st.booleans(), _TIMING)


_WELL_FORMED = st.fixed_dictionaries({
    "answer": _ANSWER_TEXT, "sources": st.lists(_SOURCE, max_size=14),
    "citations": st.lists(st.one_of(st.integers(min_value=-2, max_value=20), _SOURCE), max_size=6),
    "refused": _weighted((3, st.just(False)), (1, st.none()), (1, _JSON)),
})
"""A reply of the fields the mappings read, each of the type they want, holding anything."""
_REFUSING = st.builds(
    lambda status, timing: Canned(status, json.dumps({"detail": f"invalid key {KEY}", "sent": f"X-Api-Key: {KEY}"})
                                  .encode(), timing=timing),
    st.sampled_from([401, 403]), _TIMING)
_NOT_JSON = st.builds(
    Canned, st.sampled_from([200, 404, 500]),
    st.sampled_from([b"<html><body>Please sign in</body></html>", b"", b"not json", b"\xff\xfe\x00",
                     f"<html>{KEY}</html>".encode(), b"[1, 2", b'"just a string"', b"[]", b"42", b"null",
                     b"[" * 5000 + b"]" * 5000, _CUT.encode(), b"[/red] \x1b[2J" + _CUT.encode()]),
    st.sampled_from(["text/html", "application/json", "text/plain"]), _TIMING)
READABLE = _replies([200, 200, 200, 429, 500], _WELL_FORMED)
"""A reply the mapping reads, whatever it says."""
REPLY = _weighted((4, _replies([200], _WELL_FORMED)), (3, _replies([200, 200, 200, 200, 500, 429, 503], _FIELDS)),
                  (1, _REFUSING), (1, _NOT_JSON))
"""Any reply: readable, of fields missing or of the wrong type, refusing the key, or no JSON at all."""


# --- the run and its readers -----------------------------------------------------------------

@pytest.fixture(scope="module")
def target() -> Iterator[tuple[str, Replies]]:
    replies = Replies()
    sock = _bind()
    server = uvicorn.Server(uvicorn.Config(replies, log_config=None, access_log=False, lifespan="off",
                                           timeout_graceful_shutdown=1))
    with running(server, sock, "the target"):
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", replies


@pytest.fixture(scope="module")
def project(target, tmp_path_factory) -> Iterator[tuple[Path, Path]]:
    """The config and the report of a run of plain replies, the one every drawn run is compared with."""
    base, _ = target
    root = tmp_path_factory.mktemp("readback")
    golden = root / "golden.yaml"
    golden.write_text(yaml.safe_dump(RECORDS))
    targets = {name: json.loads(json.dumps(t).replace("{base}", base)) for name, t in TARGETS.items()}
    config = root / "docpilot.yaml"
    config.write_text(yaml.safe_dump({"corpus": {"docs": str(DOCS)}, "golden": str(golden),
                                      "model": {"concurrency": 1}, "targets": targets}, sort_keys=False))
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_VARIABLE, KEY)
        env.setenv("DOCPILOT_REPORTS_DIR", str(root / "baseline"))
        env.setenv("DOCPILOT_CACHE_DIR", str(root / "cache"))
        result = _run("eval", "--config", str(config), "--target", "marked", "--orchestrator", "inline", "--json")
        assert result.exit_code in EVERY_OUTCOME, result.output
        baseline = Path(json.loads(result.stdout)["report"])
        time.sleep(1.0)  # run ids start with the second: every drawn run is newer than the baseline
        yield config, baseline


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _readers(config: Path, reports: Path, report: Path, baseline: Path, out: Path) -> dict[str, tuple[str, ...]]:
    """Every command that reads a report, in each of its output forms."""
    folder = ("--reports", str(reports))
    return {
        "score": ("score", str(report)),
        "score --json": ("score", str(report), "--json"),
        "status": ("status", *folder),
        "status --json": ("status", *folder, "--json"),
        "history": ("history", *folder),
        "history --json": ("history", *folder, "--json"),
        "history --markdown": ("history", *folder, "--markdown"),
        "report": ("report", str(report), *folder, "--html", str(out / "again.html"), "--junit",
                   str(out / "again.xml"), "--markdown", str(out / "again.md")),
        "report --markdown -": ("report", str(report), *folder, "--markdown", "-"),
        "improve": ("improve", str(report), "--config", str(config), "--no-settings"),
        "improve --json": ("improve", str(report), "--config", str(config), "--no-settings", "--json"),
        "improve compare": ("improve", "compare", str(baseline), str(report), "--config", str(config)),
        "improve compare --json": ("improve", "compare", str(baseline), str(report), "--config", str(config),
                                   "--json"),
    }


def _run_and_read(config: Path, baseline: Path, name: str, folder: Path) -> dict[str, Result]:
    """Run the eval against the target, then every reader over its report; each command's result by name."""
    reports, out = folder / "reports", folder / "out"
    reports.mkdir(parents=True)
    out.mkdir()
    shutil.copy(baseline, reports / baseline.name)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_VARIABLE, KEY)
        env.setenv("DOCPILOT_REPORTS_DIR", str(reports))
        env.setenv("DOCPILOT_CACHE_DIR", str(folder / "cache"))
        ran = _run("eval", "--config", str(config), "--target", name, "--orchestrator", "inline", "--json",
                   "--html", str(out / "run.html"), "--junit", str(out / "run.xml"), "--markdown", str(out / "run.md"))
        if ran.exit_code not in EVERY_OUTCOME:
            return {"eval": ran}
        report = Path(json.loads(ran.stdout)["report"])
        return {"eval": ran, **{reader: _run(*args) for reader, args in _readers(config, reports, report, baseline,
                                                                                  out).items()}}


def _check_read_back(outputs: dict[str, Result], out: Path) -> None:
    """The report's summary is the one `score` works out from its rows, and each readout parses."""
    stored = json.loads(Path(json.loads(outputs["eval"].stdout)["report"]).read_text())
    scored = json.loads(outputs["score --json"].stdout)
    assert _same(scored["summary"], stored["summary"]), "score recomputed another summary than the run stored"
    assert (scored["gates"], scored["verdict"]) == (stored["gates"], stored["verdict"])
    assert json.loads(outputs["status --json"].stdout)["report"]["run_id"] == stored["run_id"]
    for junit in ("run.xml", "again.xml"):
        ElementTree.parse(out / junit)  # what a CI server reads must parse, whatever the answers held
    for html in ("run.html", "again.html"):
        page = (out / html).read_text(encoding="utf-8").lower()
        assert "<script>alert(1)" not in page and 'href="javascript:' not in page, f"{html} runs a reply's script"
    for row in stored["rows"]:
        event(f"row: {row['error_code'] or ('refused' if row['refused'] else 'answered')}")


def _obeyed(text: str) -> list[str]:
    """Each character of ``text`` a terminal acts on, with a little of what comes before it."""
    return [repr(text[max(found.start() - 60, 0):found.end()]) for found in OBEYED.finditer(text)][:5]


def _leaks(data: bytes) -> bool:
    return any(piece.encode() in data for piece in PIECES)


def _same(a: dict, b: dict) -> bool:
    """Two summaries are the same: equal keys, and values equal (floats to the last bit, NaN to NaN)."""
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (isinstance(a[k], float) and isinstance(b[k], float) and math.isnan(a[k]) and math.isnan(b[k]))
        for k in a)


_EVERY_HAZARD = [
    Canned(200, json.dumps({
        "answer": "Run it [1], [2] or [99]. <script>alert(1)</script> \x1b]0;title\x07 \u202e [/red] " + KEY,
        "sources": ["javascript:alert(1)", f"{BASE}guide/{KEY}#tokens", BASE + "guide/auth.html#tokens",
                    BASE + "a" * (2000 - len(BASE) - 6) + KEY],
        "citations": [1, 2, {"note": _CUT}], "refused": False}).encode(),
        timing=(f"{KEY};dur=1, retrieve;dur=NaN", "generate;dur=1e308, model;dur=-1, total;dur=12")),
    Canned(401, json.dumps({"detail": f"invalid key {KEY}"}).encode()),
    Canned(200, _CUT.encode(), "text/html"),
    Canned(500, b"[/red] \x1b[2J" + _CUT.encode(), "text/plain"),
    Canned(200, b'{"answer": "\\ud800 [1]", "sources": ["\\udc00", "guide/auth#tokens"], "citations": [], '
                b'"refused": false}'),
    Canned(429, b"{}", timing=("retrieve;dur=5, retrieve;dur=6",)),
]
"""A reply of each kind that has lost a report, leaked the key or reached a terminal raw, asked first."""
_OPENING = _weighted((3, st.tuples(st.just(True), READABLE)), (1, st.tuples(st.just(False), REPLY)))
"""The run's first reply, and whether its mapping reads it: most often one it does."""


# Shrinking is left out: each example is a whole run and a dozen commands, and shrinking one takes minutes.
@settings(max_examples=15, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.large_base_example])
# Regression: a lone surrogate in a reply lost the whole report (exit 3); a section id, a Server-Timing
# name and a fault's excerpt cut across the key carried it into the report; the scorecard's faults,
# `report --markdown -` and `improve --json` printed a reply's control characters raw.
@example(name="cited", opening=(True, _EVERY_HAZARD[0]), rest=_EVERY_HAZARD[1:])
@example(name="marked", opening=(True, _EVERY_HAZARD[0]), rest=_EVERY_HAZARD[1:])
@given(name=st.sampled_from(sorted(TARGETS)), opening=_OPENING,
       rest=st.lists(REPLY, min_size=len(RECORDS) - 1, max_size=len(RECORDS) - 1))
def test_every_report_a_target_run_writes_every_reader_reads(target, project, tmp_path_factory, name, opening, rest):
    _, replies = target
    config, baseline = project
    readable, first = opening
    replies.queue.clear()
    replies.queue.extend([first, *rest])
    folder = tmp_path_factory.mktemp("example")
    outputs = _run_and_read(config, baseline, name, folder)
    ran = outputs["eval"]
    stopped = ran.exit_code == 2 and not readable
    if stopped:  # the first reply stops the run: one clear error, and no report
        event("run stopped at its first reply")
        assert ran.output.count("error: the reply of") + ran.output.count("error: HTTP 40") == 1, ran.output
        assert [p.name for p in (folder / "reports").glob("*.json")] == [baseline.name]
    else:
        assert not replies.queue, "the run asked fewer questions than it has records"
    for command, result in outputs.items():
        assert result.exit_code in EVERY_OUTCOME or stopped and result is ran, (command, result.output)
        assert "Traceback" not in result.output, (command, result.output)
        assert not _obeyed(result.output), f"`{command}` prints what a terminal obeys: {_obeyed(result.output)}"
        if command.endswith("--json"):
            json.loads(result.stdout)
        assert not _leaks(result.output.encode()), f"`{command}` shows the target's key: {result.output}"
    if len(outputs) > 1:
        _check_read_back(outputs, folder / "out")
    leaked = [str(p.relative_to(folder)) for p in sorted(folder.rglob("*")) if p.is_file() and _leaks(p.read_bytes())]
    assert not leaked, f"the target's key is written in {leaked}"
