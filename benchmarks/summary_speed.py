"""How long re-scoring a large report takes, against pytrec_eval on the same queries.

Generates a report's rows (default 10,000: about three in four positives whose gold
entries pin sections exactly, the rest negatives and attack probes), then times, as
the median of ``--repeat`` runs in this one process (1 and 2 alternated):

1. ``summarize(rows, gate_only=True)``: recall@1/3/5/8, MRR, nDCG@8 and context
   precision@5 over the positives, from the rows (what `docpilot score` does for the
   retrieval numbers);
2. pytrec_eval computing recall@1/3/5/8, MRR and nDCG@8 for the same positives, from
   qrels and a run built beforehand (its evaluator built beforehand too);
3. the full ``summarize(rows)`` of every metric, for scale.

The figure is (1) ÷ (2). It also checks that the two agree: every pytrec_eval
measure, averaged with ``math.fsum``, equals the summary's value exactly.

    python -m benchmarks.summary_speed [--rows 10000] [--repeat 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docpilot.metrics.summary import summarize  # noqa: E402

from docpilot.schema import Row  # noqa: E402

PYTREC_MEASURES = {"recall.1,3,5,8", "recip_rank", "ndcg_cut.8"}
SAME = {"recall@1": "recall_1", "recall@3": "recall_3", "recall@5": "recall_5", "recall@8": "recall_8",
        "mrr": "recip_rank", "ndcg@8": "ndcg_cut_8"}


def make_rows(n: int, seed: int = 17) -> list[Row]:
    """``n`` report rows of ranked lists of eight distinct sections, a realistic mix of kinds."""
    rng = random.Random(seed)
    pool = [f"guide/page{p}#s{s}" for p in range(400) for s in range(6)]
    rows = []
    for i in range(n):
        kind = rng.choices(["positive", "negative", "attack"], weights=[76, 16, 8])[0]
        gold = rng.sample(pool, rng.randint(1, 3)) if kind == "positive" else []
        candidates = list(dict.fromkeys(rng.sample(gold, rng.randint(0, len(gold))) + rng.sample(pool, 10)))
        rng.shuffle(candidates)
        rows.append(Row(id=f"r{i}", kind=kind, split="test", question=f"question {i}?", gold=gold,
                        retrieved=candidates[:8], scores=[1.0 - r / 10 for r in range(len(candidates[:8]))]))
    return rows


def pytrec_inputs(rows: list[Row]) -> tuple[dict, dict]:
    """qrels and run of the positives, scores descending in rank order."""
    positives = [r for r in rows if r.kind == "positive" and r.gold]
    qrels = {r.id: {g: 1 for g in r.gold} for r in positives}
    run = {r.id: {s: float(len(r.retrieved) - k) for k, s in enumerate(r.retrieved)} for r in positives}
    return qrels, run


def _median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(n_rows: int, repeat: int) -> dict:
    import pytrec_eval

    rows = make_rows(n_rows)
    qrels, run = pytrec_inputs(rows)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES)
    summary, counts = summarize(rows, gate_only=True)
    reference = evaluator.evaluate(run)
    mismatched = [
        metric for metric, measure in SAME.items()
        if summary[metric] != math.fsum(v[measure] for v in reference.values()) / len(reference)
    ]
    # Alternated, so that a busy spell of the machine falls on both sides alike.
    ours, theirs = [], []
    for _ in range(repeat):
        ours.append(_median_seconds(lambda: summarize(rows, gate_only=True), 1))
        theirs.append(_median_seconds(lambda: evaluator.evaluate(run), 1))
    ours, theirs = statistics.median(ours), statistics.median(theirs)
    full = _median_seconds(lambda: summarize(rows), repeat)
    return {
        "rows": n_rows,
        "queries": counts["recall@8"],
        "summary_retrieval_s": round(ours, 4),
        "pytrec_eval_s": round(theirs, 4),
        "ratio": round(ours / theirs, 2),
        "summary_all_metrics_s": round(full, 4),
        "values_identical": not mismatched,
        "mismatched": mismatched,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.rows, args.repeat)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['rows']} rows, {result['queries']} positives")
        print(f"  summary (retrieval)  {result['summary_retrieval_s'] * 1000:8.1f} ms")
        print(f"  pytrec_eval          {result['pytrec_eval_s'] * 1000:8.1f} ms")
        print(f"  ratio                {result['ratio']:8.2f}   (target ≤ 2)")
        print(f"  summary (all)        {result['summary_all_metrics_s'] * 1000:8.1f} ms")
        print(f"  same values          {result['values_identical']} {result['mismatched'] or ''}")
    return 0 if result["values_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
