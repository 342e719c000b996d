"""``_unixsock.Reader``: exact reads through one buffer, over a real socket pair."""

from __future__ import annotations

import socket
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdmem import _unixsock


def _send(sock: socket.socket, payload: bytes, chunks: list[int]) -> None:
    """Send ``payload`` in pieces of the given sizes (the rest at the end), then close."""
    try:
        at = 0
        for size in chunks:
            sock.sendall(payload[at : at + size])
            at += size
        sock.sendall(payload[at:])
    finally:
        sock.close()


@settings(max_examples=60, deadline=None)
@given(
    fields=st.lists(st.binary(max_size=300), max_size=40),
    chunks=st.lists(st.integers(1, 700), max_size=20),
)
def test_fields_read_through_the_buffer_are_the_bytes_sent_in_any_pieces(
    fields: list[bytes], chunks: list[int]
) -> None:
    payload = b"".join(fields)
    ours, theirs = socket.socketpair()
    sender = threading.Thread(target=_send, args=(theirs, payload, chunks))
    sender.start()
    try:
        read = _unixsock.Reader(ours).exact
        assert [read(len(field)) for field in fields] == fields
    finally:
        sender.join(5)
        ours.close()


def test_a_large_field_and_a_close_before_the_end() -> None:
    payload = bytes(range(256)) * 1024  # 256 KiB: more than one buffer's read
    ours, theirs = socket.socketpair()
    sender = threading.Thread(target=_send, args=(theirs, payload + b"tail", [1000]))
    sender.start()
    try:
        read = _unixsock.Reader(ours).exact
        assert read(3) == payload[:3]
        assert read(len(payload) - 3) == payload[3:]
        assert read(4) == b"tail"
        with pytest.raises(ConnectionError):
            read(1)  # the other side closed: never a short answer
    finally:
        sender.join(5)
        ours.close()
