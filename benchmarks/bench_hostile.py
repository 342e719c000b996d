"""Hostile input, counted: how often a bad note breaks a store, and how often a create clobbers.

Not a speed benchmark: it counts outcomes over many random rounds, the figures
``docs/security.md`` quotes.

1. Parse fuzz: stores of two good notes plus one note of random hostile front
   matter (impossible dates, hour 25, ``+99:00``, 5,000-digit numbers,
   ``!!bool maybe``, odd tags, aliases); counts the rounds in which loading the
   index raised, or lost a good note.
2. Create race: a competitor writes the target file at the last moment before
   mdmem's final step of a create; counts the rounds in which its bytes were
   overwritten.
3. Alias bomb: the time to refuse a note whose aliases would expand to 8^12
   values.

Run: ``.venv/bin/python benchmarks/bench_hostile.py [--rounds 300]``; with
``--src ../other/src --skip-bomb``, the fuzz and the race on another checkout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# --src DIR measures another checkout (e.g. the main branch, for the figures before a fix).
_SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else None
sys.path.insert(0, _SRC or str(Path(__file__).resolve().parent.parent / "src"))

from mdmem import Level, Store  # noqa: E402
from mdmem.errors import InvalidNote  # noqa: E402
from mdmem.store.note import parse  # noqa: E402

SCALARS = [
    "2026-02-30",
    "2026-01-01 25:00:00",
    "2026-01-01T00:00:00+99:00",
    "0001-01-01T00:00:00+05:00",
    "9" * 5000,
    "0x" + "f" * 5000,
    "!!bool maybe",
    "!!timestamp nope",
    "!!python/object:os.system x",
    "!foo bar",
    "&a [1]",
    "*a",
    "'unclosed",
    "[1, [2, [3]]]",
    "2026-11-29",
    "text",
]
KEYS = ["title", "summary", "created", "updated", "expires", "extra"]
GOOD = "---\ntype: project_knowledge\ntitle: Good {n}\n---\nBody.\n"


def fuzz(rounds: int, rng: random.Random) -> tuple[int, int, int]:
    """(rounds where loading raised, rounds where a good note was lost, notes found bad)."""
    raised = lost = bad = 0
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["MDMEM_STATE_DIR"] = os.path.join(tmp, "state")
            root = Path(tmp) / "store"
            root.mkdir()
            for n in range(2):
                (root / f"good-{n}.md").write_text(GOOD.format(n=n))
            lines = ["type: project_knowledge", "title: Fuzzed"] + [
                f"{rng.choice(KEYS)}: {rng.choice(SCALARS)}" for _ in range(rng.randint(0, 3))
            ]
            (root / "fuzz.md").write_text("---\n" + "\n".join(lines) + "\n---\nbody\n")
            store = Store(root, Level.PROJECT)
            try:
                index = store.load_index()
                names = {e.filename for e in store.entries()}
            except Exception:
                raised += 1
                continue
            if "Good 0" not in index or not {"good-0.md", "good-1.md"} <= names:
                lost += 1
            bad += "fuzz.md" not in names
    return raised, lost, bad


def _competing(real: Callable[..., None], target: Path, theirs: bytes) -> Callable[..., None]:
    """``real`` (os.link or os.replace), but writing ``target`` first if it is the name made."""

    def call(src: str, dst: str, *args: object, **kwargs: object) -> None:
        if os.fspath(dst) == str(target) and not target.exists():
            target.write_bytes(theirs)
        real(src, dst, *args, **kwargs)

    return call


def race(rounds: int) -> int:
    """Rounds in which a file written just before the final step of a create was overwritten.

    The competitor runs inside whichever call makes the name exist (``os.link`` for
    an exclusive create, ``os.replace`` for a rename over the name), just before it.
    """
    overwritten = 0
    real = {"link": os.link, "replace": os.replace}
    for i in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["MDMEM_STATE_DIR"] = os.path.join(tmp, "state")
            root = Path(tmp) / "store"
            root.mkdir()
            store = Store(root, Level.PROJECT)
            theirs = f"written by git, round {i}\n".encode()
            target = root / "project_knowledge_deploy.md"

            os.link = _competing(real["link"], target, theirs)  # type: ignore[assignment]
            os.replace = _competing(real["replace"], target, theirs)  # type: ignore[assignment]
            try:
                store.apply(
                    [
                        {
                            "action": "create",
                            "level": "project",
                            "type": "project_knowledge",
                            "title": "Deploy",
                            "content": "ours",
                        }
                    ]
                )
            finally:
                os.link, os.replace = real["link"], real["replace"]  # type: ignore[assignment]
            overwritten += target.read_bytes() != theirs
    return overwritten


def bomb() -> float:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(12):
        prev, cur = chr(97 + i), chr(98 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 8) + "]")
    text = "---\ntype: project_knowledge\ntitle: Bomb\n" + "\n".join(lines) + "\n---\nboom\n"
    started = time.perf_counter()
    with contextlib.suppress(InvalidNote):
        parse(text, "bomb.md")
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--src", help="the src/ folder of another checkout to measure")
    parser.add_argument(
        "--skip-bomb", action="store_true", help="the fuzz and the race only (for old code)"
    )
    args = parser.parse_args()
    rng = random.Random(9)
    raised, lost, bad = fuzz(args.rounds, rng)
    overwritten = race(args.rounds)
    if args.skip_bomb:
        print(f"parse fuzz: raised {raised}, lost a good note {lost}, of {args.rounds} rounds")
        print(f"create race: overwritten {overwritten} of {args.rounds} rounds")
        return
    took = bomb()
    print("| case | rounds | outcome |")
    print("|---|---:|---|")
    print(f"| parse fuzz: loading the index raised | {args.rounds} | {raised} |")
    print(f"| parse fuzz: a good note lost | {args.rounds} | {lost} |")
    print(f"| parse fuzz: the fuzzed note refused (skipped, reported) | {args.rounds} | {bad} |")
    print(f"| create race: the other file overwritten | {args.rounds} | {overwritten} |")
    print(f"| alias bomb (8^12 values) refused | 1 | in {took:.2f} ms |")


if __name__ == "__main__":
    main()
