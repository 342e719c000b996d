"""Benchmark dedupe on titles of everyday words: an import of 10,000 notes, creates at any size.

Issue 23, item 7 (second half). Titles are 2-6 words of the forty
everyday words of ``bench_scale.py`` ("Cache deploy worker retry"), so that a
title is near hundreds of others; summaries and bodies are words of the
repository's recall sets (``benchmarks/data``, about a thousand), drawn
Zipf-like. No title names a number, so every note is in one number group (the
case numbered titles never had).
One note in 25 repeats an earlier one exactly, one in 25 repeats one with a
word of its body changed (a near-duplicate), so dedupe has something to find.

- ``mdmem import notes`` of ``--import-notes`` such notes (10,000) into a fresh
  store, as one process, timed whole; what it created, found unchanged and
  updated. With ``--before SRC`` the same import by another checkout (its
  ``src``) of ``--before-notes`` notes, and whether both stores hold the same
  notes afterwards (the same dedupe decisions).
- With ``--before`` and ``--quality N``: the repository's own sets
  (``benchmarks/data``'s notes, ``tests/fixtures/dedupe_pairs.json``'s notes,
  then its paraphrased duplicates, its changed facts and every note again),
  alone and among ``N`` crowded-title notes, imported by both checkouts: the
  same dedupe decisions leave the same notes.
- At each of ``--sizes`` (stores of such notes generated once into
  ``<cache>/dedupe-n<N>``): a single-op create of a new worded note, in process,
  interleaved round by round with its floor (one durable write: a temporary
  file, ``fsync``, ``rename``), the time the create spent in dedupe (the
  planner's duplicate search), and how many existing notes dedupe compared it
  with, against how many the full comparison (every note's title) would.

    python benchmarks/bench_dedupe.py --cache <cache>
    python benchmarks/bench_dedupe.py --cache <cache> --sizes 1000,10000,100000
    python benchmarks/bench_dedupe.py --cache <cache> --before <main>/src --before-notes 2000
    python benchmarks/bench_dedupe.py --cache <cache> --before <main>/src --quality 2000 \
        --before-notes 0 --import-notes 0 --sizes ""
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone

from _util import REPO, Summary, fmt_ms, fmt_ratio, interleaved, machine_rows, table
from bench_paths import Launcher, durable_write
from bench_scale import WORDS as TITLE_WORDS

from mdmem import Store
from mdmem._kinds import Level, NoteType


def vocabulary() -> tuple[list[str], list[float]]:
    """The words of the repository's recall sets, commonest first, with Zipf weights."""
    counts: Counter[str] = Counter()
    for name in ("recall-calib", "recall-holdout"):
        with open(os.path.join(REPO, "benchmarks", "data", name, "notes.jsonl")) as f:
            for line in f:
                note = json.loads(line)
                for key in ("title", "summary", "body"):
                    counts.update(
                        w
                        for w in re.findall(r"[a-z]+", str(note.get(key, "")).lower())
                        if len(w) > 1
                    )
    words = [w for w, _ in counts.most_common()]
    return words, [1.0 / (rank + 1) for rank in range(len(words))]


WORDS, WEIGHTS = vocabulary()


def _words(rng: random.Random, low: int, high: int) -> list[str]:
    return rng.choices(WORDS, WEIGHTS, k=rng.randint(low, high))


def worded(rng: random.Random) -> tuple[str, str, str]:
    """A title of 2-6 of a store's everyday words (``bench_scale.WORDS``: "cache", "deploy",
    "worker"; no number), so that most titles are near hundreds of others, a summary
    sentence and a body of the wider vocabulary."""
    title = " ".join(rng.choice(TITLE_WORDS) for _ in range(rng.randint(2, 6))).capitalize()
    summary = " ".join(_words(rng, 8, 16)).capitalize() + "."
    sentences = [" ".join(_words(rng, 6, 14)).capitalize() + "." for _ in range(rng.randint(4, 12))]
    return title, summary, " ".join(sentences)


def import_set(count: int, seed: int) -> list[tuple[str, str, str]]:
    """``count`` worded notes, one in 25 an exact repeat of an earlier one and one in 25 a
    near repeat (a word of its body changed)."""
    rng = random.Random(seed)
    notes: list[tuple[str, str, str]] = []
    for i in range(count):
        if i % 25 == 24 and notes:
            notes.append(notes[rng.randrange(len(notes))])
        elif i % 25 == 12 and notes:
            title, summary, body = notes[rng.randrange(len(notes))]
            words = body.split(" ")
            words[rng.randrange(len(words))] = rng.choice(WORDS)
            notes.append((title, summary, " ".join(words)))
        else:
            notes.append(worded(rng))
    return notes


def repository_sets() -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """The notes of the repository's sets (``benchmarks/data``'s recall notes and
    ``tests/fixtures/dedupe_pairs.json``'s), and what to import after them: the pairs'
    paraphrased duplicates, their changed facts and every note again."""
    first: list[tuple[str, str, str]] = []
    for name in ("recall-calib", "recall-holdout"):
        with open(os.path.join(REPO, "benchmarks", "data", name, "notes.jsonl")) as f:
            for line in f:
                note = json.loads(line)
                first.append((note["title"], note["summary"], note["body"]))
    with open(os.path.join(REPO, "tests", "fixtures", "dedupe_pairs.json")) as f:
        pairs = json.load(f)
    held = pairs["notes"]
    changed = {b for _, b in pairs["changed"]}
    first += [(n["title"], n["summary"], n["body"]) for k, n in held.items() if k not in changed]
    then = [(d["title"], d["summary"], d["body"]) for d in pairs["duplicates"]]
    then += [(held[b]["title"], held[b]["summary"], held[b]["body"]) for b in sorted(changed)]
    return first, then + first


def _env(folder: str, src: str | None = None) -> dict[str, str]:
    env = {**os.environ, "MDMEM_SEMANTIC": "off", "MDMEM_STATE_DIR": os.path.join(folder, "st")}
    env["MDMEM_USER_DIR"] = os.path.join(folder, "user")
    path = [src] if src else [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def run_import(
    notes: list[tuple[str, str, str]], cache: str, run: Launcher, src: str | None = None
) -> tuple[float, str, dict[str, tuple[str, str, str]]]:
    """(seconds, the command's output, the store's notes by name) of one import."""
    folder = tempfile.mkdtemp(prefix="import-", dir=cache)
    ws = os.path.join(folder, "ws")
    os.makedirs(os.path.join(ws, ".git"))
    source = os.path.join(folder, "notes.jsonl")
    with open(source, "w", encoding="utf-8") as f:
        for title, summary, body in notes:
            f.write(json.dumps({"title": title, "summary": summary, "content": body}) + "\n")
    print(f"  importing {len(notes)} notes ({src or 'this checkout'})", file=sys.stderr, flush=True)
    argv = [sys.executable, "-m", "mdmem", "--workspace", ws, "import", "notes", source]
    took, out = run.run(argv, _env(folder, src))
    from mdmem.store.note import parse

    root = os.path.join(ws, ".PseudoClaude", "memory")
    held = {}
    for name in sorted(os.listdir(root)):
        if name.endswith(".md") and name != "MEMORY.md":
            with open(os.path.join(root, name), encoding="utf-8") as f:
                note = parse(f.read(), name)
            held[name] = (note.title, note.summary, note.body)
    shutil.rmtree(folder, ignore_errors=True)
    return took, out.strip(), held


def generate(cache: str, size: int) -> str:
    """A store of ``size`` worded notes, written once into ``<cache>/dedupe-n<size>``."""
    from mdmem.store import files
    from mdmem.store.note import Note, index_line, render

    ws = os.path.join(cache, f"dedupe-n{size}")
    root = os.path.join(ws, ".PseudoClaude", "memory")
    if os.path.exists(os.path.join(ws, ".generated")):
        return root
    shutil.rmtree(ws, ignore_errors=True)
    os.makedirs(os.path.join(ws, ".git"))
    os.makedirs(root)
    rng = random.Random(size)
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    types = list(NoteType)
    lines = []
    for i in range(size):
        title, summary, body = worded(rng)
        note_type = types[i % len(types)]
        slug = "-".join(title.lower().split()[:4]) + f"-{i:06d}"
        note = Note(
            filename=f"{note_type.value}_{slug}.md",
            type=note_type,
            title=title,
            summary=summary,
            body=body,
            created=when,
            updated=when,
        )
        files.atomic_write(os.path.join(root, note.filename), render(note).encode(), durable=False)
        lines.append((note.filename, index_line(note)))
        if i % 10_000 == 0 and i:
            print(f"  generating {size}: {i}", file=sys.stderr, flush=True)
    with open(os.path.join(root, "MEMORY.md"), "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for _, line in sorted(lines)))
    open(os.path.join(ws, ".generated"), "w").close()
    return root


def bench_size(size: int, args: argparse.Namespace) -> dict[str, list[float]]:
    """Single worded creates into a store of ``size`` worded notes."""
    from mdmem.store import _dedupe_keys, _planner
    from mdmem.store.dedupe import Index, candidate

    root = generate(args.cache, size)
    print(f"  opening the store of {size} notes", file=sys.stderr, flush=True)
    store = Store(root, Level.PROJECT)
    rng = random.Random(size + 1)
    op = {"action": "create", "level": "project", "type": "project_knowledge"}
    added: list[str] = []
    spent: list[float] = []
    compared: list[int] = []
    kept: list[float] = []
    real_dup = _planner.Planner._duplicate
    real_find = _planner.find_duplicate
    real_put = _dedupe_keys.put

    def put(*args):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return real_put(*args)
        finally:
            kept.append(time.perf_counter() - start)

    def duplicate(self, *args):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return real_dup(self, *args)
        finally:
            spent.append(time.perf_counter() - start)

    def find(title, summary, body, candidates, read, threshold=0.6):  # type: ignore[no-untyped-def]
        candidates = list(candidates)
        compared.append(len(candidates))
        return real_find(title, summary, body, candidates, read, threshold)

    def create() -> float:
        title, summary, body = worded(rng)
        kept.append(-1.0)  # where this create's own key records start
        start = time.perf_counter()
        result = store.apply([{**op, "title": title, "summary": summary, "content": body}])
        took = time.perf_counter() - start
        assert [a.action for a in result.applied] == ["create"], result
        added.append(result.applied[0].filename)
        return took

    _planner.Planner._duplicate = duplicate  # type: ignore[method-assign]
    _planner.find_duplicate = find  # type: ignore[assignment]
    _dedupe_keys.put = put  # type: ignore[assignment]
    store.entries()  # the catalog brought up to date (a first load of a generated store)
    # The keys dropped, so that the first create builds them, as after an upgrade.
    import sqlite3

    con = sqlite3.connect(store.state.catalog)
    with con:
        con.execute("DELETE FROM meta WHERE key = ?", (_dedupe_keys.BUILT,))
    con.close()
    floor_dir = tempfile.mkdtemp(dir=args.cache)
    try:
        first = create()  # the first create builds the catalog's dedupe keys (once)
        del spent[:], compared[:], kept[:]
        samples = interleaved(
            {"create": create, "durable": lambda: durable_write(floor_dir, b"x" * 1200)},
            args.repeat,
            label=f"{size}",
        )
    finally:
        _planner.Planner._duplicate = real_dup  # type: ignore[method-assign]
        _planner.find_duplicate = real_find  # type: ignore[assignment]
        _dedupe_keys.put = real_put  # type: ignore[assignment]
        shutil.rmtree(floor_dir, ignore_errors=True)
    # Each create's dedupe: its search, and the keys its write records (one note's).
    per: list[float] = []
    for t in kept:
        if t < 0:
            per.append(0.0)
        else:
            per[-1] += t
    total = [a + b for a, b in zip(spent, per, strict=True)]
    # What the full comparison would compare the last create with: every near title.
    full = Index()
    for e in store.iter_entries(settle=False):
        full.add(candidate(e.filename, e.title, e.summary))
    last = store.read(added[-1])
    would = len([c for c in full.near(last.title) if c.filename != last.filename])
    store.apply([{"action": "delete", "level": "project", "filename": n} for n in added])
    return {
        **samples,
        "dedupe": total,
        "search": spent,
        "first": [first],
        "compared": [float(max(compared))],
        "full": [float(would)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated note counts")
    parser.add_argument("--repeat", type=int, default=7, help="rounds per case")
    parser.add_argument("--import-notes", type=int, default=10_000, help="notes imported")
    parser.add_argument("--before", help="another checkout's src: the same import by it")
    parser.add_argument("--before-notes", type=int, default=2_000, help="notes it imports")
    parser.add_argument(
        "--quality",
        type=int,
        default=0,
        help="with --before: the repository's sets, alone and"
        " among this many crowded notes, imported by both",
    )
    parser.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"),
        help="where generated stores are kept between runs (shared with bench_scale.py)",
    )
    parser.add_argument("--label", default="current", help="names this code version's state")
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s]
    os.makedirs(args.cache, exist_ok=True)
    os.environ["MDMEM_STATE_DIR"] = os.path.join(args.cache, f"state-dedupe-{args.label}")
    os.environ["MDMEM_SEMANTIC"] = "off"
    run = Launcher()

    def med(xs: list[float]) -> float:
        return Summary.of(xs).median

    if args.import_notes:
        took, out, _ = run_import(import_set(args.import_notes, 1), args.cache, run)
        print(
            f"`mdmem import notes` of {args.import_notes:,} worded notes: **{took:.1f} s** ({out})"
        )
    if args.before and args.before_notes:
        notes = import_set(args.before_notes, 2)
        now, now_out, now_held = run_import(notes, args.cache, run)
        then, then_out, then_held = run_import(notes, args.cache, run, args.before)
        same = "the same notes" if now_held == then_held else "**different notes**"
        print(
            f"\nThe same {args.before_notes:,} notes, this checkout / `--before`: {now:.1f} s"
            f" ({now_out}) / {then:.1f} s ({then_out}); both stores hold {same}."
        )
    if args.before and args.quality:
        first, after = repository_sets()
        crowd = import_set(args.quality, 3)
        for label, notes in (
            (
                "the repository's notes, then their duplicates, changed facts and repeats",
                first + after,
            ),
            (f"the same among {args.quality:,} crowded-title notes", first + crowd + after),
        ):
            _, now_out, now_held = run_import(notes, args.cache, run)
            _, then_out, then_held = run_import(notes, args.cache, run, args.before)
            same = "the same notes" if now_held == then_held else "**different notes**"
            print(f"\n{label}: this checkout {now_out} / `--before` {then_out}: {same}.")
    if sizes:
        results = {size: bench_size(size, args) for size in sizes}
        rows = []
        for label, key in (
            ("single-op create, worded title", "create"),
            ("of it, dedupe (search + keys kept)", "dedupe"),
            ("of it, dedupe's search", "search"),
        ):
            row = [label]
            for size in sizes:
                t, f = med(results[size][key]), med(results[size]["durable"])
                row.append(f"{fmt_ms(t)} ms ({fmt_ratio(t / f)})")
            rows.append(row)
        rows.append(
            [
                "floor: one durable write",
                *[f"{fmt_ms(med(results[s]['durable']))} ms" for s in sizes],
            ]
        )
        rows.append(
            [
                "the first create (builds the keys)",
                *[f"{results[s]['first'][0]:.1f} s" for s in sizes],
            ]
        )
        rows.append(
            [
                "notes compared (the full comparison's near titles)",
                *[
                    f"{int(results[s]['compared'][0])} ({int(results[s]['full'][0])})"
                    for s in sizes
                ],
            ]
        )
        print("\n### Worded creates (median, ratio to one durable write)\n")
        print(table(["path", *[f"{s:,} notes" for s in sizes]], rows))
    print("\n### Machine\n")
    print(table(["", ""], machine_rows(args.cache)))


if __name__ == "__main__":
    main()
