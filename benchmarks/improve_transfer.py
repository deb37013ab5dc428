"""Do the vocabulary edits `docpilot improve` chooses on dev hold on test?

For each real docs corpus (FastAPI, Prefect) and its golden set, on a copy of the docs:

1. `docpilot eval --gate-only` on the dev split and on the test split (the defaults);
2. `docpilot improve DEV_REPORT --apply` writes the entries chosen on dev into the
   copy's `vocabulary.json`;
3. both splits are evaluated again, and `docpilot improve compare` tests the two test
   runs record by record.

The table gives recall@8 and MRR of each split before and after, and the entries
chosen, so a reader can judge whether a docs writer would have made them. Every step
is the real command in a fresh process, as a user would run it.

``--ceiling`` also measures how far the same rules could move test at most: on another
copy of the docs, `improve --apply` runs on the *test* run itself (the golden set's
split labels swapped, so the test questions are the ones entries are chosen on), and
the test split is evaluated again. Entries chosen on dev are held to the same rules
and see none of the test questions, so they can hardly transfer more than that.

    python -m benchmarks.improve_transfer                       # data in ../shared/data
    python -m benchmarks.improve_transfer --ceiling
    python -m benchmarks.improve_transfer --data PATH --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
SUITES = {
    "fastapi": ("fastapi-docs/docs/en/docs", ROOT / "benchmarks" / "data" / "fastapi-golden.yaml"),
    "prefect": ("prefect-docs/docs", ROOT / "benchmarks" / "data" / "prefect-golden.yaml"),
}
"""Corpus → (its docs folder under the data folder, its golden set)."""


def swap_splits(golden: str) -> str:
    """A golden set's YAML with every record in ``dev`` put in ``test`` and the reverse, nothing else changed."""
    records = yaml.safe_load(golden)
    if not isinstance(records, list):
        raise SystemExit("a golden set here is a YAML list of records")
    for record in records:
        if isinstance(record, dict) and record.get("split") in ("dev", "test"):
            record["split"] = "test" if record["split"] == "dev" else "dev"
    return yaml.safe_dump(records, sort_keys=False, allow_unicode=True)


def _docpilot(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    # Run in the corpus's own work folder: `improve --apply` writes a settings edit into the
    # config of the folder it runs in, which must never be this repository's own.
    work = Path(env["DOCPILOT_CACHE_DIR"]).parent
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "docpilot", *args], cwd=work, env=env,
                          capture_output=True, text=True, check=False)


def _eval(split: str, docs: Path, golden: Path, out: Path, env: dict[str, str]) -> dict:
    done = _docpilot("eval", "--gate-only", "--split", split, "--docs", str(docs), "--golden", str(golden),
                     "--out", str(out), "--json", env=env)
    if done.returncode not in (0, 1):
        raise SystemExit(f"eval failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(out.read_text(encoding="utf-8"))["summary"]


def _copy_docs(source: Path, docs: Path) -> Path:
    shutil.copytree(source, docs)
    for path in [docs, *docs.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return docs


def _environment(work: Path) -> dict[str, str]:
    return {**os.environ, "DOCPILOT_CACHE_DIR": str(work / "cache"), "DOCPILOT_REPORTS_DIR": str(work / "reports"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _apply(report: Path, docs: Path, env: dict[str, str]) -> list[dict]:
    # Vocabulary entries alone: what a retrieval setting carries is measured by benchmarks.retrieval_suite.
    applied = _docpilot("improve", str(report), "--docs", str(docs), "--apply", "--no-settings", "--json", env=env)
    if applied.returncode != 0:
        raise SystemExit(f"improve --apply failed ({applied.returncode}): {applied.stderr.strip()}")
    return json.loads(applied.stdout)["changes"]


def measure(name: str, data: Path, work: Path) -> dict:
    """Before and after figures of one corpus, and the entries chosen on its dev split."""
    docs_rel, golden = SUITES[name]
    source = data / docs_rel
    if not source.is_dir():
        return {"corpus": name, "absent": str(source)}
    docs = _copy_docs(source, work / name / "docs")
    env = _environment(work / name)
    reports = work / name / "reports"
    before = {split: _eval(split, docs, golden, reports / f"{split}-before.json", env) for split in ("dev", "test")}
    changes = _apply(reports / "dev-before.json", docs, env)
    after = {split: _eval(split, docs, golden, reports / f"{split}-after.json", env) for split in ("dev", "test")}
    compared = _docpilot("improve", "compare", str(reports / "test-before.json"), str(reports / "test-after.json"),
                         "--json", env=env)
    tests = json.loads(compared.stdout)["tests"] if compared.returncode == 0 else []
    return {
        "corpus": name,
        "before": {s: {m: before[s][m] for m in ("recall@8", "mrr")} for s in before},
        "after": {s: {m: after[s][m] for m in ("recall@8", "mrr")} for s in after},
        "entries": [{"word": c["word"], "added": c["added"], "reason": c["reason"]} for c in changes],
        "test_compare": [{k: t.get(k) for k in ("outcome", "test", "effect", "p_value", "direction")} for t in tests],
    }


def ceiling(name: str, data: Path, work: Path) -> dict | None:
    """Test figures after the entries ``improve --apply`` chooses on the test split itself, and those entries."""
    docs_rel, original = SUITES[name]
    source = data / docs_rel
    if not source.is_dir():
        return None
    base = work / f"{name}-ceiling"
    docs = _copy_docs(source, base / "docs")
    golden = base / "golden.yaml"
    golden.write_text(swap_splits(original.read_text(encoding="utf-8")), encoding="utf-8")
    env = _environment(base)
    reports = base / "reports"
    before = _eval("dev", docs, golden, reports / "before.json", env)
    changes = _apply(reports / "before.json", docs, env)
    after = _eval("dev", docs, golden, reports / "after.json", env)
    return {
        "before": {m: before[m] for m in ("recall@8", "mrr")},
        "after": {m: after[m] for m in ("recall@8", "mrr")},
        "entries": [{"word": c["word"], "added": c["added"], "reason": c["reason"]} for c in changes],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder holding fastapi-docs, prefect-docs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--ceiling", action="store_true",
                        help="also choose entries on the test split itself: the most the rules could move test")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="docpilot-transfer-") as tmp:
        results = [measure(name, args.data, Path(tmp)) for name in SUITES]
        if args.ceiling:
            for result in results:
                if "absent" not in result:
                    result["ceiling"] = ceiling(result["corpus"], args.data, Path(tmp))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    _print_figures(results)
    _print_entries(results)


def _print_figures(results: list[dict]) -> None:
    """The table of recall@8 and MRR before and after, per corpus and split, the ceiling's test* rows among them."""
    print(f"{'corpus':<9} {'split':<5} {'recall@8 before':>15} {'after':>7} {'MRR before':>11} {'after':>7}")
    for result in results:
        if "absent" in result:
            print(f"{result['corpus']:<9} absent: {result['absent']}")
            continue
        for split in ("dev", "test"):
            b, a = result["before"][split], result["after"][split]
            print(f"{result['corpus']:<9} {split:<5} {b['recall@8']:>15.3f} {a['recall@8']:>7.3f} "
                  f"{b['mrr']:>11.3f} {a['mrr']:>7.3f}")
        if result.get("ceiling"):
            b, a = result["ceiling"]["before"], result["ceiling"]["after"]
            print(f"{result['corpus']:<9} {'test*':<5} {b['recall@8']:>15.3f} {a['recall@8']:>7.3f} "
                  f"{b['mrr']:>11.3f} {a['mrr']:>7.3f}")
    if any(r.get("ceiling") for r in results):
        print("test*: after entries chosen on the test split itself, by the same rules (the ceiling)")


def _print_entries(results: list[dict]) -> None:
    """The vocabulary entries each present corpus had chosen on dev, and on test itself where the ceiling ran."""
    for result in results:
        if "absent" in result:
            continue
        print(f"\n{result['corpus']}: {len(result['entries'])} entries chosen on dev")
        for entry in result["entries"]:
            print(f"  \"{entry['word']}\" → {entry['added']}: {entry['reason']}")
        if result.get("ceiling"):
            entries = result["ceiling"]["entries"]
            print(f"{result['corpus']}: {len(entries)} entries chosen on test itself (the ceiling)")
            for entry in entries:
                print(f"  \"{entry['word']}\" → {entry['added']}: {entry['reason']}")


if __name__ == "__main__":
    main()
