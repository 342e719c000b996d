"""The turn journal: claims are exactly-once, dead owners' turns are adopted, live ones are not."""

from __future__ import annotations

import os
import stat
import subprocess
import textwrap
from pathlib import Path

from conftest import PYTHON, python_env
from mdmem.manager._journal import Journal, listing, new_turn_id, owner_alive, put_pending


def turn(text: str) -> dict[str, object]:
    return {"id": new_turn_id(), "messages": [["user", text]], "attempts": 0}


def test_ids_sort_in_acceptance_order() -> None:
    ids = [new_turn_id() for _ in range(50)]
    assert ids == sorted(ids) and len(set(ids)) == 50


def test_add_load_remove_and_privacy(tmp_path: Path) -> None:
    journal = Journal(str(tmp_path / "turns"))
    journal.open()
    record = turn("hello")
    turn_id = journal.add(record)
    assert journal.load(turn_id)["messages"] == [["user", "hello"]]
    path = Path(journal.mine) / f"{turn_id}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(journal.mine).stat().st_mode) == 0o700
    assert journal.owned() == [turn_id]
    journal.remove(turn_id)
    assert journal.owned() == []
    journal.close()
    assert not Path(journal.mine).exists()


def test_live_owner_keeps_its_turns(tmp_path: Path) -> None:
    alive = Journal(str(tmp_path / "turns"))
    alive.open()
    alive.add(turn("mine"))
    other = Journal(str(tmp_path / "turns"))
    other.open()
    assert other.adopt() == []
    assert owner_alive(str(tmp_path / "turns"), alive.owner)
    alive.close()
    other.close()


def test_closed_owner_with_turns_left_is_adopted(tmp_path: Path) -> None:
    first = Journal(str(tmp_path / "turns"))
    first.open()
    a, b = first.add(turn("a")), first.add(turn("b"))
    first.close()
    assert not owner_alive(str(tmp_path / "turns"), first.owner)
    second = Journal(str(tmp_path / "turns"))
    second.open()
    assert second.adopt() == [a, b]
    assert listing(str(tmp_path / "turns")) == {second.owner: [a, b]}


KILLED = textwrap.dedent(
    """
    import os, sys
    from mdmem.manager._journal import Journal, new_turn_id
    j = Journal(sys.argv[1]); j.open()
    for i in range(3):
        j.add({"id": new_turn_id(), "messages": [["user", str(i)]]})
    os.kill(os.getpid(), 9)
    """
)


def test_killed_owner_is_adopted_once(tmp_path: Path) -> None:
    root = str(tmp_path / "turns")
    subprocess.run([PYTHON, "-c", KILLED, root], env=python_env(), check=False)
    put_pending(root, turn("from a hook"))
    one, two = Journal(root), Journal(root)
    one.open()
    two.open()
    got_one, got_two = one.adopt(), two.adopt()
    assert len(got_one) + len(got_two) == 4
    assert not set(got_one) & set(got_two)
    assert sorted(os.listdir(os.path.join(root, "owners"))) == sorted(
        [f"{one.owner}.lock", f"{two.owner}.lock"]
    )


def test_fail_moves_aside(tmp_path: Path) -> None:
    journal = Journal(str(tmp_path / "turns"))
    journal.open()
    record = turn("bad")
    journal.add(record)
    where = journal.fail({**record, "errors": [{"error": "boom"}]})
    assert Path(where).parent.name == "failed"
    assert journal.owned() == []
