"""The language model loaded once by a helper process and mapped, not copied, by the processes that detect.

py3langid's model is an LZMA-packed file: loading it is about 0.8 s of decompression,
and the result is some 45 MB of tables. A run whose variants each run in a forked
process (``run.forks``) would pay that once per variant, or make the fork wait for it.
Instead a helper process loads it as usual and writes the loaded tables, raw, into a
file no other process can open (unlinked from the start, gone with the last process
that holds it); each process then maps the file and builds the identifier on views of
it: a few milliseconds, and one copy of the tables in memory for all of them.

The file: its first 8 bytes hold the length of a JSON header that follows them (0 until
the helper has written everything, and for good if it failed); the header gives each
table's offset, type and shape. The helper holds the write end of a pipe (``done``)
and nothing else does, so the pipe reads as ended, in every process holding its read
end, once the helper has exited.

    python -c "…; write_tables(FD, load_model)"     the helper itself (``SharedModel`` starts it)
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import select
import signal
import subprocess
import sys
import tempfile
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np

_ALIGN = 64


class SharedModel:
    """The helper process and its file, seen from the process that started it and from that process's forks."""

    WAIT_S = 30.0
    """How long a process waits for the helper (a load takes about a second) before loading the model itself."""

    def __init__(self) -> None:
        from docpilot.processes import start_child

        self.file = tempfile.TemporaryFile(prefix="docpilot-langid-")  # noqa: SIM115 (closed by ``close``)
        done, done_write = os.pipe()
        self.done = os.fdopen(done, "rb", buffering=0)
        self.helper = start_child(
            [sys.executable, "-c", "import sys; from docpilot.assistant.shared_model import write_tables; "
             "from docpilot.assistant.language import load_model; write_tables(int(sys.argv[1]), load_model)",
             str(self.file.fileno())],
            death_signal=signal.SIGKILL, pass_fds=(self.file.fileno(), done_write),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(done_write)

    def identifier(self, languages: list[str]) -> Any | None:
        """An identifier over the helper's tables, restricted to ``languages``; None when the helper failed or is stuck."""
        with contextlib.suppress(OSError, ValueError):
            ended, _, _ = select.select([self.done], [], [], self.WAIT_S)
            if not ended:
                return None
        fd = self.file.fileno()
        size = int.from_bytes(os.pread(fd, 8, 0), "little")
        if not size:
            return None
        header = json.loads(os.pread(fd, size, 8))
        mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
        tables = {name: _view(mapped, spec) for name, spec in header["tables"].items()}

        from py3langid.langid import LanguageIdentifier

        identifier = LanguageIdentifier(
            tables["ptc"], tables["pc"], header["classes"], tables["nextmove"], tables["output"],
            norm_probs=True, tk_row=tables["row"],
        )
        identifier.set_languages(languages)
        return identifier

    def close(self) -> None:
        """Close this process's handles and end the helper (the starting process, once its forks are done)."""
        self.done.close()
        self.file.close()
        if self.helper.poll() is None:
            self.helper.kill()
        self.helper.wait()


def write_tables(fd: int, load: Callable[[], Any]) -> None:
    """The helper: load the model as usual (``load``) and write its tables, raw, into ``fd`` (see the module's doc)."""
    identifier = load()
    tables: dict[str, Any] = {
        "ptc": np.ascontiguousarray(identifier.nb_ptc), "pc": np.ascontiguousarray(identifier.nb_pc),
        "nextmove": identifier.tk_nextmove, "output": array("i", identifier.tk_output), "row": identifier.tk_row,
    }
    specs, blobs, offset = {}, [], 0
    for name, table in tables.items():
        spec = ({"kind": "numpy", "dtype": table.dtype.str, "shape": list(table.shape)}
                if isinstance(table, np.ndarray) else {"kind": "array", "typecode": table.typecode})
        data = table.tobytes()
        specs[name] = {**spec, "offset": offset, "bytes": len(data)}
        blobs.append(data)
        offset += -(-len(data) // _ALIGN) * _ALIGN
    # The tables start after the header, whose offsets grow by the header's own room: 20
    # digits an offset leave room for any file.
    room = len(json.dumps({"classes": list(identifier.nb_classes), "tables": specs})) + 20 * len(specs)
    start = -(-(8 + room) // _ALIGN) * _ALIGN
    for spec in specs.values():
        spec["offset"] += start
    header = json.dumps({"classes": list(identifier.nb_classes), "tables": specs}).encode()
    for spec, data in zip(specs.values(), blobs, strict=True):
        os.pwrite(fd, data, spec["offset"])
    os.pwrite(fd, header, 8)
    os.pwrite(fd, len(header).to_bytes(8, "little"), 0)  # last: the tables are whole


def _view(mapped: mmap.mmap, spec: dict[str, Any]):
    """One table as a view of the mapped file: a numpy array, or a memoryview indexed like the stdlib array."""
    start, size = spec["offset"], spec["bytes"]
    if spec["kind"] == "numpy":
        dtype = np.dtype(spec["dtype"])
        return np.frombuffer(mapped, dtype=dtype, count=size // dtype.itemsize, offset=start).reshape(spec["shape"])
    return memoryview(mapped)[start:start + size].cast(spec["typecode"])
