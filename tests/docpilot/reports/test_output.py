"""The one output writer: what it refuses to replace, the mode it writes, and a full disk."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.errors import ReportError
from docpilot.reports.output import check_output, file_mode, write_atomically
from tests.conftest import DATA

PIPELINE = DATA / "pipeline"
BASE = ["--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml"), "--orchestrator", "inline"]


# Regression: `--out /dev/full` printed "report: /dev/full", exit 0, and made /dev/full a JSON file.
@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
def test_a_device_is_never_replaced(device):
    if not Path(device).exists():
        pytest.skip(f"{device} is not on this system")
    with pytest.raises(ReportError, match="not a regular file"):
        write_atomically(device, "{}")
    assert stat.S_ISCHR(os.stat(device).st_mode)


def test_a_pipe_a_folder_and_a_link_to_a_device_are_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link.json"
    link.symlink_to("/dev/null")
    for target, says in ((fifo, "not a regular file"), (tmp_path, "is a folder"), (link, "not a regular file")):
        with pytest.raises(ReportError, match=says):
            write_atomically(target, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "pipe"]  # no temporary file left


def test_a_regular_file_is_replaced_whole_and_missing_folders_are_made(tmp_path):
    target = tmp_path / "a" / "b" / "r.json"
    write_atomically(target, "first")
    write_atomically(target, "second")
    assert target.read_text() == "second" and [p.name for p in target.parent.iterdir()] == ["r.json"]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o000, 0o644)])
def test_every_output_gets_0644_less_the_umask(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        assert file_mode() == mode
        written = write_atomically(tmp_path / "r.html", "<p>")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(written.stat().st_mode) == mode


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_folder_is_refused_before_anything(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o500)
    with pytest.raises(ReportError, match="not writable"):
        check_output(folder / "r.json")


def test_eval_refuses_a_device_output_before_the_run(tmp_path):
    if not Path("/dev/null").exists():
        pytest.skip("no /dev/null")
    for option in ("--out", "--html", "--junit", "--markdown"):
        extra = [] if option == "--out" else ["--out", str(tmp_path / "r.json")]
        result = CliRunner().invoke(main, ["eval", *BASE, "--gate-only", *extra, option, "/dev/null"])
        assert result.exit_code == 2, (option, result.output)
        assert "/dev/null" in result.stderr and "never replaced" in result.stderr
        assert not (tmp_path / "r.json").exists()  # refused before the run, so no report either
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB file system, to fill; needs root to mount."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_is_one_line_with_the_fix_and_leaves_nothing(tiny_disk):
    with pytest.raises(ReportError, match="disk is full") as caught:
        write_atomically(tiny_disk / "r.json", "x" * 200_000)
    assert "\n" not in str(caught.value) and list(tiny_disk.iterdir()) == []


def test_eval_on_a_full_disk_exits_2_with_the_fix(tiny_disk, tmp_path):
    (tiny_disk / "filler").write_bytes(b"\0" * 60_000)
    result = CliRunner().invoke(main, ["eval", *BASE, "--gate-only", "--out", str(tiny_disk / "r.json")])
    assert result.exit_code == 2, result.output
    assert "disk is full" in result.stderr and "Traceback" not in result.output
