"""The docs stay true to the code: set-up commands, links, the API, the map, the environment.

Fast and offline: these tests only read files (and import ``mdmem`` for ``__all__``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import mdmem

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})([^\n`]*)\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
_INLINE_CODE = re.compile(r"(`+)(?!`).+?(?<!`)\1", re.S)
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s)]+)[^)]*\)")
# [label]: target  (a reference definition)
_REFERENCE = re.compile(r"^ {0,3}\[[^\]\n]+\]:\s*(<[^>\n]*>|\S+)", re.M)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_ENV_VAR = re.compile(r"\bMDMEM_[A-Z_]+")


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are not links."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def _links(text: str) -> list[str]:
    """Every link target of a Markdown text, outside code."""
    prose = _prose(text)
    found = [m.group(1) for m in _INLINE_LINK.finditer(prose)]
    found += [m.group(1) for m in _REFERENCE.finditer(prose)]
    return [t[1:-1] if t.startswith("<") and t.endswith(">") else t for t in found]


def _local_targets(page: Path) -> list[tuple[str, Path]]:
    """The relative links of a page, as (link as written, path it points at); anchors dropped."""
    targets = []
    for link in _links(page.read_text(encoding="utf-8")):
        if _SCHEME.match(link) or link.startswith(("#", "//")):
            continue
        path = link.split("#", 1)[0].split("?", 1)[0]
        if path:
            targets.append((link, (page.parent / path).resolve()))
    return targets


def _section(text: str, heading: str) -> str:
    """The body of a level-2 section: from its heading to the next level-2 heading outside code."""
    lines = text.splitlines(keepends=True)
    body: list[str] | None = None
    fence = ""
    for line in lines:
        marker = re.match(r"[ \t]*(`{3,}|~{3,})", line)
        if marker and (not fence or marker.group(1).startswith(fence)):
            fence = "" if fence else marker.group(1)
        elif not fence and line.startswith("## "):
            if body is not None:
                break
            if line.strip() == heading:
                body = []
                continue
        if body is not None:
            body.append(line)
    if body is None:
        raise AssertionError(f"README.md has no {heading!r} section: restore it (CI relies on it)")
    return "".join(body)


# -- (a) the README's set-up commands -------------------------------------------------------


def test_readme_try_it_has_two_sh_blocks_and_the_second_is_what_ci_runs() -> None:
    """What the README tells a newcomer to run is what CI runs, verbatim."""
    section = _section(README.read_text(encoding="utf-8"), "## Try it")
    blocks = [m.group(3) for m in _FENCE.finditer(section) if m.group(2).strip() == "sh"]
    assert len(blocks) == 2, (
        "README.md '## Try it' must hold exactly two ```sh blocks (the demo, then the test "
        f"suite), found {len(blocks)}: keep one command per block and move other examples "
        "to '## Use it'"
    )
    ci_lines = [
        line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines() if line
    ]
    assert ci_lines, ".ci/run is empty: its last line must be the README's test command"
    assert blocks[1].rstrip("\n") == ci_lines[-1], (
        "the README's second '## Try it' command and the last line of .ci/run differ; make "
        f"them identical, byte for byte.\n  README: {blocks[1].rstrip()!r}\n"
        f"  .ci/run: {ci_lines[-1]!r}"
    )


# -- (b) relative links ---------------------------------------------------------------------


@pytest.mark.parametrize("page", _pages(), ids=_rel)
def test_relative_links_point_at_existing_files(page: Path) -> None:
    """Links between pages and to repository files resolve (anchors are not checked)."""
    broken = [
        f"{link} (-> {target})"
        for link, target in _local_targets(page)
        if not target.exists() or not target.is_relative_to(ROOT)
    ]
    assert not broken, (
        f"{_rel(page)} links to files that do not exist in the repository; fix the path "
        "(relative to the page) or drop the link:\n  " + "\n  ".join(broken)
    )


# -- (c) the public API is in the reference -------------------------------------------------


def test_every_public_name_is_in_the_api_reference() -> None:
    """The names in ``mdmem.__all__`` are a contract: each one is documented."""
    reference = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    missing = [
        name
        for name in mdmem.__all__
        if name != "__version__" and not re.search(rf"\b{re.escape(name)}\b", reference)
    ]
    assert not missing, (
        f"docs/reference/api.md does not mention {', '.join(missing)} from mdmem.__all__: "
        "document each (signature and one line), or drop it from __all__"
    )


# -- (d) the map of the docs ----------------------------------------------------------------


def test_docs_index_links_every_page() -> None:
    """docs/index.md is the map: it links every page, every how-to and concept included."""
    index = DOCS / "index.md"
    assert index.is_file(), "docs/index.md is missing: it is the map of the docs"
    linked = {target for _, target in _local_targets(index)}
    pages = [
        p
        for p in sorted(DOCS.rglob("*"))
        if p.is_file()
        and p != index
        and (p.suffix == ".md" or p.parent.name in ("how-to", "concepts"))
    ]
    unlinked = [_rel(p) for p in pages if p.resolve() not in linked]
    assert not unlinked, (
        "docs/index.md does not link these pages; add each under its kind (tutorial, how-to, "
        "concepts, reference) with one line saying what it is for:\n  " + "\n  ".join(unlinked)
    )


# -- (e) environment variables are documented -----------------------------------------------


def test_every_environment_variable_is_documented() -> None:
    """Every ``MDMEM_*`` variable the package reads (sub-packages too) is named in docs/."""
    used: dict[str, set[str]] = {}
    for source in sorted((ROOT / "src" / "mdmem").rglob("*.py")):
        for match in _ENV_VAR.finditer(source.read_text(encoding="utf-8")):
            used.setdefault(match.group(0).rstrip("_"), set()).add(_rel(source))
    docs = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    missing = sorted(
        f"{name} (used in {', '.join(sorted(files))})"
        for name, files in used.items()
        if name != "MDMEM" and not re.search(rf"\b{name}\b", docs)
    )
    assert used, "found no MDMEM_* variable in src/mdmem: the pattern in this test is stale"
    assert not missing, (
        "environment variables read by mdmem but never mentioned under docs/; document each "
        "where it acts (docs/cli.md lists the global ones):\n  " + "\n  ".join(missing)
    )


def _architecture_rows() -> dict[str, str]:
    """The floors table of docs/architecture.md: package cell -> whole row."""
    rows = {}
    for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            rows[cells[1]] = line
    return rows


@pytest.mark.parametrize(
    "package", ["store", "recall", "manager", "integrations", "ui", "cli", "extract"]
)
def test_the_architecture_names_every_module_of_each_package(package: str) -> None:
    row = _architecture_rows()[f"`{package}/`"]
    folder = ROOT / "src" / "mdmem" / package
    missing = [
        p.stem
        for p in sorted(folder.glob("*.py"))
        if p.stem != "__init__" and f"`{p.stem}`" not in row
    ]
    assert not missing, f"docs/architecture.md's row for {package}/ does not name {missing}"


def test_the_architecture_floors_are_the_enforced_ones() -> None:
    from test_boundaries import FLOORS

    rows = _architecture_rows()
    for cell, line in rows.items():
        number = int(line.strip().strip("|").split("|")[0])
        for name in re.findall(r"`([\w.]+?)(?:/|\.py)`", cell):
            module = "mdmem." + name
            assert FLOORS.get(module) == number, (
                f"{cell}: {module} is on floor {FLOORS.get(module)}"
            )
    assert set(FLOORS) - {"mdmem.__main__"} == {
        "mdmem." + n for cell in rows for n in re.findall(r"`([\w.]+?)(?:/|\.py)`", cell)
    }


def test_every_test_docs_security_names_exists() -> None:
    """Each promise in docs/security.md names the tests that keep it: they must exist."""
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    named: list[tuple[str, str]] = []
    current = None
    for match in re.finditer(r"`(tests/(?:\w+/)*test_\w+\.py)?(?:::(test_\w+))?`", text):
        path, name = match.groups()
        if path:
            current = path
            assert (ROOT / path).is_file(), path
        if name:
            assert current is not None, name
            named.append((current, name))
    assert len(named) >= 20
    for path, name in named:
        assert re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(), re.M), (path, name)
