"""Benchmark a long-lived process's next search after a hand edit: the watch vs the stat pass.

One process holds a store (as ``mdmem mcp`` does) and searches it; between
searches a note is changed by hand, and the next search is timed, with whether
it found the new word:

- **in place**: a same-size rewrite of the note (same inode, the folder untouched);
- **rename**: an editor's save, a temporary file renamed over the note.

Each is measured three ways, round by round, interleaved:

- ``watch``: the store watched (``mdmem.store.watch``, the ``watch`` extra);
- ``stat pass``: not watched, the in-place sweep of every note's ctime on
  whatever the size (``MDMEM_SWEEP_MAX`` raised), as a store of up to
  ``SWEEP_MAX`` notes has it; a rename moves the folder, hence a full check;
- ``no check``: not watched, the default above ``SWEEP_MAX`` (what a search
  costs when it checks nothing; it does not see an in-place edit).

The floor is the same kind of search (one rare word) of the same settled
store, not watched, when nothing changed and nothing is checked. The
store is the project store of ``bench_scale.py`` (generated once into
``--cache``), copied into a work folder first (the edits never touch the
shared copy), with its own state folder.

    python benchmarks/bench_watch.py --cache <cache>            # 10,000 notes
    python benchmarks/bench_watch.py --cache <cache> --sizes 10000,100000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from _util import Summary, fmt_ms, interleaved, machine_rows, table
from bench_scale import generate

# Beyond the engine's 2-second trust of a warm index (recall/engine.py): an unwatched
# process checks again only then, so each unwatched case waits it out, untimed.
_SETTLE = 2.1


def bench_size(size: int, args: argparse.Namespace) -> dict[str, object]:
    from mdmem import Level, Store
    from mdmem.recall import fts as recall_index
    from mdmem.store import watch

    source = os.path.join(generate(args.cache, size), ".PseudoClaude", "memory")
    work = tempfile.mkdtemp(prefix=f"mdmem-bench-watch-{size}-", dir=args.work)
    root = os.path.join(work, "memory")
    print(f"  [{size}] copying the store", file=sys.stderr, flush=True)
    shutil.copytree(source, root, symlinks=True)
    os.environ["MDMEM_STATE_DIR"] = os.path.join(work, "state")
    os.environ["MDMEM_SEMANTIC"] = "off"
    store = Store(root, Level.PROJECT)
    print(f"  [{size}] first index", file=sys.stderr, flush=True)
    store.search("deploy cache")
    time.sleep(1.1)
    store.search("deploy cache")
    names = sorted(n for n in os.listdir(root) if n.startswith("project_knowledge_n"))
    state = {"k": 0}
    seen: dict[str, list[int]] = {}

    def edit(kind: str) -> str:
        """Change a note by hand; the new word the next search should find."""
        state["k"] += 1
        k = state["k"]
        word = f"zq{k:05d}xw"
        path = os.path.join(root, names[(k * 7919) % len(names)])
        with open(path, encoding="utf-8") as f:
            text = f.read()
        at = text.index("\n---\n") + 5
        new = text[:at] + word + " " + text[at + len(word) + 1 :]
        if kind == "in place":
            with open(path, "r+", encoding="utf-8") as f:
                f.write(new)
        else:
            tmp = os.path.join(root, f".{os.path.basename(path)}.swp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(new)
            os.replace(tmp, path)
        return word

    def case(mode: str, kind: str | None) -> float:
        if mode == "watch":
            watch.start([root])
            store.search("deploy cache")  # untimed: the index takes its point in the watch
        else:
            watch.stop()
            os.environ[recall_index.SWEEP_ENV] = "1000000000" if mode == "stat pass" else "0"
            for _ in range(2):  # untimed: whatever the last case left is caught up first
                store.search("deploy cache")
                time.sleep(_SETTLE)
        word = edit(kind) if kind is not None else "zq99999xw"  # the same kind of query
        start = time.perf_counter()
        hits = store.search(word)
        took = time.perf_counter() - start
        if kind is not None:
            seen.setdefault(f"{mode}/{kind}", []).append(int(bool(hits)))
        return took

    cases = {"floor": lambda: case("no check", None)}
    for mode in ("watch", "stat pass", "no check"):
        for kind in ("in place", "rename"):
            cases[f"{mode}/{kind}"] = lambda m=mode, k=kind: case(m, k)  # type: ignore[misc]
    samples = interleaved(cases, args.repeat, label=f"{size} notes")
    watch.stop()
    shutil.rmtree(work, ignore_errors=True)
    return {"samples": samples, "seen": seen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10000", help="comma-separated note counts")
    parser.add_argument("--repeat", type=int, default=7, help="rounds per case")
    parser.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"),
        help="where generated stores are kept between runs (shared with bench_scale.py)",
    )
    parser.add_argument("--work", default=None, help="where the store is copied (a temp folder)")
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",")]
    results = {size: bench_size(size, args) for size in sizes}
    rows = []
    for name in results[sizes[0]]["samples"]:  # type: ignore[attr-defined]
        row = [name]
        for size in sizes:
            r = results[size]
            med = Summary.of(r["samples"][name]).median  # type: ignore[index]
            floor = Summary.of(r["samples"]["floor"]).median  # type: ignore[index]
            found = r["seen"].get(name)  # type: ignore[attr-defined]
            cell = f"{fmt_ms(med)} ms ({med / floor:.1f}×)"
            if found is not None:
                cell += f", found {sum(found)} of {len(found)}"
            row.append(cell)
        rows.append(row)
    print("### The next search in a long-lived process after a hand edit (median, ÷ floor)\n")
    print(table(["case", *[f"{s:,} notes" for s in sizes]], rows))
    print("\n### Machine\n")
    print(table(["", ""], machine_rows(args.cache)))


if __name__ == "__main__":
    main()
