"""Benchmark the next CLI command after a hand edit of a large store: the watcher vs none.

Each command is a fresh process (``python -m mdmem``), as a person or the agent
runs it, against a copy of ``bench_scale.py``'s project store (generated once
into ``--cache``; the copy is edited, never the shared one). Between commands a
note is edited by hand, and the next command is timed with whether it saw the
edit:

- ``search``: ``mdmem search WORD`` after a same-size in-place rewrite that adds
  WORD (same inode, the folder untouched): found, or not;
- ``hook``: ``mdmem hook user-prompt-submit`` with a prompt naming WORD after the
  same kind of edit: the note in its context, or not;
- ``index``: ``mdmem index`` after an in-place edit that makes a note the block
  did not show a correction (which it then shows first): shown, or not;
- ``index after a rename``: ``mdmem index`` after the same change by an editor's
  save (a temporary file renamed over the note): a block cache miss, whose cost
  is what this measures, and shown or not;
- ``hook, nothing edited``: the prompt hook of a settled store (what asking the
  watcher costs on every prompt).

Each with the user's watcher up (``store/watcher.py``) and with
``MDMEM_WATCHER=off`` (today's check: above ``SWEEP_MAX`` no sweep), round by
round, interleaved with the floor, ``python -c pass``.

    python benchmarks/bench_watcher.py --cache <cache>                 # 10,000 notes
    python benchmarks/bench_watcher.py --cache <cache> --sizes 10000,100000 --repeat 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _util import Summary, fmt_ms, interleaved, machine_rows, table
from bench_scale import generate

_ENSURE = "import sys; from mdmem.store import watcher; watcher.ensure(sys.argv[1:])"
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _run(
    argv: list[str], env: dict[str, str], cwd: str, stdin: str | None = None
) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=cwd, input=stdin, capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv}: {done.stderr}")
    return took, done.stdout


def bench_size(size: int, args: argparse.Namespace) -> dict[str, object]:
    source = generate(args.cache, size)
    work = tempfile.mkdtemp(prefix=f"mdmem-bench-watcher-{size}-", dir=args.work)
    ws = os.path.join(work, "ws")
    print(f"  [{size}] copying the store", file=sys.stderr, flush=True)
    shutil.copytree(source, ws, symlinks=True)
    root = os.path.join(ws, ".PseudoClaude", "memory")
    env = {
        **os.environ,
        "PYTHONPATH": SRC,
        "MDMEM_WORKSPACE": ws,
        "MDMEM_USER_DIR": os.path.join(work, "user"),
        "MDMEM_STATE_DIR": os.path.join(work, "state"),
        "MDMEM_SEMANTIC": "off",
        "MDMEM_EMBED": "off",
        "MDMEM_WATCHER": "on",
        "MDMEM_WATCHER_IDLE": "900",
    }
    os.makedirs(env["MDMEM_USER_DIR"])
    off = {**env, "MDMEM_WATCHER": "off"}
    mdmem = [sys.executable, "-m", "mdmem"]
    print(f"  [{size}] first index and search", file=sys.stderr, flush=True)
    _run([*mdmem, "index"], off, ws)
    _run([*mdmem, "search", "deploy cache"], off, ws)
    # The watcher, as SessionStart starts it; its own stat pass done before the rounds.
    _run(
        [
            sys.executable,
            "-c",
            "import sys; from mdmem.store import watcher; watcher.ensure(sys.argv[1:])",
            root,
        ],
        env,
        ws,
    )
    sys.path.insert(0, SRC)
    os.environ.update({k: env[k] for k in ("MDMEM_STATE_DIR", "MDMEM_WATCHER")})
    from mdmem.store import watcher

    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        answers = watcher.ask([(root, time.time_ns())])
        if not isinstance(answers, str) and answers[0].kind != watcher.UNKNOWN:
            break
        time.sleep(0.2)
    time.sleep(2.1)
    _run([*mdmem, "search", "deploy cache"], env, ws)  # in step with the watcher
    _run([*mdmem, "index"], env, ws)
    first = {
        "session_id": "bench-settled",
        "transcript_path": os.path.join(work, "t.jsonl"),
        "cwd": ws,
        "hook_event_name": "UserPromptSubmit",
        "prompt": "what do we know about the deploy?",
    }
    _run([*mdmem, "hook", "user-prompt-submit"], env, ws, json.dumps(first))
    names = sorted(n for n in os.listdir(root) if n.startswith("project_knowledge_n"))
    refs = sorted(n for n in os.listdir(root) if n.startswith("reference_material_"))
    state = {"k": 0}
    seen: dict[str, list[int]] = {}

    def in_place(path: str, old: str, new: str) -> None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        edited = text.replace(old, new, 1)
        assert len(edited.encode()) == len(text.encode()) and edited != text, path
        with open(path, "r+", encoding="utf-8") as f:
            f.write(edited)

    def word_edit() -> str:
        state["k"] += 1
        k = state["k"]
        word = f"zq{k:05d}xw"
        path = os.path.join(root, names[(k * 7919) % len(names)])
        with open(path, encoding="utf-8") as f:
            text = f.read()
        at = text.index("\n---\n") + 5
        in_place(path, text[at : at + len(word) + 1], word + " ")
        return word

    def case(kind: str, watched: bool) -> float:
        e = env if watched else off
        if kind != "floor":
            # Untimed: the edits of earlier cases (which an unwatched command left
            # unindexed) caught up, so each timed command meets its own edit alone.
            _run([*mdmem, "search", "deploy"], env, ws)
            _run([*mdmem, "index"], env, ws)
            # Past the clock's margin: a note read within it is read again by the next
            # reader (its stat cannot vouch for its bytes yet), watched or not.
            time.sleep(2.1)
            if kind == "hook, nothing edited":  # that second read too: a settled store
                _run([*mdmem, "search", "deploy"], env, ws)
        label = f"{kind}, {'watcher' if watched else 'no watcher'}"
        if kind == "floor":
            return _run([sys.executable, "-c", "pass"], e, ws)[0]
        if kind == "search":
            word = word_edit()
            took, out = _run([*mdmem, "search", word], e, ws)
            seen.setdefault(label, []).append(int(word in out or bool(out.strip())))
            return took
        if kind == "hook, nothing edited":
            payload = {
                "session_id": "bench-settled",
                "transcript_path": os.path.join(work, "t.jsonl"),
                "cwd": ws,
                "hook_event_name": "UserPromptSubmit",
                "prompt": "what do we know about deploy retry budgets?",
            }
            return _run([*mdmem, "hook", "user-prompt-submit"], e, ws, json.dumps(payload))[0]
        if kind == "hook":
            word = word_edit()
            payload = {
                "session_id": "bench-settled",  # a session SessionStart-less only once
                "transcript_path": os.path.join(work, "t.jsonl"),
                "cwd": ws,
                "hook_event_name": "UserPromptSubmit",
                "prompt": f"what do we know about {word}?",
            }
            took, out = _run([*mdmem, "hook", "user-prompt-submit"], e, ws, json.dumps(payload))
            seen.setdefault(label, []).append(int(word in out))
            return took
        # A reference note the block does not show made a correction, which it then
        # shows first: rewritten in place ("index"), or by an editor's save (a
        # temporary file renamed over it: a block cache miss, "index after a rename").
        while True:  # a reference note not made a correction yet
            state["k"] += 1
            name = refs[(state["k"] * 7919) % len(refs)]
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if "type: reference_material\ntitle: " in text:
                break
        head = "type: reference_material\ntitle: "
        first = text[text.index(head) + len(head)]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        if kind == "index":
            # One character of the title less: the same size. Updated now: the newest
            # correction, which the block shows first.
            in_place(path, head + first, "type: correction_feedback\ntitle: ")
            in_place(path, "updated: 2026-01-01T00:00:00+00:00", f"updated: {stamp}")
        else:
            tmp = os.path.join(root, f".{name}.swp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(
                    text.replace(head + first, "type: correction_feedback\ntitle: ", 1).replace(
                        "updated: 2026-01-01T00:00:00+00:00", f"updated: {stamp}", 1
                    )
                )
            os.replace(tmp, path)
        took, out = _run([*mdmem, "index"], e, ws)
        seen.setdefault(label, []).append(int(f"({name})" in out))
        return took

    cases = {"floor": lambda: case("floor", False)}
    for kind in ("search", "hook", "index", "index after a rename", "hook, nothing edited"):
        for watched in (True, False):
            label = f"{kind}, {'watcher' if watched else 'no watcher'}"
            cases[label] = lambda k=kind, w=watched: case(k, w)  # type: ignore[misc]
    samples = interleaved(cases, args.repeat, label=f"{size} notes")
    with open(os.path.join(watcher.folder(), "watch-v1.lock")) as f:
        pid = f.read().strip()
    if pid.isdigit() and int(pid) > 0:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), 15)  # the watcher this run started (its lock names it)
    shutil.rmtree(work, ignore_errors=True)
    return {"samples": samples, "seen": seen}


def main() -> None:
    # The prompt hook in its own process, as every round before measured it
    # (bench_prompt_server.py times the prompt server).
    os.environ.setdefault("MDMEM_PROMPT_SERVER", "off")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10000", help="comma-separated note counts")
    parser.add_argument("--repeat", type=int, default=5, help="rounds per case")
    parser.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"),
        help="where generated stores are kept between runs (shared with bench_scale.py)",
    )
    parser.add_argument("--work", default=None, help="where the store is copied (a temp folder)")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", SRC], check=False)
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
            cell = f"{fmt_ms(med)} ms ({med / floor:.2f}×)"
            if found is not None:
                cell += f", saw it {sum(found)} of {len(found)}"
            row.append(cell)
        rows.append(row)
    print("### The next CLI command after a hand edit (median, ÷ `python -c pass`)\n")
    print(table(["case", *[f"{s:,} notes" for s in sizes]], rows))
    print("\n### Machine\n")
    print(table(["", ""], machine_rows(args.cache)))


if __name__ == "__main__":
    main()
