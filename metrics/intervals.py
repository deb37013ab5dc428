"""Intervals that respect pages: a page-clustered bootstrap of a headline metric's mean.

Questions about one page are not independent: a page the retriever handles badly fails
all of its questions together, so a set of 60 questions over 20 pages holds less
evidence than 60 independent ones, and an interval that resamples questions one by one
is too narrow. The cluster bootstrap resamples whole pages instead.

A record's value v_r is the metric's per-record value (the mean over its samples in a
run with ``--repeat``); its cluster is the page of its first gold entry (a record
without gold, a negative or a probe, is a cluster of its own). With clusters g = 1..G,
each holding the sum S_g and the count N_g of its records' values, one bootstrap draw
takes G clusters with replacement, g*_1..g*_G, and computes

    θ* = Σ_j S_{g*_j} / Σ_j N_{g*_j}

(the mean over every record of the drawn pages). The 95 % interval is the 2.5th and
97.5th percentiles of θ* over ``REPLICATES`` draws (the percentile method), drawn from
NumPy's PCG64 generator seeded with ``SEED``, so the same rows give the same interval.
With one record per cluster this is the ordinary bootstrap of the mean.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from docpilot.metrics.aggregate import mean
from docpilot.metrics.registry import METRICS
from docpilot.metrics.stability import per_record
from docpilot.metrics.summary import Ahead, member_values

from docpilot.schema import Row

REPLICATES = 2_000
"""Bootstrap draws per interval."""

SEED = 0
"""The generator's seed: an interval is a function of the rows."""

LEVEL = 0.95
"""Two-sided coverage."""

INTERVAL_METRICS: tuple[str, ...] = (
    "recall@8", "ndcg@8", "mrr", "answer_f1", "citation_precision", "negatives_caught", "over_refusal_answer",
    "attack_success_rate", "refusal_accuracy", "safe_answer_rate",
)
"""The headline metrics that get an interval: means over records (a percentile or a count gets none)."""


def page_of(row: Row) -> str:
    """A record's cluster: the page of its first gold entry, or the record itself when it has no gold."""
    if row.gold:
        return "page:" + row.gold[0].split("#", 1)[0]
    return "record:" + row.id


def cluster_interval(values: Sequence[float], clusters: Sequence[str], *, replicates: int = REPLICATES,
                     seed: int = SEED, level: float = LEVEL) -> tuple[float, float] | None:
    """The percentile interval of the mean of ``values`` by a bootstrap over ``clusters`` (the module's formula).

    ``clusters[i]`` names the cluster of ``values[i]``. None for no values.
    """
    if not values:
        return None
    return _bootstrap(values, _Clusters(clusters), replicates=replicates, seed=seed, level=level)


class _Clusters:
    """Which cluster each value falls in, as indices 0..G-1 in the order the clusters first appear."""

    def __init__(self, clusters: Sequence[str]) -> None:
        keys = {key: i for i, key in enumerate(dict.fromkeys(clusters))}
        self.size = len(keys)
        self.index = np.fromiter((keys[c] for c in clusters), dtype=np.intp, count=len(clusters))
        self._counts = np.bincount(self.index, minlength=self.size).astype(float)
        self._drawn: dict[tuple[int, int], np.ndarray] = {}

    def drawn_counts(self, replicates: int, seed: int) -> np.ndarray:
        """Σ_j N_{g*_j} of each draw: the same for every metric over these clusters, so summed once."""
        if (replicates, seed) not in self._drawn:
            self._drawn[replicates, seed] = self._counts[_draws(self.size, replicates, seed)].sum(axis=1)
        return self._drawn[replicates, seed]


def _bootstrap(values: Sequence[float], clusters: _Clusters, *, replicates: int = REPLICATES, seed: int = SEED,
               level: float = LEVEL) -> tuple[float, float]:
    sums = np.bincount(clusters.index, weights=np.asarray(values, dtype=float), minlength=clusters.size)
    means = sums[_draws(clusters.size, replicates, seed)].sum(axis=1) / clusters.drawn_counts(replicates, seed)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


@functools.lru_cache(maxsize=16)
def _draws(clusters: int, replicates: int, seed: int) -> np.ndarray:
    """The clusters each draw takes: the same for every metric over as many clusters (read-only)."""
    draws = np.random.default_rng(seed).integers(0, clusters, size=(replicates, clusters))
    draws.setflags(write=False)
    return draws


def headline_intervals(rows: Sequence[Row], *, gate_only: bool = False,
                       ahead: Ahead | None = None) -> dict[str, tuple[float, float]]:
    """Metric id → the page-clustered 95 % interval of each headline metric the rows have a value for.

    A record's samples are read as their mean (``metrics.stability``), and a record counts
    once. ``ahead`` holds the rows' metric values the run worked out already (``metrics.summary.Ahead``).
    """
    metrics = [METRICS[name] for name in INTERVAL_METRICS
               if METRICS[name].aggregate is mean and not (gate_only and METRICS[name].family != "retrieval")]
    found: dict[str, tuple[float, float]] = {}
    clustered: dict[int, tuple[bool, _Clusters]] = {}  # each population's records clustered once, by its list
    for name, (members, values) in member_values(metrics, rows, ahead=ahead).items():
        if not members:
            continue
        if id(members) not in clustered:
            firsts: dict[str, Row] = {}  # each record's first row, in the order records first appear
            for row in members:
                firsts.setdefault(row.id, row)
            sampled = len(firsts) < len(members)  # samples of a record: read as their mean
            clustered[id(members)] = sampled, _Clusters([page_of(row) for row in firsts.values()])
        sampled, clusters = clustered[id(members)]
        found[name] = _bootstrap(per_record(members, values, "mean") if sampled else values, clusters)
    return found
