"""A BERT model folder's files: reading a safetensors file by its documented layout, and their digest.

The safetensors layout is an 8-byte little-endian header length, a JSON header naming
each tensor's dtype, shape and byte offsets, then the raw little-endian tensors; the
file is memory-mapped, so loading costs no copy.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import mmap
import struct
from pathlib import Path

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


class ModelFileError(ValueError):
    """A model file is missing, unreadable or not what a BERT encoder needs."""


MODEL_FILES = ("config.json", "sentence_bert_config.json", "vocab.txt", "model.safetensors")
"""The files of a model folder ``BertEncoder`` reads; the vectors depend on each of them."""


def model_digest(folder: Path) -> str:
    """sha256 over the model files ``BertEncoder`` reads from ``folder`` (an absent optional one counts as absent).

    Hashing all-MiniLM-L6-v2's weights is too slow to repeat on every load, so it is done
    once per process and file version: kept by each file's path, size and modification time.
    """
    digest = hashlib.sha256()
    for name in MODEL_FILES:
        path = folder / name
        try:
            stat = path.stat()
        except FileNotFoundError:
            digest.update(f"{name}\x00absent\x01".encode())
            continue
        except OSError as exc:
            raise ModelFileError(f"cannot read {path}: {exc}") from None
        digest.update(f"{name}\x00{_file_digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)}\x01".encode())
    return digest.hexdigest()


@functools.cache
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    # size and mtime_ns are the cache key: a file rewritten in place is hashed again.
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as exc:
        raise ModelFileError(f"cannot read {path}: {exc}") from None


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file, as read-only arrays over a memory map."""
    try:
        with path.open("rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"cannot read {path}: {exc}") from None
    if len(mapped) < 8:
        raise ModelFileError(f"{path} is too short to be a safetensors file")
    (length,) = struct.unpack("<Q", mapped[:8])
    try:
        header = json.loads(mapped[8 : 8 + length])
    except ValueError as exc:
        raise ModelFileError(f"{path} has no readable safetensors header: {exc}") from None
    start = 8 + length
    tensors: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = _DTYPES.get(entry.get("dtype"))
            begin, end = (int(n) for n in entry["data_offsets"])
            shape = tuple(int(n) for n in entry["shape"])
        except (AttributeError, KeyError, TypeError, ValueError):
            raise ModelFileError(f"{path}: tensor {name} has no dtype, shape and data offsets; the file is damaged") from None
        if dtype is None:
            raise ModelFileError(f"{path}: tensor {name} has dtype {entry.get('dtype')!r}, not one of {sorted(_DTYPES)}")
        if end - begin != math.prod(shape) * np.dtype(dtype).itemsize or begin < 0 or start + end > len(mapped):
            raise ModelFileError(f"{path}: tensor {name} does not fit its offsets; the file is damaged")
        tensors[name] = np.frombuffer(mapped, dtype=dtype, count=math.prod(shape), offset=start + begin).reshape(shape)
    return tensors
