"""Count how often a workspace made again at the same path looks like the old one.

Not a speed benchmark: it makes a workspace with a store (``.git``,
``.PseudoClaude/memory``, a few notes), records the workspace folder's inode
and mdmem's identity of it (``mdmem.store.paths.anchor_identity``: device,
inode, and the inode's generation or birth time), removes it all with
``rm -rf``, and does it again, round after round. The state folder is keyed by
that identity, so "same identity" is a re-clone that would inherit the old
clone's state.

    python benchmarks/bench_inode_reuse.py              # 50 rounds
    python benchmarks/bench_inode_reuse.py --rounds 200 --tmpdir /dev/shm
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from mdmem.store.paths import anchor_identity


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=50, help="rounds (default 50)")
    parser.add_argument("--tmpdir", help="where the workspace is made (its file system counts)")
    args = parser.parse_args(argv)
    base = tempfile.mkdtemp(prefix="mdmem-inodes-", dir=args.tmpdir)
    same_inode = same_identity = 0
    previous: tuple[int, str] | None = None
    try:
        for _ in range(args.rounds):
            ws = os.path.join(base, "repo")
            store = os.path.join(ws, ".PseudoClaude", "memory")
            os.makedirs(store)
            os.mkdir(os.path.join(ws, ".git"))
            for n in range(5):
                with open(os.path.join(store, f"project_knowledge_{n}.md"), "w") as f:
                    f.write("note\n")
            identity, st = anchor_identity(ws)
            assert st is not None
            if previous is not None:
                same_inode += st.st_ino == previous[0]
                same_identity += identity == previous[1]
            previous = (st.st_ino, identity)
            shutil.rmtree(ws)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    where = args.tmpdir or tempfile.gettempdir()
    try:
        df = subprocess.run(["df", "-T", where], capture_output=True, text=True, check=True)
        kind = df.stdout.splitlines()[-1].split()[1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        kind = "?"
    print("| file system | re-creations | same inode number | same identity |")
    print("|---|---:|---:|---:|")
    print(f"| {kind} | {args.rounds - 1} | {same_inode} | {same_identity} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
