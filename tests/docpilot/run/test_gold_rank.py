"""Each positive row says where its first gold section sits, past the top 8 the metrics read.

The docs are built so that BM25's ranking is known in advance. Only sections holding a
question's words are ranked at all (a chunk sharing no word scores 0), so:

- ``lantern``: eleven decoy sections hold "quokka lantern" three times; the gold section
  says "lantern" once in a long paragraph. The decoys take ranks 1–11, the gold rank 12.
- ``marmot``: 105 decoy sections hold "marmot burrow" three times; the gold section says
  "marmot" once. The gold sits at rank 106, past the 100 places searched.
- ``tide``: the gold section alone holds "tide", so it is rank 1.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from docpilot.assistant.workspace import open_workspace
from docpilot.cli import main
from docpilot.config.model import Config
from docpilot.golden.loading import load_golden
from docpilot.models.registry import build_model
from docpilot.run.road import (
    GOLD_DEPTH,
    _ranking_key,
    build_rows,
    lookup_rankings,
    start_traces,
)
from docpilot.server.app import create_app, serve_in_thread
from tests.support.model_stage import retrieve_shard

BM25 = {"retrieval": {"retriever": "bm25"}}
"""The retriever whose ranks the docs below are built for."""

FILLER = " ".join(f"word{i}" for i in range(120))
RECORDS = [
    {"id": "lantern", "question": "quokka lantern", "gold": ["guide/lamps#trimming"]},
    {"id": "marmot", "question": "marmot burrow", "gold": ["guide/burrows#digging"]},
    {"id": "tide", "question": "when is the tide", "gold": ["guide/sea#tides"]},
    {"id": "nothing", "question": "unrelated xylophone", "gold": [], "expected_cause": "not-answerable"},
]


def _build_docs(root: Path) -> Path:
    docs = root / "docs"
    (docs / "guide").mkdir(parents=True)
    decoys = "\n\n".join(f"## Decoy {i}\n\nquokka lantern quokka lantern quokka lantern." for i in range(11))
    (docs / "guide" / "decoys.md").write_text(f"# Decoys\n\n{decoys}\n")
    many = "\n\n".join(f"## Hole {i}\n\nmarmot burrow marmot burrow marmot burrow." for i in range(105))
    (docs / "guide" / "holes.md").write_text(f"# Holes\n\n{many}\n")
    (docs / "guide" / "lamps.md").write_text(f"# Lamps\n\n## Trimming\n\n{FILLER} lantern {FILLER}\n")
    (docs / "guide" / "burrows.md").write_text(f"# Burrows\n\n## Digging\n\n{FILLER} marmot {FILLER}\n")
    (docs / "guide" / "sea.md").write_text("# Sea\n\n## Tides\n\nThe tide turns twice a day.\n")
    (docs / "index.md").write_text("# Home\n\nA harbour of small pages.\n")
    golden = root / "golden.yaml"
    golden.write_text(yaml.safe_dump(RECORDS, sort_keys=False))
    (root / "bm25.yaml").write_text("retrieval:\n  retriever: bm25\n")  # the ranks above are BM25's
    return docs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("gold-rank")
    return _build_docs(root), root / "golden.yaml"


def _eval(docs: Path, golden: Path, out: Path, *extra: str) -> dict:
    result = CliRunner().invoke(main, [
        "eval", "--gate-only", "--docs", str(docs), "--golden", str(golden), "--orchestrator", "inline",
        "--config", str(golden.parent / "bm25.yaml"),
        "--out", str(out), *extra,
    ])
    assert result.exit_code in (0, 1), result.output  # 1: a gate failed; the rows are what is looked at
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def gate_only(corpus, tmp_path_factory) -> tuple[Path, dict]:
    docs, golden = corpus
    folder = tmp_path_factory.mktemp("gate-only")
    out = folder / "report.json"
    report = _eval(docs, golden, out, "--html", str(folder / "report.html"), "--markdown", str(folder / "summary.md"))
    return out, report


def _rows(report: dict) -> dict[str, dict]:
    return {row["id"]: row for row in report["rows"]}


# Regression: a report row listed the top 8 only, so a missed gold section at rank 12 (an edit away)
# looked the same as one nowhere in the ranking (a page to write).
def test_a_gate_only_eval_records_the_rank_of_a_gold_section_past_the_top_8(gate_only):
    _, report = gate_only
    row = _rows(report)["lantern"]
    assert len(row["retrieved"]) == 8
    assert not any(section.startswith("guide/lamps") for section in row["retrieved"])
    assert (row["gold_rank"], row["gold_depth"]) == (12, GOLD_DEPTH)


def test_a_gold_section_past_the_depth_searched_has_no_rank(gate_only):
    _, report = gate_only
    rows = _rows(report)
    assert (rows["marmot"]["gold_rank"], rows["marmot"]["gold_depth"]) == (None, GOLD_DEPTH)
    assert (rows["tide"]["gold_rank"], rows["tide"]["gold_depth"]) == (1, GOLD_DEPTH)
    assert (rows["nothing"]["gold_rank"], rows["nothing"]["gold_depth"]) == (None, None)  # a negative has none


def test_the_metrics_still_read_the_top_8_only(gate_only, corpus, tmp_path):
    path, report = gate_only
    docs, _ = corpus
    config = Config.model_validate({"corpus": {"docs": str(docs)}, "cache_dir": str(tmp_path / "cache"), **BM25})
    workspace = open_workspace(config, use_cache=False)  # its index is saved under cache_dir all the same
    for row in report["rows"]:
        expected = workspace.retriever.search(row["question"], scope=row["scope"], k=8)
        assert row["retrieved"] == [hit.section_id for hit in expected], row["id"]
    # One positive of three is found in the top 8: the rank at 12 earns nothing.
    assert report["summary"]["recall@8"] == pytest.approx(1 / 3)
    assert report["summary"]["mrr"] == pytest.approx(1 / 3)
    scored = CliRunner().invoke(main, ["score", str(path), "--json"])
    assert json.loads(scored.stdout)["summary"] == report["summary"]


def test_a_cached_rerun_gives_the_same_ranks(gate_only, corpus, tmp_path):
    first_path, first = gate_only
    docs, golden = corpus
    # The module's first run cached into another test's folder; rank once here, then again from the cache.
    ranked = _eval(docs, golden, tmp_path / "ranked.json")
    cached = _eval(docs, golden, tmp_path / "cached.json")
    assert all("retrieve" not in row["cached"] for row in ranked["rows"])
    assert all("retrieve" in row["cached"] for row in cached["rows"])
    for rows in (ranked["rows"], cached["rows"]):
        assert [(r["id"], r["gold_rank"], r["gold_depth"]) for r in rows] == \
               [(r["id"], r["gold_rank"], r["gold_depth"]) for r in first["rows"]]


@pytest.mark.slow
def test_improve_tells_a_near_miss_from_a_page_to_write(gate_only):
    path, _ = gate_only
    result = CliRunner().invoke(main, ["improve", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    lantern = lines.index("  lantern  [positive, dev]")
    marmot = lines.index("  marmot  [positive, dev]")
    # Each record's block: its question, its languages, then the facts behind its cause.
    assert "    first gold section at rank 12 (past the top 8); rank 1 is guide/decoys#decoy-0" \
        in lines[lantern + 1:lantern + 4]
    assert "    no gold entry (guide/burrows#digging) in the first 100; rank 1 is guide/holes#hole-0" \
        in lines[marmot + 1:marmot + 4]
    as_json = json.loads(CliRunner().invoke(main, ["improve", str(path), "--json"]).stdout)  # progress goes to stderr
    details = {f["id"]: f["detail"] for f in as_json["failures"]}
    assert details["lantern"].startswith("first gold section at rank 12 (past the top 8)")


class _Page(HTMLParser):
    """The records table's cells by row, and each failing record's `dt` → `dd` text."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[list[str]] = []
        self.details: dict[str, dict[str, str]] = {}
        self._table = False
        self._record: str | None = None
        self._tag: str | None = None
        self._term = ""
        self._text = ""

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == "records":
            self._table = True
        elif tag == "tr" and self._table:
            self.cells.append([])
        elif tag == "details" and "record" in (attrs.get("class") or ""):
            self._record = attrs["id"]
            self.details[self._record] = {}
        if tag in ("td", "dt", "dd"):
            self._tag, self._text = tag, ""

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = False
        elif tag == "td" and self._table and self.cells:
            self.cells[-1].append(self._text)
        elif tag == "dt":
            self._term = self._text
        elif tag == "dd" and self._record is not None:
            self.details[self._record][self._term] = self._text
        elif tag == "details":
            self._record = None

    def handle_data(self, data):
        if self._tag is not None:
            self._text += data


def test_the_html_report_shows_the_rank_beside_each_miss(gate_only):
    path, _ = gate_only
    page = _Page()
    page.feed((path.parent / "report.html").read_text())
    hit_column = {cells[0]: cells[4] for cells in page.cells if cells}
    assert hit_column["lantern"] == "miss (rank 12)"
    assert hit_column["marmot"] == "miss (not in 100)"
    assert hit_column["tide"] == "hit (1)"
    assert page.details["rec-lantern"]["first gold"] == "rank 12 of the first 100 ranked"
    assert page.details["rec-marmot"]["first gold"] == "not in the first 100 ranked"
    assert "first gold section at rank 12 (past the top 8)" in page.details["rec-lantern"]["why"]


def test_the_markdown_summary_shows_the_rank(gate_only):
    path, _ = gate_only
    lines = (path.parent / "summary.md").read_text().splitlines()
    (lantern,) = [line for line in lines if line.startswith("| `lantern` |")]
    (marmot,) = [line for line in lines if line.startswith("| `marmot` |")]
    assert "not-retrieved — first gold section at rank 12 (past the top 8)" in lantern
    assert "no gold entry (guide/burrows#digging) in the first 100" in marmot


def test_the_report_schema_describes_the_new_fields():
    result = CliRunner().invoke(main, ["schema", "report"])
    row = json.loads(result.output)["$defs"]["Row"]["properties"]
    assert "past the top 8" in row["gold_rank"]["description"]
    assert "how many places deep" in row["gold_depth"]["description"]


@pytest.mark.slow
def test_a_server_eval_ranks_only_as_deep_as_the_servers_hits(corpus, tmp_path):
    docs, golden = corpus
    config = Config.model_validate({"corpus": {"docs": str(docs)}, **BM25, "cache_dir": str(tmp_path / "server-cache")})
    workspace = open_workspace(config, use_cache=False)
    app = create_app(workspace, build_model(workspace.config.model, corpus=workspace.corpus), token=None)
    out = tmp_path / "server.json"
    with serve_in_thread(app) as url:
        result = CliRunner().invoke(main, [
            "eval", "--docs", str(docs), "--golden", str(golden), "--orchestrator", "inline",
            "--runtime", "server", "--url", url, "--out", str(out),
        ])
    assert result.exit_code in (0, 1), result.output
    rows = _rows(json.loads(out.read_text()))
    # The server sends its top 8 and no more: a gold section at rank 12 is past what the eval can see.
    assert (rows["lantern"]["gold_rank"], rows["lantern"]["gold_depth"]) == (None, 8)
    assert (rows["tide"]["gold_rank"], rows["tide"]["gold_depth"]) == (1, 1)
    improved = CliRunner().invoke(main, ["improve", str(out)])
    assert "no gold entry (guide/lamps#trimming) in the top 8 (the server returns no deeper ranking)" \
        in improved.output


def test_a_cached_ranking_without_its_depth_is_ranked_again(corpus, tmp_path):
    docs, golden = corpus
    config = Config.model_validate({"corpus": {"docs": str(docs)}, **BM25, "cache_dir": str(tmp_path / "cache")})
    workspace = open_workspace(config)
    records = [r for r in load_golden(golden) if r.id == "lantern"]
    retrieve_shard(workspace, start_traces(records))
    key = _ranking_key(workspace, records[0])
    stored = workspace.cache.get(key)
    assert stored["depth"] == GOLD_DEPTH and stored["deeper"][-1] == "guide/lamps#trimming"  # ranks 9–12
    # An entry as rankings were stored before they kept the sections past the top ones.
    workspace.cache.set(key, {"hits": stored["hits"], "ms": stored["ms"]})
    traces = start_traces(records)
    assert lookup_rankings(workspace, traces) == [0]  # not read as a ranking with nothing past the top 8
    retrieve_shard(workspace, traces)
    assert build_rows(traces, gate_only=True)[0].gold_rank == 12
    assert workspace.cache.get(key)["depth"] == GOLD_DEPTH  # stored again, whole
