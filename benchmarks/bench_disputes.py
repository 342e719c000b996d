"""Measure when a correction disputes a note: precision and recall on labelled pairs.

Each pair of ``tests/data/dispute_pairs.json`` is a user's correction (with
the assistant's message before it) and a note's title and summary, labelled
``disputed`` when the correction really contradicts the note (same subject,
the note says what the user says is wrong). ``dev`` pairs were written first
and the rules tuned on them; ``holdout`` pairs were written after, and never
tuned on. Prints a Markdown table per
language; ``docs/benchmarks.md`` quotes it; ``tests/manager/test_feedback.py`` keeps
precision at 0.9 or more.

    python benchmarks/bench_disputes.py            # the table
    python benchmarks/bench_disputes.py --errors   # and every pair it gets wrong
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable

from _util import REPO, table

from mdmem.manager.feedback import contradicts, salient

PAIRS = os.path.join(REPO, "tests", "data", "dispute_pairs.json")


def before_rule(said: str, before: str, note: str) -> bool:
    """The rule until this round, the baseline: any note sharing two salient words with
    the assistant's message and the correction together."""
    return len(salient(f"{before}\n{said}") & salient(note)) >= 2


def score(
    pairs: list[dict[str, object]], rule: Callable[[str, str, str], bool] = contradicts
) -> tuple[int, int, int, int]:
    """(true positives, false positives, false negatives, true negatives)."""
    tp = fp = fn = tn = 0
    for pair in pairs:
        got = rule(str(pair["said"]), str(pair["before"]), str(pair["note"]))
        want = bool(pair["disputed"])
        tp += got and want
        fp += got and not want
        fn += want and not got
        tn += not got and not want
    return tp, fp, fn, tn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="print every wrong answer")
    args = parser.parse_args()
    with open(PAIRS, encoding="utf-8") as f:
        pairs = json.load(f)
    rows = []
    for part in ("dev", "holdout", "all"):
        for lang in ("en", "zh", "all"):
            chosen = [
                p
                for p in pairs
                if (lang == "all" or p["lang"] == lang) and (part == "all" or p["set"] == part)
            ]
            tp, fp, fn, _ = score(chosen)
            precision = tp / (tp + fp) if tp + fp else 1.0
            recall = tp / (tp + fn) if tp + fn else 1.0
            cells = [f"{part} / {lang}", len(chosen), tp + fn, tp, fp, fn]
            btp, bfp, bfn, _ = score(chosen, before_rule)
            old = f"{btp / max(btp + bfp, 1):.2f} / {btp / max(btp + bfn, 1):.2f}"
            rows.append([*map(str, cells), f"{precision:.2f}", f"{recall:.2f}", old])
    headers = ["set / language", "pairs", "contradictions", "found", "false disputes", "missed"]
    headers += ["precision", "recall", "before: precision / recall"]
    print(table(headers, rows, right=[1, 2, 3, 4, 5, 6, 7, 8]))
    if args.errors:
        for p in pairs:
            got = contradicts(str(p["said"]), str(p["before"]), str(p["note"]))
            if got != p["disputed"]:
                kind = "FALSE DISPUTE" if got else "MISSED"
                print(f"\n{kind} ({p['set']}): {p['said']!r}\n  note: {p['note']!r}")


if __name__ == "__main__":
    main()
