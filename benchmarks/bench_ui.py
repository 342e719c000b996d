"""Benchmark the web page (``mdmem ui``): how long each page takes over stores of N notes.

Prints a Markdown table; ``docs/benchmarks.md`` quotes it. The app is driven
in-process through Starlette's test client (no socket), so the numbers are the
page's own work: reading the stores, rendering HTML, the guard. Every page
reads the notes afresh (the page keeps no state), so the list and the search
grow with the number of notes; the note page reads them too, for the markers.

    python benchmarks/bench_ui.py            # 100 and 1,000 notes (~1 minute)
    python benchmarks/bench_ui.py --quick    # 100 notes, fewer rounds
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from typing import TYPE_CHECKING

from _util import Summary, fmt_ms, interleaved, machine_rows, table, timed

from mdmem._kinds import Level
from mdmem.store.paths import project_root
from mdmem.store.store import Store
from mdmem.ui.app import create_app
from mdmem.ui.guard import Settings
from mdmem.ui.model import Stores

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.testclient import TestClient

PORT = 8765


def build(folder: str, count: int) -> tuple[Stores, str]:
    """A workspace with ``count`` project notes and a tenth as many user notes."""
    project = Store(project_root(folder), Level.PROJECT)
    user = Store(os.path.join(folder, "user"), Level.USER)
    for store, n in ((project, count), (user, max(1, count // 10))):
        ops = [
            {
                "action": "create",
                "level": store.level.value,
                "type": "project_knowledge" if store is project else "user_preference",
                "title": f"Note {i} about build step {i % 37}",
                "summary": f"Step {i % 37} of the build; 第{i}条。",
                "content": f"Run `make step{i % 37}` before pushing.\n\n- one\n- two\n",
            }
            for i in range(n)
        ]
        store.apply(ops)
    return Stores(folder, project, user), project.entries()[0].filename


def _cases(client: TestClient, note: str, csrf: str) -> dict[str, Callable[[], float]]:
    """The timed cases over one app: each returns the seconds of one request."""

    def page(path: str) -> Callable[[], float]:
        def run() -> float:
            return timed(lambda: client.get(path).raise_for_status())

        return run

    def save() -> float:
        found = re.search(r'name="base" value="([^"]+)"', client.get(note + "/edit").text)
        assert found is not None
        form = {
            "csrf": csrf,
            "base": found.group(1),
            "title": "Edited",
            "summary": "",
            "type": "project_knowledge",
            "body": f"Body {time.perf_counter()}",  # a change every time
        }
        return timed(lambda: client.post(note + "/edit", data=form))

    return {
        "list (GET /)": page("/"),
        "search (GET /?q=step)": page("/?q=step"),
        "note (GET /note/…)": page(note),
        "overview": page("/overview"),
        "edit form": page(note + "/edit"),
        "save an edit (POST)": save,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 notes, fewer rounds")
    args = parser.parse_args()
    sizes = [100] if args.quick else [100, 1000]
    repeat = 5 if args.quick else 15

    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="mdmem-bench-ui-") as tmp:
        os.environ["MDMEM_STATE_DIR"] = os.path.join(tmp, "state")
        for size in sizes:
            stores, name = build(os.path.join(tmp, f"ws{size}"), size)
            hosts = frozenset({f"127.0.0.1:{PORT}"})
            settings = Settings(token="t", allowed_hosts=hosts)
            from starlette.testclient import TestClient

            client = TestClient(create_app(stores, settings), base_url=f"http://127.0.0.1:{PORT}")
            client.get("/?token=t")
            stores.project.load_index()  # settle the catalog first
            note = f"/note/project/{name}"

            cases = _cases(client, note, settings.csrf)
            samples = interleaved(cases, repeat, label=f"{size} notes")
            for case, values in samples.items():
                s = Summary.of(values)
                rows.append([f"{size:,}", case, fmt_ms(s.median), fmt_ms(s.p90)])
    print(table(["project notes", "page", "median", "p90"], rows, right=[0, 2, 3]))
    print()
    print(table(["machine", ""], machine_rows(tmp)))


if __name__ == "__main__":
    main()
