"""The web page's own attacks (issue 21, item 6/7): a replayed cookie, a token in argv, odd URLs.

Each test is the attack: it fails on a page that lets it through.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from builders import BASE, TOKEN, ui_settings
from builders import add_note as create
from conftest import PYTHON, python_env
from mdmem.store.workspace import resolve
from mdmem.ui.app import create_app
from mdmem.ui.guard import Tokens
from mdmem.ui.model import Stores
from mdmem.ui.server import Server


def test_the_server_listens_on_a_loopback_address_of_its_own(workspace: Path) -> None:
    """Cookies ignore ports: on 127.0.0.1, the page's cookie would reach every local server."""
    ws, project, user = resolve(str(workspace), None)
    a, b = Server(Stores(ws, project, user)), Server(Stores(ws, project, user))
    try:
        for server in (a, b):
            assert server.host.startswith("127.") and server.host != "127.0.0.1"
        assert a.host != b.host  # 2**24 addresses: two runs never share one in practice
        assert a.settings.cookie_name.startswith(f"mdmem-ui-{a.port}-")
        assert a.settings.cookie_name != f"mdmem-ui-{a.port}"  # a secret of the run in the name
    finally:
        a.stop()
        b.stop()


def test_a_used_token_is_void(workspace: Path) -> None:
    """The printed address works once: a copy of it (history, a screen) logs nobody in."""
    ws, project, user = resolve(str(workspace), None)
    create(project, "Build")
    fresh: list[str] = []
    with Server(Stores(ws, project, user), on_token=fresh.append) as server:
        with httpx2.Client() as first:
            assert first.get(server.url, follow_redirects=True).status_code == 200
            # The same browser opening the old address again just gets the page.
            again = first.get(server.url, follow_redirects=True)
            assert again.status_code == 200 and "Build" in again.text
        with httpx2.Client() as thief:
            stolen = thief.get(server.url, follow_redirects=True)
            assert stolen.status_code == 403 and "Build" not in stolen.text
            assert "already used" in stolen.text
            # The fresh address the command prints for another browser works, once.
            assert len(fresh) == 1 and fresh[0].startswith(server.base_url + "/?token=")
            assert thief.get(fresh[0], follow_redirects=True).status_code == 200
        with httpx2.Client() as late:
            assert late.get(fresh[0], follow_redirects=True).status_code == 403


def test_an_opener_token_expires_unused() -> None:
    now = [100.0]
    tokens = Tokens(clock=lambda: now[0])
    soon, later = tokens.issue(120.0), tokens.issue(120.0)
    assert tokens.take(soon)
    assert not tokens.take(soon)  # once only
    now[0] += 121
    assert not tokens.take(later)  # too late, even unused


def test_the_browser_opener_never_gets_a_reusable_token(workspace: Path, tmp_path: Path) -> None:
    """``mdmem ui`` hands a browser opener an address: its argv is visible to every local
    user (``ps``). The address there must be void once the browser used it."""
    _, project, _ = resolve(str(workspace), None)
    create(project, "Build")
    seen = tmp_path / "argv.txt"
    opener = tmp_path / "opener.py"
    opener.write_text(
        f"import sys\nopen({str(seen)!r}, 'w').write('\\n'.join(sys.argv[1:]))\n",
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [PYTHON, "-m", "mdmem", "--workspace", str(workspace), "ui"],
        env=python_env(BROWSER=f"{sys.executable} {opener} %s"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        printed = proc.stdout.readline().strip()
        for _ in range(200):
            if seen.exists() and seen.read_text(encoding="utf-8"):
                break
            time.sleep(0.05)
        argv = seen.read_text(encoding="utf-8").strip()
        assert argv.startswith("http://127.") and "token=" in argv
        assert argv.split("token=")[1] != printed.split("token=")[1]
        with httpx2.Client(timeout=10) as browser:  # the browser the opener started
            assert browser.get(argv, follow_redirects=True).status_code == 200
        with httpx2.Client(timeout=10) as other_user:  # read it from `ps`, replays it
            replay = other_user.get(argv, follow_redirects=True)
            assert replay.status_code == 403 and "Build" not in replay.text
        with httpx2.Client(timeout=10) as person:  # the printed address still works, once
            assert person.get(printed, follow_redirects=True).status_code == 200
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "for another browser" in err


def test_a_change_that_does_not_say_where_it_comes_from_is_refused(workspace: Path) -> None:
    """A replayed cookie from a script sends no Origin: no change without one."""
    ws, project, user = resolve(str(workspace), None)
    name = create(project, "Build")
    conf = ui_settings()
    client = TestClient(create_app(Stores(ws, project, user), conf), base_url=BASE)
    assert client.get(f"/?token={TOKEN}", follow_redirects=False).status_code == 303
    bare = client.post(f"/note/project/{name}/delete", data={"csrf": conf.csrf})
    assert bare.status_code == 403 and project.exists(name)
    same_site = client.post(
        f"/note/project/{name}/delete",
        data={"csrf": conf.csrf},
        headers={"sec-fetch-site": "same-site"},  # another port of the same host
        follow_redirects=False,
    )
    assert same_site.status_code == 403 and project.exists(name)
    ok = client.post(
        f"/note/project/{name}/delete",
        data={"csrf": conf.csrf},
        headers={"sec-fetch-site": "same-origin"},
        follow_redirects=False,
    )
    assert ok.status_code == 303 and not project.exists(name)


@pytest.mark.parametrize("version", ["²", "٣", "1²", "１", "³", " 1", "-1", "1e3", "9" * 40])
def test_a_version_that_is_not_ascii_digits_is_a_clear_400(workspace: Path, version: str) -> None:
    ws, project, user = resolve(str(workspace), None)
    name = create(project, "Build")
    conf = ui_settings()
    client = TestClient(
        create_app(Stores(ws, project, user), conf), base_url=BASE, raise_server_exceptions=False
    )
    client.get(f"/?token={TOKEN}", follow_redirects=False)
    restore = client.post(
        f"/note/project/{name}/history/restore",
        data={"csrf": conf.csrf, "version": version},
        headers={"origin": BASE},
        follow_redirects=False,
    )
    assert restore.status_code in (400, 404), restore.text
    assert "version" in restore.text
    shown = client.get(f"/note/project/{name}/history?version={quote(version)}")
    assert shown.status_code in (400, 404) and "version" in shown.text


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_PATHS = [
    "/",
    "/note/{a}/{b}",
    "/note/project/{b}/history",
    "/note/{a}/{b}/raw",
    "/activity",
    "/activity/{b}",
    "/switch",
    "/switch/preview",
    "/review",
    "/note/{a}/{b}/history/restore",
]
_KEYS = ["q", "level", "type", "sort", "page", "version", "store", "day", "done", "note", "id"]


@settings(max_examples=120, deadline=None)
@given(
    path=st.sampled_from(_PATHS),
    a=_TEXT,
    b=_TEXT,
    params=st.dictionaries(st.sampled_from(_KEYS), _TEXT, max_size=4),
)
def test_no_url_gives_a_500(
    workspace: Path, path: str, a: str, b: str, params: dict[str, str]
) -> None:
    """Hypothesis over path and query parameters: a clear 4xx page, never a server error."""
    client = _client(workspace)
    url = path.format(a=quote(a, safe=""), b=quote(b, safe=""))
    response = client.get(url, params=params)
    assert response.status_code < 500, (url, params, response.text[:300])


_clients: dict[str, TestClient] = {}


def _client(workspace: Path) -> TestClient:
    key = str(workspace)
    if key not in _clients:
        _clients.clear()
        ws, project, user = resolve(key, None)
        create(project, "Build")
        client = TestClient(
            create_app(Stores(ws, project, user), ui_settings()),
            base_url=BASE,
            raise_server_exceptions=False,
        )
        client.get(f"/?token={TOKEN}", follow_redirects=False)
        _clients[key] = client
    return _clients[key]
