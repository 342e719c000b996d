"""Benchmark recall: quality on recall-dev, and latency on generated stores of known answers.

Prints Markdown tables; ``docs/benchmarks.md`` quotes them.

    python benchmarks/bench_recall.py quality            # recall-dev and recall-holdout
    python benchmarks/bench_recall.py quality --set recall-holdout --lexical-only
    python benchmarks/bench_recall.py quality --cjk 1    # the same with CJK unigrams (or 3)
    python benchmarks/bench_recall.py latency            # 100 / 1k / 10k notes (~3 minutes)
    python benchmarks/bench_recall.py latency --sizes 100,1000,10000,100000
    python benchmarks/bench_recall.py latency --before ../main/src   # cold: before -> after

Quality: each set (recall-dev: ``--data``, default ``../shared/data/recall-dev``
beside the repository; recall-holdout: ``benchmarks/data/recall-holdout``, a
held-out set in another domain, whose ``replaces`` annotations mark facts that
changed *without* a ``supersedes:`` link and are not written to the notes) is
loaded into a real workspace: project notes into the project
store, user notes into the user store, as note files named ``<type>_<id>.md``
with the set's ``updated``, and its ``supersedes`` ids written as the front
matter ``supersedes:`` file names (the link the store models). Queries are
scored against both stores. Plain BM25 is the set README's baseline,
reimplemented here (``rank_bm25.BM25Okapi`` defaults, ties by note id) and run in
the same process. "in 1,200 tokens" is whether a gold note is in
``recall_block(query, 1200)``.

Latency: a generated store of N notes (a vocabulary of made-up words, each
note with a unique code name, so the query "<code name> <two of its words>" has
one known answer): warm ``recall`` p50/p99 in one process, cold ``mdmem
search`` and cold ``mdmem hook user-prompt-submit`` as processes, the index
upkeep after one changed note, a full rebuild, and peak memory. With the
semantic extra (up to ``--semantic-max`` notes): recall while no note has a
vector yet (lexical, no model), ``embed`` of every note (what ``mdmem embed``
runs), then warm recall with every vector and its hit@1.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from mdmem._kinds import Level, NoteType  # noqa: E402
from mdmem.store.note import Note, render  # noqa: E402
from mdmem.store.store import Store  # noqa: E402

#: The held-out set of this repository (a different domain than recall-dev; see its README).
HOLDOUT = ROOT / "benchmarks" / "data" / "recall-holdout"
#: The calibration set of issue 24 (a third domain; off-topic prompts too): the hook's gate is
#: tuned on it, never on recall-dev's queries.
CALIB = ROOT / "benchmarks" / "data" / "recall-calib"
KINDS = [
    "keyword",
    "paraphrase",
    "cross-lingual",
    "identifier",
    "temporal-latest",
    "multi",
    "off-topic",
]
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


# -- the set, in real stores ------------------------------------------------------


def load_set(data: Path) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    notes = [json.loads(line) for line in (data / "notes.jsonl").read_text().splitlines() if line]
    queries = [
        json.loads(line) for line in (data / "queries.jsonl").read_text().splitlines() if line
    ]
    return notes, queries


def filename_of(note: dict[str, object]) -> str:
    return f"{note['type']}_{note['id']}.md"


def build_stores(notes: list[dict[str, object]], base: Path) -> tuple[Store, Store]:
    by_id = {str(n["id"]): n for n in notes}
    project = Store(base / "ws" / ".PseudoClaude" / "memory", Level.PROJECT)
    user = Store(base / "user", Level.USER)
    for store in (project, user):
        store.root.mkdir(parents=True, exist_ok=True)
    for n in notes:
        store = user if n["level"] == "user" else project
        extra: dict[str, object] = {}
        if n.get("supersedes"):
            extra["supersedes"] = filename_of(by_id[str(n["supersedes"])])
        updated = datetime.fromisoformat(str(n["updated"]))
        note = Note(
            filename=filename_of(n),
            type=NoteType(str(n["type"])),
            title=str(n["title"]),
            summary=str(n["summary"]),
            body=str(n["body"]),
            created=updated,
            updated=updated,
            extra=extra,
        )
        (store.root / note.filename).write_text(render(note), encoding="utf-8")
    project.reindex()
    user.reindex()
    return project, user


# -- plain BM25, as the set's README defines it -------------------------------------


def bm25_tokens(text: str) -> list[str]:
    out: list[str] = []
    for token in re.split(r"\W+", text.lower()):
        if not token:
            continue
        run = ""
        for ch in token:
            if _CJK.match(ch):
                if run:
                    out.append(run)
                    run = ""
                out.append(ch)
            else:
                run += ch
        if run:
            out.append(run)
    return out


class BM25:
    """rank_bm25.BM25Okapi (k1 1.5, b 0.75, epsilon 0.25), the baseline's ranker."""

    def __init__(self, docs: list[list[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(d) for d in docs]
        self.lens = [len(d) for d in docs]
        self.avg = sum(self.lens) / len(docs)
        df: Counter[str] = Counter()
        for d in docs:
            df.update(set(d))
        idf = {t: math.log(len(docs) - f + 0.5) - math.log(f + 0.5) for t, f in df.items()}
        average_idf = sum(idf.values()) / len(idf)
        eps = 0.25 * average_idf
        self.idf = {t: (v if v >= 0 else eps) for t, v in idf.items()}

    def scores(self, query: list[str]) -> list[float]:
        out = []
        for doc, length in zip(self.docs, self.lens, strict=True):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * length / self.avg)
            for q in query:
                f = doc.get(q, 0)
                s += self.idf.get(q, 0.0) * f * (self.k1 + 1) / (f + norm)
            out.append(s)
        return out


# -- scoring --------------------------------------------------------------------


def score(
    queries: list[dict[str, object]],
    ranked: dict[str, list[str]],
    in_budget: dict[str, set[str]] | None,
) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, list[float]]] = {}
    for q in queries:
        gold = set(q["gold"])  # type: ignore[arg-type]
        top = ranked[str(q["qid"])]
        row = {
            "hit@1": float(bool(gold & set(top[:1]))),
            "hit@5": float(bool(gold & set(top[:5]))),
            "recall@5": len(gold & set(top[:5])) / len(gold),
        }
        if in_budget is not None:
            row["in 1,200 tokens"] = float(bool(gold & in_budget[str(q["qid"])]))
        for kind in (str(q["kind"]), "all"):
            bucket = table.setdefault(kind, {})
            for key, value in row.items():
                bucket.setdefault(key, []).append(value)
    return {k: {m: statistics.fmean(v) for m, v in d.items()} for k, d in table.items()}


def print_table(name: str, result: dict[str, dict[str, float]], counts: Counter[str]) -> None:
    metrics = list(result["all"])
    print(f"\n**{name}**\n")
    print("| kind | n | " + " | ".join(metrics) + " |")
    print("|---|---:|" + "---:|" * len(metrics))
    for kind in [*KINDS, "all"]:
        if kind in result:
            values = " | ".join(f"{result[kind][m]:.2f}" for m in metrics)
            print(f"| {kind} | {counts[kind]} | {values} |")


def quality(args: argparse.Namespace) -> None:
    from mdmem.recall import text

    if args.cjk:
        text.CJK_NGRAM = args.cjk
    sets = {"recall-dev": Path(args.data), "recall-holdout": HOLDOUT, "recall-calib": CALIB}
    chosen = ["recall-dev", "recall-holdout"] if args.set == "both" else [args.set]
    if args.set == "all":
        chosen = list(sets)
    for name in chosen:
        print(f"\n### {name} ({sets[name]})")
        quality_on(sets[name], args)


def quality_on(data: Path, args: argparse.Namespace) -> None:
    from mdmem.recall import engine

    notes, queries = load_set(data)
    queries = [q for q in queries if q["gold"]]  # off-topic prompts are for `hooks`
    if args.lang:
        queries = [q for q in queries if q["lang"] == args.lang]
    if args.kind:
        queries = [q for q in queries if q["kind"] == args.kind]
    from mdmem.recall import dictionary

    if args.no_glossary:
        engine.expand = lambda query, qterms: {}  # type: ignore[assignment]
        print("\ntranslations: none")
    else:
        print(f"\ntranslations: {'CC-CEDICT' if dictionary.available() else 'the glossary'}")
    counts = Counter(str(q["kind"]) for q in queries)
    counts["all"] = len(queries)
    ids = [str(n["id"]) for n in notes]

    docs = [bm25_tokens(f"{n['title']} {n['summary']} {n['body']}") for n in notes]
    bm25 = BM25(docs)
    ranked_bm25 = {}
    for q in queries:
        s = bm25.scores(bm25_tokens(str(q["query"])))
        order = sorted(range(len(ids)), key=lambda i: (-s[i], ids[i]))
        ranked_bm25[str(q["qid"])] = [ids[i] for i in order[:10]]
    print_table("plain BM25 (the README's baseline)", score(queries, ranked_bm25, None), counts)

    from mdmem.recall import semantic as sem

    modes = [("lexical engine", False)]
    if sem.available() and not args.lexical_only:
        modes.append(("engine with the semantic extra", True))
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MDMEM_STATE_DIR"] = os.path.join(tmp, "state")
        dictionary.build()  # as `mdmem install` does: a search never builds it
        project, user = build_stores(notes, Path(tmp))
        id_of = {
            (s.level.value, filename_of(n)): str(n["id"]) for n in notes for s in (project, user)
        }
        for name, use_semantic in modes:
            if use_semantic:
                # A query never embeds (the background embedder does): embed first, as
                # `mdmem embed` would, so the extra's mode ranks with every vector.
                from mdmem.recall.embedder import embed

                for store in (project, user):
                    embed(store)
            ranked: dict[str, list[str]] = {}
            budget: dict[str, set[str]] = {}
            started = time.perf_counter()
            for q in queries:
                hits = engine.search(
                    [project, user], str(q["query"]), limit=10, semantic=use_semantic
                )
                ranked[str(q["qid"])] = [id_of[(h.level.value, h.filename)] for h in hits]
                shown = engine.recall(
                    [project, user], str(q["query"]), budget_tokens=1200, semantic=use_semantic
                )
                budget[str(q["qid"])] = {id_of[(h.level.value, h.filename)] for h in shown}
            elapsed = time.perf_counter() - started
            print_table(
                f"{name} ({elapsed:.1f} s for {len(queries)} queries, search + block)",
                score(queries, ranked, budget),
                counts,
            )
            if args.explain:
                explain(queries, [project, user], id_of, use_semantic)
            if args.misses:
                for q in queries:
                    top = ranked[str(q["qid"])]
                    if not set(q["gold"]) & set(top[:5]):  # type: ignore[arg-type]
                        gold = q["gold"]
                        print(f"  miss {q['qid']} {q['kind']}: {q['query']!r} {gold=} {top[:5]}")


def explain(
    queries: list[dict[str, object]],
    stores: list[Store],
    id_of: dict[tuple[str, str], str],
    use_semantic: bool,
) -> None:
    """For each query missed at 1: the top 5 with their lexical score, coverage and cosine."""
    from mdmem.recall import engine

    for q in queries:
        ranked, qset = engine._rank(stores, str(q["query"]), None, use_semantic, 0.0, None)
        top = [id_of[(c.level.value, c.row.name)] for c in ranked]
        gold = set(q["gold"])  # type: ignore[arg-type]
        if top[:1] and top[0] in gold:
            continue
        print(f"\n  {q['qid']} {q['kind']}: {q['query']!r} gold={sorted(gold)}")
        print(f"    terms {sorted(qset)}")
        for c in ranked[:5]:
            note = id_of[(c.level.value, c.row.name)]
            cosine = "" if c.cosine is None else f" cosine {c.cosine:.2f}"
            print(
                f"    {'*' if note in gold else ' '} {note} score {c.score:.4f} lexical"
                f" {c.lexical:.3f} coverage {c.coverage:.2f}{cosine} {c.row.title[:50]!r}"
            )
        for g in sorted(gold - set(top[:5])):
            where = top.index(g) + 1 if g in top else "not a candidate"
            print(f"      gold {g}: {where}")


# -- through the default hooks ------------------------------------------------------


def hooks(args: argparse.Namespace) -> None:
    """Gold that reaches the agent through Claude Code's default hooks, per query kind.

    Per query, a new session: the SessionStart hook runs (and records what it
    listed), then the UserPromptSubmit hook gets the query as its prompt, both
    in-process, as ``mdmem hook`` runs them. "reaches" is a gold note named in
    the prompt hook's block (the SessionStart listing of a small store names
    every note by its title, which is not the note's content); "notes" is how
    many notes the block shows; for off-topic prompts (no gold) "quiet" is the
    share with no block at all. With the extra, ``MDMEM_SEMANTIC=on`` and every
    note embedded first.
    """
    sets = {"recall-dev": Path(args.data), "recall-holdout": HOLDOUT, "recall-calib": CALIB}
    from mdmem.integrations import claude_code
    from mdmem.integrations._session import names_in
    from mdmem.integrations.prompt_recall import user_prompt_submit
    from mdmem.recall import dictionary
    from mdmem.recall import semantic as sem

    for name in args.set or ["recall-holdout", "recall-calib"]:
        notes, queries = load_set(sets[name])
        print(f"\n### {name} ({len(queries)} prompts)")
        modes = [("default hooks (lexical)", False)]
        if sem.available() and not args.lexical_only:
            modes.append(("MDMEM_SEMANTIC=on, every note embedded", True))
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["MDMEM_STATE_DIR"] = os.path.join(tmp, "state")
            dictionary.build()  # as `mdmem install` does: a hook never builds it
            project, user = build_stores(notes, Path(tmp))
            workspace = str(Path(tmp) / "ws")
            for label, use_semantic in modes:
                os.environ["MDMEM_SEMANTIC"] = "on" if use_semantic else "off"
                if use_semantic:
                    from mdmem.recall.embedder import embed

                    for store in (project, user):
                        embed(store)
                table: dict[str, dict[str, list[float]]] = {}
                for i, q in enumerate(queries):
                    session = f"{'s' if use_semantic else 'l'}{i}"
                    start = {"session_id": session, "cwd": workspace, "source": "startup"}
                    claude_code.session_start(start, workspace, str(user.root))
                    prompt = {**start, "prompt": str(q["query"]), "hook_event_name": "x"}
                    out = user_prompt_submit(prompt, workspace, str(user.root))
                    shown = {
                        n.removesuffix(".md").split("_")[-1]
                        for n in names_in(
                            json.loads(out)["hookSpecificOutput"]["additionalContext"]
                            if out
                            else ""
                        )
                    }
                    gold = set(q["gold"])  # type: ignore[arg-type]
                    row = {"notes": float(len(shown))}
                    if gold:
                        row["reaches"] = float(bool(gold & shown))
                        row["noise"] = float(len(shown - gold))
                    else:
                        row["quiet"] = float(not shown)
                    kinds = [str(q["kind"])] + (["all with gold"] if gold else [])
                    for kind in kinds:
                        bucket = table.setdefault(kind, {})
                        for key, value in row.items():
                            bucket.setdefault(key, []).append(value)
                print(f"\n**{label}**\n")
                print("| kind | n | reaches | notes shown | other notes | quiet |")
                print("|---|---:|---:|---:|---:|---:|")
                for kind in [*KINDS, "all with gold"]:
                    if kind not in table:
                        continue
                    b = table[kind]

                    def cell(key: str, b: dict[str, list[float]] = b) -> str:
                        return f"{statistics.fmean(b[key]):.2f}" if key in b else ""

                    print(
                        f"| {kind} | {len(b['notes'])} | {cell('reaches')} | {cell('notes')}"
                        f" | {cell('noise')} | {cell('quiet')} |"
                    )
        os.environ.pop("MDMEM_SEMANTIC", None)


# -- latency on generated stores ------------------------------------------------------

_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "ta",
    "ve",
    "zo",
    "pa",
    "si",
    "do",
    "fe",
    "gu",
    "hi",
    "ja",
    "ko",
    "lu",
    "ma",
    "no",
    "pe",
]


def generated(n: int, seed: int = 7) -> tuple[list[Note], list[tuple[str, str]]]:
    """N notes over a made-up vocabulary, and (query, answer file name) pairs."""
    rng = random.Random(seed)
    vocab = sorted({"".join(rng.choices(_SYLLABLES, k=3)) for _ in range(3000)})
    notes, probes = [], []
    kinds = list(NoteType)
    moment = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(n):
        words = rng.sample(vocab, 40)
        code = f"SVC_{i:06d}_{rng.choice(vocab).upper()}"
        kind = kinds[i % len(kinds)]
        name = f"{kind.value}_note-{i:06d}.md"
        notes.append(
            Note(
                filename=name,
                type=kind,
                title=" ".join(words[:4]),
                summary=" ".join(words[4:12]),
                body=f"The `{code}` setting. " + " ".join(words[12:]) + ".",
                created=moment,
                updated=moment,
            )
        )
        if i % max(1, n // 200) == 0:
            probes.append((f"{code} {words[2]} {words[20]}", name))
    return notes, probes


def write_store(notes: list[Note], root: Path) -> Store:
    root.mkdir(parents=True, exist_ok=True)
    for note in notes:
        (root / note.filename).write_text(render(note), encoding="utf-8")
    store = Store(root, Level.PROJECT)
    store.reindex()
    return store


def cold_processes(
    ws: Path,
    probes: list[tuple[str, str]],
    env: dict[str, str],
    rounds: int,
    before: str | None = None,
) -> dict[str, dict[str, float]]:
    """Medians (ms) of cold processes, interleaved round by round with ``python -c pass``.

    The processes run with their bytecode cached, as an installed mdmem does
    (``PYTHONDONTWRITEBYTECODE`` is dropped, and untimed runs write it).
    ``search``: ``mdmem search QUERY --json``. ``hook``: ``mdmem hook
    user-prompt-submit`` with a UserPromptSubmit payload as Claude Code sends
    it, in a session whose SessionStart hook ran, a new prompt each round (so
    each one recalls notes not shown before). ``hook, first prompt``: a session
    without SessionStart's record (the hook falls back to its cached block).
    ``before`` is the ``src`` folder of another checkout (e.g. ``main``), run
    in the same rounds with a state folder of its own.
    """
    import shutil

    base = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    trees: dict[str, dict[str, str]] = {"after": base}
    if before is not None:
        state = base["MDMEM_STATE_DIR"] + "-before"
        shutil.copytree(base["MDMEM_STATE_DIR"], state)
        trees["before"] = {**base, "MDMEM_STATE_DIR": state, "PYTHONPATH": before}
    exe = [sys.executable, "-m", "mdmem"]
    recalled = dict.fromkeys(trees, 0)

    def run(tree: str, argv: list[str], stdin: str | None = None) -> float:
        started = time.perf_counter()
        done = subprocess.run(
            argv, input=stdin, env=trees[tree], capture_output=True, text=True, check=True
        )
        elapsed = (time.perf_counter() - started) * 1000
        recalled[tree] += "additionalContext" in done.stdout and "Recalled" in done.stdout
        return elapsed

    def payload(prompt: str, session: str) -> str:
        return json.dumps(
            {
                "session_id": session,
                "transcript_path": str(ws / "session.jsonl"),
                "cwd": str(ws),
                "permission_mode": "default",
                "hook_event_name": "UserPromptSubmit",
                "prompt": f"Where is {prompt} configured, and what does it do?",
            }
        )

    start = {"session_id": "bench", "cwd": str(ws), "source": "startup"}
    for tree in trees:
        run(tree, [*exe, "hook", "session-start"], json.dumps(start))
        for _ in range(2):  # bytecode written, index built and settled
            run(tree, [*exe, "--workspace", str(ws), "search", probes[0][0], "--json"])
    recalled = dict.fromkeys(trees, 0)
    kinds = ("import", "search", "hook", "hook, first prompt")
    out: dict[str, dict[str, list[float]]] = {
        tree: {kind: [] for kind in ("floor", *kinds)} for tree in trees
    }
    for r in range(rounds):
        query = probes[(r + 1) % len(probes)][0]
        floor = run("after", [sys.executable, "-c", "pass"])
        for tree in trees if r % 2 == 0 else reversed(list(trees)):
            times = out[tree]
            times["floor"].append(floor)
            times["import"].append(run(tree, [sys.executable, "-c", "import mdmem.recall"]))
            times["search"].append(
                run(tree, [*exe, "--workspace", str(ws), "search", query, "--json"])
            )
            times["hook"].append(
                run(tree, [*exe, "hook", "user-prompt-submit"], payload(query, "bench"))
            )
            times["hook, first prompt"].append(
                run(tree, [*exe, "hook", "user-prompt-submit"], payload(query, f"new-{r}"))
            )
    result: dict[str, dict[str, float]] = {}
    for tree, times in out.items():
        result[tree] = {kind: statistics.median(values) for kind, values in times.items()}
        # The share of hook runs that recalled notes (SessionStart may have shown them all).
        result[tree]["recalled"] = recalled[tree] / (2 * rounds)
    return result


def latency(args: argparse.Namespace) -> None:
    import resource

    from mdmem.recall import dictionary, engine
    from mdmem.recall import semantic as sem
    from mdmem.recall.fts import Index

    with_extra = sem.available() and not args.lexical_only
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores)\n")
    print(
        "| notes | warm recall p50 / p99 (ms) | hit@1 | cold `mdmem search` (ms) | cold hook"
        " (ms) | `python -c pass` (ms) | upkeep, 1 changed note (ms) | full rebuild (s) |"
        " peak RSS (MiB) | with the extra: p50 before any vector (ms), `embed` all (s),"
        " warm recall p50 / p99 (ms), hit@1 |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    cpu_notes: list[str] = []
    cold_rows: list[tuple[int, dict[str, float]]] = []
    for n in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            env = {
                **os.environ,
                "MDMEM_STATE_DIR": os.path.join(tmp, "state"),
                "MDMEM_USER_DIR": os.path.join(tmp, "user"),
                "MDMEM_SEMANTIC": "off",
                # The extra's vectors are made by `embed` below, timed, not in the background.
                "MDMEM_EMBED": "off",
            }
            os.environ.update(env)
            dictionary.build()  # as `mdmem install` does: a search never builds it
            notes, probes = generated(n)
            ws = Path(tmp) / "ws"
            (ws / ".git").mkdir(parents=True)
            store = write_store(notes, ws / ".PseudoClaude" / "memory")
            started = time.perf_counter()
            Index(store).rebuild()
            rebuild = time.perf_counter() - started
            engine.index_of(store, fresh=True)
            times, hits, cpu = [], 0, []
            for _ in range(3):
                c0 = time.process_time()
                for query, answer in probes:
                    t0 = time.perf_counter()
                    found = engine.recall([store], query, budget_tokens=1200, semantic=False)
                    times.append((time.perf_counter() - t0) * 1000)
                    hits += bool(found and found[0].filename == answer)
                cpu.append((time.process_time() - c0) * 1000 / len(probes))
            cpu_notes.append(f"{n:,}: {statistics.median(cpu):.2f}")
            times.sort()
            p50 = times[len(times) // 2]
            p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
            # upkeep: one note changed by hand, then the next query's sync
            victim = store.root / notes[n // 2].filename
            victim.write_text(victim.read_text() + "\nOne more line.\n", encoding="utf-8")
            # A full check (what a write through mdmem, or the key's age, leads to).
            index = engine.index_of(store)
            t0 = time.perf_counter()
            index.sync(full=True)
            upkeep = (time.perf_counter() - t0) * 1000
            engine.index_of(store, fresh=True)  # settle
            cold = cold_processes(ws, probes, env, args.rounds, args.before)
            after = cold["after"]
            cold_search, cold_hook, floor = after["search"], after["hook"], after["floor"]
            cold_rows.append((n, cold))
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            extra = "–"
            if with_extra and n <= args.semantic_max:
                extra = _with_extra(store, probes)
            print(
                f"| {n:,} | {p50:.2f} / {p99:.2f} | {hits / len(times):.2f} | {cold_search:.0f} |"
                f" {cold_hook:.0f} | {floor:.0f} | {upkeep:.1f} | {rebuild:.2f} | {peak:.0f} |"
                f" {extra} |",
                flush=True,
            )
            engine._INDEXES.clear()
    # CPU time is what a loaded machine disturbs least (wall-clock waits for the cores).
    print(f"\nwarm recall, CPU ms per query (median of 3 rounds): {'; '.join(cpu_notes)}")

    print(
        f"\nCold processes, {args.rounds} interleaved rounds, medians (ms);"
        f" load average now {os.getloadavg()[0]:.1f}:\n"
    )
    print(
        "| notes | code | `python -c pass` | `import mdmem.recall` | `mdmem search` | hook, prompt"
        " in a session | hook, first prompt | search / floor | hook / floor | hooks that recalled |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, trees in cold_rows:
        for tree in sorted(trees, reverse=True):  # before, then after
            c = trees[tree]
            print(
                f"| {n:,} | {tree} | {c['floor']:.1f} | {c['import']:.1f} | {c['search']:.1f}"
                f" | {c['hook']:.1f} | {c['hook, first prompt']:.1f}"
                f" | {c['search'] / c['floor']:.1f}× | {c['hook'] / c['floor']:.1f}×"
                f" | {c['recalled']:.0%} |"
            )


def _percentiles(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]


def _with_extra(store: Store, probes: list[tuple[str, str]]) -> str:
    """Queries before any vector exists, embedding every note, then warm recall with vectors."""
    from mdmem.recall import engine, semantic
    from mdmem.recall.embedder import embed

    before = []
    for query, _ in probes[:50]:  # no vector yet: lexical, and the model is not even loaded
        t0 = time.perf_counter()
        engine.recall([store], query, budget_tokens=1200, semantic=True)
        before.append((time.perf_counter() - t0) * 1000)
    b50, _ = _percentiles(before)
    t0 = time.perf_counter()
    report = embed(store)
    embed_all = time.perf_counter() - t0
    assert report.with_vectors == report.notes
    semantic.encode(["load the model"])
    engine.recall([store], probes[0][0], budget_tokens=1200, semantic=True)  # bind the matrix
    times, hits = [], 0
    for _ in range(3):
        for query, answer in probes:
            t0 = time.perf_counter()
            found = engine.recall([store], query, budget_tokens=1200, semantic=True)
            times.append((time.perf_counter() - t0) * 1000)
            hits += bool(found and found[0].filename == answer)
    s50, s99 = _percentiles(times)
    return (
        f"{b50:.1f}, {embed_all:.1f} ({embed_all / max(report.notes, 1) * 1000:.1f} ms a note),"
        f" {s50:.1f} / {s99:.1f}, {hits / len(times):.2f}"
    )


def _find_set() -> Path:
    # ../shared/data/recall-dev beside the repository (or beside a worktree's parent).
    for folder in ROOT.parents:
        candidate = folder / "shared" / "data" / "recall-dev"
        if candidate.is_dir():
            return candidate
    return ROOT.parent / "shared" / "data" / "recall-dev"


def main() -> None:
    # The prompt hook in its own process, as every round before measured it
    # (bench_prompt_server.py times the prompt server).
    os.environ.setdefault("MDMEM_PROMPT_SERVER", "off")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--data", default=str(_find_set()), help="the recall-dev folder")
    q.add_argument(
        "--set",
        choices=["both", "all", "recall-dev", "recall-holdout", "recall-calib"],
        default="both",
        help="which query set (default: recall-dev and recall-holdout; all: with recall-calib)",
    )
    q.add_argument("--cjk", type=int, default=0, help="CJK n-gram size (1, 2, 3)")
    q.add_argument("--lexical-only", action="store_true")
    q.add_argument(
        "--no-glossary",
        action="store_true",
        help="without any English-Chinese translation (neither the dictionary nor the glossary)",
    )
    q.add_argument(
        "--dictionary",
        choices=["on", "off"],
        help="CC-CEDICT (the dictionary extra) on, or off for the glossary (default: as installed)",
    )
    q.add_argument("--kind", help="only the queries of this kind (e.g. cross-lingual)")
    q.add_argument("--lang", help="only the queries in this language (en, zh, es)")
    q.add_argument("--misses", action="store_true", help="list the queries missed at 5")
    q.add_argument(
        "--explain", action="store_true", help="the top 5, with their scores, of each miss at 1"
    )
    h = sub.add_parser("hooks", help="gold that reaches the agent through the default hooks")
    h.add_argument("--data", default=str(_find_set()), help="the recall-dev folder")
    h.add_argument(
        "--set",
        choices=["recall-dev", "recall-holdout", "recall-calib"],
        action="append",
        help="which sets (default: recall-holdout and recall-calib)",
    )
    h.add_argument("--lexical-only", action="store_true")
    h.add_argument("--dictionary", choices=["on", "off"], help="as for quality")
    lat = sub.add_parser("latency")
    lat.add_argument("--sizes", default="100,1000,10000")
    lat.add_argument("--lexical-only", action="store_true")
    lat.add_argument("--rounds", type=int, default=9, help="rounds of the cold processes")
    lat.add_argument(
        "--before",
        help="the src folder of another checkout, whose cold processes run in the same rounds",
    )
    lat.add_argument(
        "--semantic-max",
        type=int,
        default=10000,
        help="measure the extra only up to this many notes",
    )
    args = parser.parse_args()
    if getattr(args, "dictionary", None):
        os.environ["MDMEM_DICTIONARY"] = args.dictionary
    if args.what == "quality":
        quality(args)
    elif args.what == "hooks":
        hooks(args)
    else:
        latency(args)


if __name__ == "__main__":
    main()
