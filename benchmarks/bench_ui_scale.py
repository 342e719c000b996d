"""Benchmark the web page at 10,000 notes: a page's size and time, cold and warm.

Prints a Markdown table; ``docs/benchmarks.md`` quotes it. Each round is a
fresh process (the same interpreter, this checkout): it builds the app over
the workspace, logs in, then times one page twice, in-process through
Starlette's test client (no socket): *cold* is the first request of that
process (its imports of the page's modules, the catalog opened, the recall
index loaded; the embedding model, if the semantic extra is installed, is
not waited for: the page's first search is lexical while it loads), *warm*
the second. The floor in the same run is the style
sheet (the guard and Starlette, nothing read). Medians over the rounds, which
interleave the pages.

    python benchmarks/bench_ui_scale.py                # 10,000 notes, 5 rounds
    python benchmarks/bench_ui_scale.py --size 1000 --rounds 3
    python benchmarks/bench_ui_scale.py --size 100000 --rounds 3   # peak memory at scale

The store is bench_scale.py's (generated once under ``--cache``, realistic
notes), settled by one ``Store.entries()`` before the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from _util import REPO, Summary, fmt_ms, machine_rows, table

CASES = {
    "floor: style sheet": "/static/style.css",
    "list, first page": "/",
    "list, page 100": "/?page=100",
    "list, one type, by title": "/?type=project_knowledge&sort=title",
    "search (q=deploy)": "/?q=deploy",
    "search (q=retry timeout), by title": "/?q=retry+timeout&sort=title",
}

_CHILD = r"""
import json, resource, sys, time
ws, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
from starlette.testclient import TestClient
from mdmem.store.workspace import resolve
from mdmem.ui.app import create_app
from mdmem.ui.guard import Settings
from mdmem.ui.model import Stores
w, project, user = resolve(ws, None)
settings = Settings(token="t", allowed_hosts=frozenset({"127.0.0.1:8765"}))
client = TestClient(create_app(Stores(w, project, user), settings), base_url="http://127.0.0.1:8765")
client.cookies.set(settings.cookie_name, settings.session)
ready = time.perf_counter()
out = []
for _ in range(2):
    start = time.perf_counter()
    r = client.get(path)
    out.append(time.perf_counter() - start)
    assert r.status_code == 200, (path, r.status_code, r.text[:300])
print(json.dumps({"cold": out[0], "warm": out[1], "bytes": len(r.content),
                  "setup": ready - t0,
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"))
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_scale import generate

    os.makedirs(args.cache, exist_ok=True)
    ws = generate(args.cache, args.size)
    with tempfile.TemporaryDirectory(prefix="mdmem-bench-ui-") as tmp:
        env = dict(os.environ)
        env["MDMEM_STATE_DIR"] = os.path.join(tmp, "state")
        env["HOME"] = tmp  # an empty user store
        env["PYTHONPATH"] = os.path.join(REPO, "src") + os.pathsep + env.get("PYTHONPATH", "")
        # Settle the catalog and build the recall index once, as a used store has them.
        warmup = (
            "import sys; from mdmem.store.workspace import resolve; "
            "from mdmem.recall import search; w, p, u = resolve(sys.argv[1], None); "
            "p.entries(); search([p, u], 'warm up', limit=5)"
        )
        subprocess.run([sys.executable, "-c", warmup, ws], env=env, check=True)
        samples: dict[str, dict[str, list[float]]] = {c: {} for c in CASES}
        names = list(CASES)
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for case in order:
                proc = subprocess.run(
                    [sys.executable, "-c", _CHILD, ws, CASES[case]],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                got = json.loads(proc.stdout)
                for key, value in got.items():
                    samples[case].setdefault(key, []).append(float(value))
        rows = []
        for case in names:
            s = samples[case]
            rows.append(
                [
                    case,
                    f"`{CASES[case]}`",
                    f"{Summary.of(s['bytes']).median / 1024:,.1f}",
                    fmt_ms(Summary.of(s["cold"]).median),
                    fmt_ms(Summary.of(s["warm"]).median),
                    fmt_ms(Summary.of(s["warm"]).p90),
                    f"{max(s['peak']):.0f}",
                ]
            )
        print(f"{args.size:,} project notes, {args.rounds} fresh processes per page\n")
        print(
            table(
                ["page", "address", "KiB", "cold (ms)", "warm (ms)", "warm p90", "peak MiB"],
                rows,
                right=[2, 3, 4, 5, 6],
            )
        )
        print()
        print(table(["machine", ""], machine_rows(tmp)))


if __name__ == "__main__":
    main()
