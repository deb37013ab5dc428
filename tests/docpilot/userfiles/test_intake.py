"""The one reader of files named by a user: what it reads, what it refuses, and what the refusal says."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from docpilot.config.loading import load_config
from docpilot.errors import ConfigError, CorpusError, InputError
from docpilot.userfiles.intake import CONFIG_FILE, DOCS_FILE, KINDS, FileKind, read_bytes, read_text

TINY = FileKind("test file", 16, "make it shorter")


def _refusal(path: Path, kind: FileKind = CONFIG_FILE, **kwargs) -> str:
    with pytest.raises(InputError) as caught:
        read_bytes(path, kind, **kwargs)
    return str(caught.value)


def test_a_regular_file_and_a_link_to_it_read_the_same(tmp_path):
    (tmp_path / "a.yaml").write_bytes(b"\xef\xbb\xbfkey: value\n")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "a.yaml")
    assert read_bytes(tmp_path / "link.yaml", CONFIG_FILE) == read_bytes(tmp_path / "a.yaml", CONFIG_FILE)
    assert read_text(tmp_path / "link.yaml", CONFIG_FILE) == "key: value\n"  # the byte-order mark dropped


def test_a_file_that_reports_no_size_is_read_to_its_end():
    # Files under /proc are regular files of size 0 whose text exists only when read.
    text = read_text(Path("/proc/self/status"), CONFIG_FILE)
    assert text.startswith("Name:") and "Pid:" in text


def test_a_file_at_the_limit_is_read_and_one_byte_more_is_refused(tmp_path):
    (tmp_path / "edge").write_bytes(b"x" * 16)
    assert read_bytes(tmp_path / "edge", TINY) == b"x" * 16
    (tmp_path / "over").write_bytes(b"x" * 17)
    message = _refusal(tmp_path / "over", TINY)
    assert message.startswith(f"{tmp_path / 'over'}: is 17 bytes, more than the 16 bytes a test file may hold")
    assert message.endswith("fix: make it shorter")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    done = threading.Event()
    outcome: list[str] = []

    def read() -> None:
        outcome.append(_refusal(tmp_path / "pipe"))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(10):
        with open(tmp_path / "pipe", "wb"):  # release the blocked open so the thread can end
            pass
        pytest.fail("opening the FIFO blocked")
    assert "pipe: is a named pipe (FIFO), not a regular file" in outcome[0]


def test_a_character_device_is_refused(tmp_path):
    assert "/dev/null: is a character device, not a regular file" in _refusal(Path("/dev/null"))


def test_a_socket_is_refused(tmp_path):
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        assert "sock: is a socket, not a regular file" in _refusal(tmp_path / "sock")


def test_a_folder_a_missing_file_and_a_link_loop_each_say_so(tmp_path):
    assert "is a folder, not a file" in _refusal(tmp_path)
    assert _refusal(tmp_path / "nope.yaml", missing="write one").endswith("nope.yaml: file not found\n  fix: write one")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert "loop: is a symbolic link that leads back to itself" in _refusal(tmp_path / "loop")


def test_the_error_is_the_callers_kind(tmp_path):
    with pytest.raises(CorpusError):
        read_bytes(tmp_path, DOCS_FILE, error=CorpusError)


def test_not_utf8_names_the_line(tmp_path):
    (tmp_path / "latin.yaml").write_bytes(b"a: 1\nb: caf\xe9\n")
    with pytest.raises(InputError) as caught:
        read_text(tmp_path / "latin.yaml", CONFIG_FILE)
    assert caught.value.line == 2 and "byte 0xe9" in str(caught.value)


def test_every_kind_has_a_cap_in_whole_mebibytes():
    assert {kind.name: kind.limit // 2**20 for kind in KINDS} == {
        "config file": 1, "golden set": 64, "probe file": 64, "docs file": 8, "report": 512}


# Regression: a named pipe at configs/docpilot.yaml was passed over, and the defaults ran without a word.
def test_a_fifo_at_the_default_config_path_is_refused_not_skipped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    os.mkfifo(tmp_path / "configs" / "docpilot.yaml")
    with pytest.raises(ConfigError, match=r"configs/docpilot.yaml: is a named pipe \(FIFO\)"):
        load_config(env={})
