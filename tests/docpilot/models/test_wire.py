"""Reading server-sent events from a body cut into pieces anywhere (docpilot/models/wire.py)."""

from __future__ import annotations

import pytest

from docpilot.net.sse import EventReader

# Every line end, a comment, a multi-line event, fields other than data, a two-byte and a
# three-byte character, and U+2028, which must not end a line.
BODY = (
    ": keep-alive\r\n"
    "\r\n"
    'data: {"a": "Café"}\n'
    "\n"
    "event: message\r"
    "id: 7\r"
    'data: {"b": "€ 5"}\r'
    "\r"
    "data: first line\r\n"
    "data:second line\r\n"
    "retry: 1000\r\n"
    "\r\n"
    'data: {"c": "one\u2028two"}\n\n'
    "data: [DONE]\n\n"
).encode()
EVENTS = ['{"a": "Café"}', '{"b": "€ 5"}', "first line\nsecond line", '{"c": "one\u2028two"}', "[DONE]"]


def _read(pieces: list[bytes]) -> list[str]:
    reader = EventReader()
    events = [data for piece in pieces for data in reader.feed(piece)]
    return events + reader.close()


def test_a_whole_body_gives_its_events() -> None:
    assert _read([BODY]) == EVENTS


def test_a_body_cut_at_any_point_gives_the_same_events() -> None:
    # Cuts fall inside "\r\n" pairs, inside UTF-8 characters and inside lines.
    for cut in range(1, len(BODY)):
        assert _read([BODY[:cut], BODY[cut:]]) == EVENTS, cut


def test_a_body_read_one_byte_at_a_time_gives_the_same_events() -> None:
    assert _read([BODY[i : i + 1] for i in range(len(BODY))]) == EVENTS


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_each_line_end_alone_separates_events(end: str) -> None:
    body = f"data: one{end}{end}data: two{end}data: more{end}{end}".encode()
    assert _read([body]) == ["one", "two\nmore"]


def test_a_line_far_longer_than_a_read_is_one_line() -> None:
    text = "x" * 300_000
    body = f"data: {text}\n\n".encode()
    assert _read([body[i : i + 1000] for i in range(0, len(body), 1000)]) == [text]


def test_end_of_body_keeps_an_unfinished_done_mark_and_drops_other_unfinished_events() -> None:
    assert _read([b"data: one\n\ndata: [DONE]\n"]) == ["one", "[DONE]"]
    assert _read([b"data: one\n\ndata: [DONE]"]) == ["one", "[DONE]"]
    assert _read([b"data: one\n\ndata: two\n"]) == ["one"]
    assert _read([b"data: one\r"]) == []


def test_events_are_given_as_soon_as_their_blank_line_arrives() -> None:
    reader = EventReader()
    assert reader.feed(b"data: one\n") == []
    assert reader.feed(b"\ndata: tw") == ["one"]
    assert reader.feed(b"o\n\n") == ["two"]
    assert reader.close() == []


def test_named_events_carry_their_names_and_the_default_is_message() -> None:
    # The client of a DocPilot server reads its named events with the same reader.
    reader = EventReader()
    body = b"event: token\r\ndata: {\"text\": \"a\"}\r\n\r\ndata: plain\n\nevent: done\ndata: {}\n\n"
    assert reader.feed_named(body) == [("token", '{"text": "a"}'), ("message", "plain"), ("done", "{}")]
