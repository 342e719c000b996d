"""Benchmark memory that stays true: history on a write, staleness at session start, dedupe.

Prints Markdown tables; ``docs/benchmarks.md`` quotes them.

    python benchmarks/bench_truth.py            # the full run (~1 minute)
    python benchmarks/bench_truth.py --quick    # a smoke run

What is measured:

- one ``Store.apply`` of an update in a store of 1,000 notes, with history and
  without (``mdmem.store.history.enabled``), interleaved in the same run;
- the staleness check of a store of 1,000 project notes (each naming two paths
  and a symbol) in a git repository of 10,000 files: cold (no cache: git log,
  diff and grep, every note read), cached (a settled tree: no git), after one
  note changed, after a commit (the tree moved; what the old tree had is kept);
  and what session start pays: ``prompt_index`` with the stale marks against
  without;
- dedupe precision and recall on ``tests/fixtures/dedupe_pairs.json``: the hard
  pairs of the recall development set that share words but mean different
  things, the facts that changed, and paraphrased duplicates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone

from _util import REPO, Summary, fmt_ms, interleaved, machine_rows, table, timed

sys.path.insert(0, os.path.join(REPO, "src"))

from mdmem import Level, Store
from mdmem.store import history, stale
from mdmem.store.dedupe import THRESHOLD, note_text, similarity
from mdmem.store.marks import prompt_index


def _create(i: int, body: str) -> dict[str, str]:
    return {
        "action": "create",
        "level": "project",
        "type": "project_knowledge",
        "title": f"Component {i:05d}",
        "slug": f"component-{i:05d}",
        "content": body,
    }


def bench_history(tmp: str, notes: int, repeat: int) -> str:
    # Two stores, so the one without history never leaves the other unknown versions.
    stores = {}
    for label in ("with", "without"):
        store = Store(os.path.join(tmp, f"hist-{label}", ".PseudoClaude", "memory"), Level.PROJECT)
        history.enabled = label == "with"
        store.apply([_create(i, f"Component {i} is built by target t{i}.") for i in range(notes)])
        history.enabled = True
        store.load_index()
        stores[label] = store
    counter = [0]

    def update(label: str) -> float:
        counter[0] += 1
        history.enabled = label == "with"
        op = {
            "action": "update",
            "level": "project",
            "filename": f"project_knowledge_component-{counter[0] % notes:05d}.md",
            "content": f"Component rebuilt, take {counter[0]}.",
        }
        try:
            return timed(lambda: stores[label].apply([op]))
        finally:
            history.enabled = True

    samples = interleaved(
        {"with history": lambda: update("with"), "without": lambda: update("without")}, repeat
    )
    rows = []
    for name, values in samples.items():
        s = Summary.of(values)
        rows.append([name, fmt_ms(s.median), fmt_ms(s.p90)])
    return table([f"one update, store of {notes:,} notes", "median ms", "p90 ms"], rows, [1, 2])


def _git(cwd: str, *args: str, date: str | None = None) -> None:
    env = {
        **os.environ,
        **({"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}),
        "GIT_AUTHOR_NAME": "B",
        "GIT_AUTHOR_EMAIL": "b@example.com",
        "GIT_COMMITTER_NAME": "B",
        "GIT_COMMITTER_EMAIL": "b@example.com",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def bench_stale(tmp: str, files: int, notes: int, repeat: int) -> str:
    ws = os.path.join(tmp, "repo")
    os.makedirs(ws)
    _git(ws, "init", "-q", "-b", "main")
    for i in range(files):
        folder = os.path.join(ws, "pkg", f"d{i % 100:02d}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"f{i:05d}.go"), "w") as f:
            f.write(f"package d{i % 100}\n// file {i}\nfunc handle_{i:05d}() {{}}\n")
    _git(ws, "add", "-A")
    # The code is older than the notes, as in a real repository.
    long_ago = (datetime.now(timezone.utc) - timedelta(days=60)).isoformat()
    _git(ws, "commit", "-q", "-m", "files", date=long_ago)
    store = Store(os.path.join(ws, ".PseudoClaude", "memory"), Level.PROJECT)
    old = datetime.now(timezone.utc) - timedelta(days=30)
    store.apply(
        [
            _create(
                i,
                f"Lives in `pkg/d{i % 100:02d}/f{i:05d}.go` (`handle_{i:05d}`), tested by "
                f"`pkg/d{(i + 1) % 100:02d}/f{(i + 1) % files:05d}.go`.",
            )
            for i in range(notes)
        ],
        now=old,
    )
    # Some history for git to read: a rename, a delete, an edit.
    os.makedirs(os.path.join(ws, "moved"), exist_ok=True)
    _git(ws, "mv", "pkg/d01/f00001.go", "moved/f00001.go")
    _git(ws, "rm", "-q", "pkg/d02/f00002.go")
    with open(os.path.join(ws, "pkg/d03/f00003.go"), "a") as f:
        f.write("// edited\n")
    with open(os.path.join(ws, "pkg/d04/f00004.go"), "w") as f:
        f.write("package d4\nfunc serve_00004() {}\n")
    _git(ws, "commit", "-q", "-am", "changes")
    store.load_index()
    stale_count = len(stale.check(store, ws))

    def cold() -> float:
        return timed(lambda: stale.check(store, ws, use_cache=False))

    def cached() -> float:
        return timed(lambda: stale.check(store, ws))

    edited = [0]

    def one_note_changed() -> float:
        edited[0] += 1
        store.apply(
            [
                {
                    "action": "update",
                    "level": "project",
                    "filename": "project_knowledge_component-00010.md",
                    "content": f"Lives in `pkg/d10/f00010.go` (take {edited[0]}).",
                }
            ]
        )
        store.load_index()
        return timed(lambda: stale.check(store, ws))

    commits = [0]

    def after_a_commit() -> float:
        commits[0] += 1
        with open(os.path.join(ws, "CHANGELOG"), "a") as f:
            f.write(f"{commits[0]}\n")
        _git(ws, "add", "CHANGELOG")
        _git(ws, "commit", "-q", "-m", f"change {commits[0]}")
        return timed(lambda: stale.check(store, ws))

    def session_start() -> float:
        return timed(lambda: prompt_index(store))

    def session_start_no_marks() -> float:
        path = store.state.stale_marks
        os.rename(path, path + ".off")
        try:
            return timed(lambda: prompt_index(store))
        finally:
            os.rename(path + ".off", path)

    stale.check(store, ws)
    samples = interleaved(
        {
            "check, cold (git log, diff, grep; every note read)": cold,
            "check, cached (settled tree: no git)": cached,
            "check after one note changed": one_note_changed,
            "check after a commit (tree moved: git log, diff, grep)": after_a_commit,
            "session start: prompt_index with stale marks": session_start,
            "session start: prompt_index without": session_start_no_marks,
        },
        repeat,
        rounds={"check, cold (git log, diff, grep; every note read)": max(3, repeat // 3)},
    )
    rows = []
    for name, values in samples.items():
        s = Summary.of(values)
        rows.append([name, fmt_ms(s.median), fmt_ms(s.p90), str(s.n)])
    head = f"{notes:,} notes, {files:,} files ({stale_count} stale)"
    return table([head, "median ms", "p90 ms", "runs"], rows, [1, 2, 3])


def bench_dedupe() -> str:
    path = os.path.join(REPO, "tests", "fixtures", "dedupe_pairs.json")
    with open(path, encoding="utf-8") as f:
        pairs = json.load(f)
    notes = pairs["notes"]

    def text(n: dict[str, str]) -> str:
        return note_text(n["title"], n["summary"], n["body"])

    # Measured through the store, as a write sees it.
    tmp = tempfile.mkdtemp(prefix="mdmem-dedupe-")
    false_merges = 0
    hard = pairs["different"] + [[a, b, "changed"] for a, b in pairs["changed"]]
    for k, (a, b, _) in enumerate(hard):
        store = Store(os.path.join(tmp, f"h{k}"), Level.PROJECT)
        for note in (notes[a], notes[b]):
            result = store.apply(
                [
                    {
                        "action": "create",
                        "level": "project",
                        "type": note["type"],
                        "title": note["title"],
                        "summary": note["summary"],
                        "content": note["body"],
                    }
                ]
            )
        false_merges += result.applied[0].action != "create"
    true_merges = 0
    for k, dup in enumerate(pairs["duplicates"]):
        original = notes[dup["of"]]
        store = Store(os.path.join(tmp, f"d{k}"), Level.PROJECT)
        base = {"action": "create", "level": "project", "type": original["type"]}
        store.apply(
            [
                {
                    **base,
                    "title": original["title"],
                    "summary": original["summary"],
                    "content": original["body"],
                }
            ]
        )
        result = store.apply(
            [{**base, "title": dup["title"], "summary": dup["summary"], "content": dup["body"]}]
        )
        true_merges += result.applied[0].action in ("update", "unchanged")
    hard_scores = [similarity(text(notes[a]), text(notes[b])) for a, b, _ in hard]
    dup_scores = [similarity(text(notes[d["of"]]), text(d)) for d in pairs["duplicates"]]
    merged = true_merges + false_merges
    rows = [
        ["hard pairs (shared words, different facts)", str(len(pairs["different"])), ""],
        ["changed facts (old → new)", str(len(pairs["changed"])), ""],
        ["false merges", f"{false_merges} / {len(hard)}", ""],
        ["paraphrased duplicates merged (recall)", f"{true_merges} / {len(dup_scores)}", ""],
        ["precision", f"{true_merges / merged:.2f}" if merged else "n/a", ""],
        ["highest similarity of a hard pair", f"{max(hard_scores):.2f}", ""],
        ["lowest similarity of a duplicate", f"{min(dup_scores):.2f}", ""],
        ["threshold", f"{THRESHOLD:.2f}", ""],
    ]
    return table(["dedupe on the pairs table", "value"], [r[:2] for r in rows], [1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat = 7 if args.quick else 21
    with tempfile.TemporaryDirectory(prefix="mdmem-truth-") as tmp:
        os.environ.setdefault("MDMEM_STATE_DIR", os.path.join(tmp, "state"))
        print(table(["machine", ""], machine_rows(tmp)))
        print()
        print(bench_history(tmp, 200 if args.quick else 1000, repeat))
        print()
        files, notes = (2000, 200) if args.quick else (10_000, 1000)
        print(bench_stale(tmp, files, notes, repeat))
        print()
        print(bench_dedupe())


if __name__ == "__main__":
    main()
