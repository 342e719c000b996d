"""The recall index's sync right after an mdmem write: listing the store once or twice.

After a write the recall index's key no longer holds, so its sync lists the
store and asks the store which notes changed (``changed_notes``). Before, the
store listed itself a second time to settle its catalog; now the listing is
handed through. Both ways, in the same process, interleaved round by round:
apply a create, time ``Index.sync()``, delete the note again.

    python benchmarks/bench_recall_after_write.py --store <store directory> --rounds 8

``--store`` is a store's directory (for example a copy of one of
``bench_scale.py``'s generated stores, ``<cache>/n10000/.PseudoClaude/memory``);
it is written to, so never point it at a store you keep.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from mdmem import Store
from mdmem._kinds import Level
from mdmem.recall import fts as recall_index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True, help="a store directory (it is written to)")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    os.environ["MDMEM_SEMANTIC"] = "off"
    store = Store(args.store, Level.PROJECT)
    index = recall_index.Index(store)
    index.sync(full=True)
    real = recall_index.changed_notes

    def twice(
        store: Store, indexed: dict[str, str], scan: object = None
    ) -> tuple[dict[str, str], list[str]]:
        return real(store, indexed, None)  # as before: the store lists itself again

    cases = {"two listings (before)": twice, "one listing (now)": real}
    times: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for i in range(args.rounds):
            for name, fn in cases.items():
                op = {"action": "create", "level": "project", "type": "project_knowledge"}
                result = store.apply(
                    [{**op, "title": f"Probe {i} {name}", "content": f"probe {time.time_ns()}"}]
                )
                recall_index.changed_notes = fn  # type: ignore[assignment]
                start = time.perf_counter()
                index.sync()
                times[name].append(time.perf_counter() - start)
                recall_index.changed_notes = real
                store.apply(
                    [
                        {"action": "delete", "level": "project", "filename": a.filename}
                        for a in result.applied
                    ]
                )
    finally:
        recall_index.changed_notes = real
        index.close()
    notes = sum(1 for n in os.listdir(args.store) if n.endswith(".md")) - 1
    print(f"| notes | {' | '.join(cases)} |")
    print(f"| ----: |{' ----: |' * len(cases)}")
    cells = " | ".join(f"{statistics.median(v) * 1000:.1f} ms" for v in times.values())
    print(f"| {notes:,} | {cells} |")


if __name__ == "__main__":
    main()
