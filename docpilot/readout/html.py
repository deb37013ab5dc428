"""The HTML report: one self-contained page a person reads to see how a run went and why records failed.

The page needs no network and no script to show everything: styles and plots are
inline, and a small script only adds filters to the records table. Every string
that came from a model or a golden set is escaped, and a Content-Security-Policy
allows no script but the page's own (by its hash), so an answer that carries
``<script>`` or an ``onerror=`` attribute shows as text and runs nothing.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from pathlib import Path

from docpilot.assistant.render import render_panel
from docpilot.corpus.pages import section_url
from docpilot.models.base import Source
from docpilot.readout.outcomes import (
    Readout,
    RecordOutcome,
    write_atomically,
)
from docpilot.readout.svg import histogram, recall_curve
from docpilot.reports.scorecard import format_value
from docpilot.schema import Report, Row
from metrics import registry
from metrics.gold import is_relevant

MAX_DETAILS = 300
"""Failing records shown in full; beyond this the table still lists every record."""

_BOUNDS = {"over_refusal_gate": "over_refusal_gate_upper95", "over_refusal_answer": "over_refusal_answer_upper95"}
_ARROWS = {"better": "↑ better", "worse": "↓ worse", "same": "= same"}
_DEFAULT_BASE_URL = "https://docpilot.dev/docs/"
_NUM = ' class="num"'
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # shown as U+FFFD, not as invisible bytes

_STYLE = """
:root{--fg:#1d2330;--muted:#5f6b7a;--line:#d9dee5;--bg:#fff;--soft:#f5f7fa;--ok:#1a7f37;--bad:#c62828;--gold:#fff4c2;--accent:#3460c4}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1180px;margin:0 auto;padding:20px 24px 60px}
h1{font-size:22px;margin:0 0 6px}h2{font-size:17px;margin:28px 0 10px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:0 0 8px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{white-space:pre-wrap;background:var(--soft);padding:8px;border-radius:4px}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:600;color:#fff;font-size:13px;vertical-align:middle}
.pass{background:var(--ok)}.fail{background:var(--bad)}
.meta{display:flex;flex-wrap:wrap;gap:4px 18px;color:var(--muted);margin:6px 0 0;padding:0;list-style:none}
.meta b{color:var(--fg);font-weight:600}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:var(--soft);font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.family th{background:#e9edf3;text-transform:uppercase;font-size:11px;letter-spacing:.05em}
.null{color:var(--muted)}.better{color:var(--ok)}.worse{color:var(--bad)}
.ok{color:var(--ok);font-weight:600}.bad{color:var(--bad);font-weight:600}
tr.failing td:first-child{border-left:3px solid var(--bad)}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:16px}
figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:8px}
figcaption{font-weight:600;margin-bottom:4px}
svg.plot{width:100%;height:auto;display:block}
svg .grid{stroke:var(--line);stroke-width:1}svg .tick,svg .axis{fill:var(--muted);font-size:11px}
svg .line{fill:none;stroke:var(--accent);stroke-width:2}svg .dot{fill:var(--accent)}
svg .label{fill:var(--fg);font-size:11px}svg .bar{fill:var(--accent);opacity:.8}
svg .marker{stroke:var(--bad);stroke-dasharray:4 3}svg .nodata{fill:var(--muted);font-size:15px}
#filters{display:flex;gap:16px;align-items:center;margin:0 0 8px;flex-wrap:wrap}
details.record{border:1px solid var(--line);border-radius:6px;margin:10px 0;padding:8px 12px}
details.record>summary{cursor:pointer;font-weight:600}
details.record dl{display:grid;grid-template-columns:130px 1fr;gap:4px 12px;margin:8px 0}
details.record dt{color:var(--muted)}details.record dd{margin:0}
ol.retrieved li.gold{background:var(--gold)}
.tag{font-size:11px;border:1px solid var(--line);border-radius:8px;padding:0 6px;margin-left:6px;color:var(--muted)}
.tag.goldtag{border-color:#c9a400;color:#7a6200}
.panel{border-left:3px solid var(--accent);padding:4px 12px;background:var(--soft)}
.panel.refused{border-left-color:var(--muted);color:var(--muted)}
.panel ol.sources{list-style:none;padding-left:0}
.note{color:var(--muted)}
""".strip()

# Shows the filter controls (hidden without a script, where they could do nothing)
# and hides table rows that do not match them.
_SCRIPT = """
(function () {
  var form = document.getElementById('filters');
  if (!form) { return; }
  form.hidden = false;
  var kind = document.getElementById('f-kind');
  var split = document.getElementById('f-split');
  var failing = document.getElementById('f-failing');
  var count = document.getElementById('f-count');
  var rows = document.querySelectorAll('#records tbody tr');
  function apply() {
    var shown = 0;
    rows.forEach(function (row) {
      var keep = (!kind.value || row.dataset.kind === kind.value) &&
        (!split.value || row.dataset.split === split.value) &&
        (!failing.checked || row.dataset.failing === '1');
      row.hidden = !keep;
      if (keep) { shown += 1; }
    });
    count.textContent = shown + ' of ' + rows.length + ' records shown';
  }
  [kind, split, failing].forEach(function (el) { el.addEventListener('change', apply); });
  apply();
})();
""".strip()


def script_hash() -> str:
    """The CSP source (``'sha256-…'``) that allows the page's own script and nothing else."""
    digest = hashlib.sha256(_SCRIPT.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def content_security_policy() -> str:
    """The page's policy: no network at all, inline styles, data: images, and only its own script."""
    return (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_hash()}; "
            "base-uri 'none'; form-action 'none'")


def render_html(readout: Readout) -> str:
    """The whole page for a readout, as one string."""
    report = readout.report
    title = f"DocPilot report {report.run_id} — {report.verdict}"
    body = "".join((
        _header(readout), _gates(readout), _plots(readout), _scorecard(readout),
        _records(readout), _failures(readout),
    ))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(content_security_policy())}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>"
        f"<body><main>{body}</main><script>{_SCRIPT}</script></body></html>\n"
    )


def write_html(readout: Readout, path: str | Path) -> Path:
    """Write the page atomically to ``path`` and return the path."""
    return write_atomically(path, render_html(readout))


def _e(value: object) -> str:
    return html.escape(_CONTROL.sub("\ufffd", str(value)), quote=True)


def _duration(ms: float | None) -> str:
    return format_value("latency_ms", ms)  # the scorecard's rule for times: ms, thousands separated


def _header(readout: Readout) -> str:
    report = readout.report
    model = (report.config or {}).get("model") or {}
    model_name = "none (gate-only)" if report.gate_only else f"{model.get('provider', '?')} / {model.get('name', '?')}"
    facts = [
        ("run", report.run_id), ("created", report.created_at), ("set", report.set), ("split", report.split),
        ("records", len(report.rows)), ("gate-only", "yes" if report.gate_only else "no"),
        ("runtime", report.runtime), ("orchestrator", report.orchestrator),
        ("wall time", _duration(report.wall_ms)), ("model", model_name),
    ]
    items = "".join(f"<li>{_e(k)} <b>{_e(v)}</b></li>" for k, v in facts)
    failing = len(readout.failing)
    return (f'<header><h1>DocPilot report <span class="badge {_e(report.verdict)}">{_e(report.verdict.upper())}'
            f"</span></h1><ul class=\"meta\">{items}</ul>"
            f'<p class="note">{failing} of {len(report.rows)} records failing.'
            f"{' ' + _e(readout.comparison_note) if readout.comparison_note else ''}</p></header>")


def _scorecard(readout: Readout) -> str:
    report = readout.report
    with_moves = bool(readout.moves)
    head = "<tr><th>metric</th><th class=\"num\">value</th><th class=\"num\">n</th><th>95 % upper bound</th>"
    head += "<th class=\"num\">previous</th><th>move</th>" if with_moves else ""
    head += "<th>what it says</th></tr>"
    rows, family = [], None
    for metric, value in report.summary.items():
        if metric in _BOUNDS.values():
            continue
        known = registry.is_metric_id(metric)
        this_family = registry.get(metric).family if known else "other"
        if this_family != family:
            family = this_family
            rows.append(f'<tr class="family"><th colspan="{7 if with_moves else 5}">{_e(family)}</th></tr>')
        n = report.counts.get(metric)
        bound = report.summary.get(_BOUNDS[metric]) if metric in _BOUNDS else None
        cells = [
            f"<td class=\"mono\">{_e(metric)}</td>",
            f"<td class=\"num{' null' if value is None else ''}\">{_e(format_value(metric, value))}</td>",
            f"<td class=\"num\">{'' if n is None else n}</td>",
            f"<td>{'' if bound is None else '≤ ' + _e(format_value(metric, bound))}</td>",
        ]
        if with_moves:
            cells.extend(_move_cells(metric, readout))
        cells.append(f"<td class=\"note\">{_e(registry.get(metric).description) if known else ''}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return (f'<section><h2>Scorecard</h2><table id="scorecard"><thead>{head}</thead>'
            f'<tbody>{"".join(rows)}</tbody></table></section>')


def _move_cells(metric: str, readout: Readout) -> list[str]:
    move = readout.moves.get(metric)
    if move is None:
        return ["<td class=\"num null\"></td>", "<td></td>"]
    previous = format_value(metric, move.previous)
    delta = ""
    if move.delta is not None and abs(move.delta) > 1e-12:
        delta = ("+" if move.delta > 0 else "−") + format_value(metric, abs(move.delta))
    arrow = _ARROWS.get(move.change or "", "")
    return [f"<td class=\"num\">{_e(previous)}</td>",
            f"<td class=\"{_e(move.change or '')}\">{_e(f'{delta} {arrow}'.strip())}</td>"]


def _gates(readout: Readout) -> str:
    report = readout.report
    if not report.gates:
        return "<section><h2>Gates</h2><p class=\"note\">No gate was checked in this run.</p></section>"
    anchors = {r.row.id: r.anchor for r in readout.records}
    rows = []
    for gate in report.gates:
        status = '<span class="ok">pass</span>' if gate.passed else '<span class="bad">FAIL</span>'
        links = ", ".join(
            f'<a href="#{_e(anchors[rid])}">{_e(rid)}</a>' if rid in anchors else _e(rid) for rid in gate.records
        )
        rows.append(f"<tr><td>{status}</td><td class=\"mono\">{_e(gate.metric)} {_e(gate.op)} {gate.threshold:g}</td>"
                    f"<td class=\"num\">{_e(format_value(gate.metric, gate.value))}</td><td>{links}</td></tr>")
    return ("<section><h2>Gates</h2><table id=\"gates\"><thead><tr><th>result</th><th>condition</th>"
            "<th class=\"num\">value</th><th>records</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def _plots(readout: Readout) -> str:
    report = readout.report
    points = [(k, report.summary.get(f"recall@{k}")) for k in (1, 3, 5, 8)]
    latencies = [r.latency_ms for r in report.rows if r.latency_ms is not None]
    first = [r.first_token_ms for r in report.rows if r.first_token_ms is not None]
    figures = (
        ("Recall at k", recall_curve(points)),
        ("Turn latency", histogram(latencies, title="turn latency")),
        ("Time to first token", histogram(first, title="time to first token")),
    )
    inner = "".join(f"<figure><figcaption>{_e(name)}</figcaption>{svg}</figure>" for name, svg in figures)
    return f'<section><h2>Plots</h2><div class="plots">{inner}</div></section>'


def _records(readout: Readout) -> str:
    report = readout.report
    kinds = sorted({r.kind for r in report.rows})
    splits = sorted({r.split for r in report.rows})

    def options(values: list[str]) -> str:
        return '<option value="">all</option>' + "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)

    filters = (
        '<form id="filters" hidden>'
        f'<label>kind <select id="f-kind">{options(kinds)}</select></label>'
        f'<label>split <select id="f-split">{options(splits)}</select></label>'
        '<label><input type="checkbox" id="f-failing"> failing only</label>'
        '<span id="f-count" class="note"></span></form>'
    )
    head = ["id", "kind", "split", "hit@8 (rank)", "answer F1", "refused", "citations", "latency"]
    if readout.causes_known:
        head.append("cause")
    numeric = {"answer F1", "citations", "latency"}
    thead = "".join(f"<th{_NUM if h in numeric else ''}>{_e(h)}</th>" for h in head)
    detailed = {r.anchor for r in readout.failing[:MAX_DETAILS]}
    body = "".join(_record_row(r, readout.causes_known, detailed) for r in readout.records)
    return (f"<section><h2>Records</h2>{filters}<table id=\"records\"><thead><tr>{thead}</tr></thead>"
            f"<tbody>{body}</tbody></table></section>")


def _record_row(record: RecordOutcome, causes_known: bool, detailed: set[str]) -> str:
    row = record.row
    name = _e(row.id)
    if record.anchor in detailed:
        name = f'<a href="#{_e(record.anchor)}">{name}</a>'
    if record.hit is None:
        hit = '<span class="null">—</span>'
    elif record.hit:
        hit = f'<span class="ok">hit</span> ({record.first_gold_rank})'
    else:
        hit = '<span class="bad">miss</span>'
    f1 = '<span class="null">—</span>' if record.f1 is None else f"{record.f1:.2f}"
    if row.error is not None:
        refused = '<span class="bad">error</span>'
    else:
        refused = _e(row.refused_by or "yes") if row.refused else ""
    citations = str(len(row.citations)) if row.answer is not None else '<span class="null">—</span>'
    if row.hallucinated:
        citations += f' <span class="bad">+{len(row.hallucinated)} invented</span>'
    latency = "" if row.latency_ms is None else _e(_duration(row.latency_ms))
    cells = [name, _e(row.kind), _e(row.split), hit, f1, refused, citations, latency]
    if causes_known:
        reasons = ([record.cause] if record.cause else []) + [f"gate {g}" for g in record.gates]
        cells.append(_e(", ".join(reasons)))
    tds = "".join(f"<td{_NUM if i in (4, 6, 7) else ''}>{c}</td>" for i, c in enumerate(cells))
    failing = "1" if record.failing else "0"
    css = ' class="failing"' if record.failing else ""
    return (f'<tr{css} data-kind="{_e(row.kind)}" data-split="{_e(row.split)}" data-failing="{failing}">'
            f"{tds}</tr>")


def _failures(readout: Readout) -> str:
    failing = readout.failing
    if not failing:
        return "<section><h2>Failing records</h2><p class=\"note\">No record failed.</p></section>"
    shown = failing[:MAX_DETAILS]
    more = len(failing) - len(shown)
    tail = f'<p class="note">{more} more failing records are listed in the table above only.</p>' if more else ""
    blocks = "".join(_failure(record, readout) for record in shown)
    return f"<section><h2>Failing records ({len(failing)})</h2>{blocks}{tail}</section>"


def _failure(record: RecordOutcome, readout: Readout) -> str:
    row = record.row
    report = readout.report
    reasons = []
    if record.cause:
        reasons.append(f"<b>{_e(record.cause)}</b>" + (f" — {_e(record.detail)}" if record.detail else ""))
    if record.also:
        reasons.append("also: " + _e(", ".join(record.also)))
    for metric in record.gates:
        reasons.append(f"breaks the gate on <code>{_e(metric)}</code>")
    facts = [("why", "<br>".join(reasons)), ("question", _e(row.question))]
    if row.gold:
        facts.append(("gold", ", ".join(f"<code>{_e(g)}</code>" for g in row.gold)))
    if row.gold_answer:
        facts.append(("gold answer", _e(row.gold_answer)))
    if row.identifiers:
        facts.append(("identifiers", ", ".join(f"<code>{_e(i)}</code>" for i in row.identifiers)))
    if row.expected_cause:
        facts.append(("expected cause", _e(row.expected_cause)))
    if row.forbidden:
        expect = f" (expected: {row.expect})" if row.expect else ""
        facts.append(("forbidden", ", ".join(f"<code>{_e(f)}</code>" for f in row.forbidden) + _e(expect)))
    facts.append(("retrieved", _retrieved(row)))
    facts.append(("answer", _answer_panel(row, report)))
    if row.reasoning:
        facts.append(("reasoning", f"<pre>{_e(row.reasoning)}</pre>"))
    if row.error:
        facts.append(("error", f"<pre>{_e(row.error)}</pre>"))
    items = "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in facts)
    label = record.cause or ", ".join(f"gate {g}" for g in record.gates)
    return (f'<details class="record" id="{_e(record.anchor)}" open><summary>{_e(row.id)} '
            f'<span class="tag">{_e(row.kind)}</span><span class="tag">{_e(row.split)}</span> — {_e(label)}'
            f"</summary><dl>{items}</dl></details>")


def _retrieved(row: Row) -> str:
    if not row.retrieved:
        return '<span class="note">nothing retrieved</span>'
    primed = {section: n for n, section in enumerate(row.primed, start=1)}
    items = []
    for i, section in enumerate(row.retrieved):
        gold = bool(row.gold) and is_relevant(section, row.gold)
        tags = ""
        if section in primed:
            tags += f'<span class="tag">primed [{primed[section]}]</span>'
        if gold:
            tags += '<span class="tag goldtag">gold</span>'
        score = f' <span class="note">{row.scores[i]:.3g}</span>' if i < len(row.scores) else ""
        css = ' class="gold"' if gold else ""
        items.append(f"<li{css}><code>{_e(section)}</code>{score}{tags}</li>")
    return f'<ol class="retrieved">{"".join(items)}</ol>'


def _answer_panel(row: Row, report: Report) -> str:
    """The answer as the reader saw it, re-rendered from the row with the panel's own renderer."""
    if row.answer is None and not row.refused:
        why = "no model ran (retrieval only)" if report.gate_only else "no answer"
        return f'<span class="note">{_e(why)}</span>'
    base_url = str(((report.config or {}).get("corpus") or {}).get("base_url") or _DEFAULT_BASE_URL)
    sources = [Source(n=n, section_id=s, title=s, text="") for n, s in enumerate(row.primed, start=1)]
    panel = render_panel(row.answer or "", sources, lambda s: section_url(s, base_url), refused=row.refused)
    return panel.html
