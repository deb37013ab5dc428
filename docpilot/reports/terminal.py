"""Data made safe to print on a terminal: control characters shown as escapes, never obeyed.

A record id, a question or a model's answer comes from files and services the user
does not control. Printed raw, an escape sequence in one can retitle the terminal,
clear the screen, hide text or, on some terminals, write to the clipboard. Every
piece of data a command prints passes through ``clean`` first; line breaks and tabs
are kept, everything else below U+0020, DEL, the C1 range and the bidirectional
overrides are written as ``\\xNN`` or ``\\uNNNN``.
"""

from __future__ import annotations

_KEPT = {"\n", "\t"}
_BIDI = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))
_TABLE = {
    code: (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    for code in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI]
    if chr(code) not in _KEPT
}


def clean(text: object) -> str:
    """``str(text)`` with every control character written as a visible escape."""
    return str(text).translate(_TABLE)
