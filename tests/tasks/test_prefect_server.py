"""The kept empty Prefect database: only ever this user's own file, in a folder only this user can write."""

from __future__ import annotations

import os
import sqlite3
import tempfile

import pytest
from docpilot.tasks import prefect_server


@pytest.fixture
def temporary(tmp_path, monkeypatch):
    """The system's temporary folder, for these tests: a folder of the test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _database(path):
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE flow (id TEXT)")
    db.close()


def test_the_template_is_kept_in_a_folder_of_the_users_own(temporary):
    server_db = temporary / "server.db"
    _database(server_db)
    prefect_server._keep_template(server_db)
    template = prefect_server._template()
    assert template is not None and template.parent.parent == temporary and template.is_file()
    assert template.parent.stat().st_mode & 0o777 == 0o700
    copy = temporary / "copy.db"
    assert prefect_server._seed_database(copy) and copy.read_bytes() == template.read_bytes()


# Regression: the template sat in the shared temporary folder under a fixed name, so any
# user of the machine could plant the database a server started from, or a link written through.
@pytest.mark.parametrize("planted", ["open-folder", "others-folder", "linked-folder", "linked-file"])
def test_a_template_another_user_could_have_planted_is_never_used_nor_written(temporary, planted):
    folder = temporary / f"docpilot-prefect-db-{os.getuid()}"
    elsewhere = temporary / "elsewhere"
    elsewhere.mkdir()
    if planted == "linked-folder":
        folder.symlink_to(elsewhere)
    else:
        folder.mkdir(mode=0o700)
    if planted == "open-folder":
        folder.chmod(0o777)
    elif planted == "others-folder":
        if os.getuid() != 0:
            pytest.skip("giving a folder to another user needs root")
        os.chown(folder, 65534, 65534)
    foreign = elsewhere / "planted.sqlite"
    _database(foreign)
    name = f"{prefect_server.prefect.__version__}.sqlite"
    if planted == "linked-file":
        (folder / name).symlink_to(foreign)
    elif planted != "linked-folder":
        _database(folder / name)
    assert not prefect_server._seed_database(temporary / "copy.db")
    assert not (temporary / "copy.db").exists()
    server_db = temporary / "server.db"
    _database(server_db)
    prefect_server._keep_template(server_db)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["planted.sqlite"]  # nothing written through a link
