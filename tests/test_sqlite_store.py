"""Private files and the cache secret shared by the judge and verification caches."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import stat
import threading

import pytest

from rewardkit.sqlite_store import (
    _wal,
    cache_secret,
    connect,
    private_dir,
    private_path,
    seal,
    unsealed,
    write,
)


def _secret(q) -> None:
    q.put(cache_secret())


def test_cache_secret_is_private_stable_and_race_free(tmp_path, monkeypatch):
    monkeypatch.delenv("REWARDKIT_CACHE_SECRET", raising=False)
    monkeypatch.setenv("REWARDKIT_CACHE", str(tmp_path / "rk"))
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_secret, args=(q,)) for _ in range(4)]
    for p in procs:
        p.start()
    got = {q.get(timeout=30) for _ in procs}
    for p in procs:
        p.join(30)
    assert len(got) == 1 and got == {cache_secret()}  # racing first uses agree on one key
    key = tmp_path / "rk" / "cache_secret.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert len(got.pop()) == 64 and not list(key.parent.glob(".cache_secret*"))  # no temp files left
    monkeypatch.setenv("REWARDKIT_CACHE_SECRET", "shared")
    assert cache_secret() == b"shared"


def test_an_empty_secret_file_is_refused_not_used_as_an_empty_key(tmp_path, monkeypatch):
    # HMAC under b"" is a key anyone has: entries planted by anyone would verify
    monkeypatch.delenv("REWARDKIT_CACHE_SECRET", raising=False)
    monkeypatch.setenv("REWARDKIT_CACHE", str(tmp_path))
    key = tmp_path / "cache_secret.key"
    key.write_text(" \n")
    with pytest.raises(ValueError, match=f"^{key} is empty, so cache entries could not be sealed: delete it"):
        cache_secret()
    monkeypatch.setenv("REWARDKIT_CACHE_SECRET", "")  # an empty variable is unset: the file decides
    with pytest.raises(ValueError, match="is empty"):
        cache_secret()
    key.unlink()
    assert len(cache_secret()) == 64  # deleted: a new key is made


def test_private_path_leaves_existing_modes_alone(tmp_path):
    (tmp_path / "open").mkdir(mode=0o755)
    p = private_path(tmp_path / "open" / "a" / "x.db")
    assert stat.S_IMODE((tmp_path / "open").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "open" / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    p.write_text("keep")
    assert private_path(p).read_text() == "keep"


def test_seal_binds_key_and_value():
    mac = seal(b"s", "k", "v")
    assert not unsealed(b"s", "k", "v", mac)
    assert unsealed(b"s", "k", "v2", mac) and unsealed(b"s", "k2", "v", mac) and unsealed(b"t", "k", "v", mac)
    assert seal(b"s", "k:", "v") != seal(b"s", "k", ":v")  # the key/value boundary is unambiguous


def _writing(path) -> sqlite3.Connection:
    """A connection holding a write transaction on a new database still in rollback mode: another process
    creating the same cache a moment earlier (what ``test_several_processes_share_one_cache`` met in CI)."""
    c = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    c.execute("CREATE TABLE t (a)")
    c.execute("BEGIN IMMEDIATE")
    c.execute("INSERT INTO t VALUES (1)")
    return c


def test_a_database_another_connection_writes_is_switched_to_wal_once_it_is_free(tmp_path):
    """SQLite answers the switch to WAL with 'database is locked' at once there, without its busy handler: the
    cache's constructor failed instead of waiting for the other process's write."""
    other = _writing(tmp_path / "c.sqlite3")
    done = threading.Event()
    threading.Thread(target=lambda: (done.wait(30), other.execute("COMMIT"))).start()
    threading.Timer(0.2, done.set).start()
    with connect(tmp_path / "c.sqlite3", 60.0) as conn:
        assert done.is_set()  # it waited for the write, then switched
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT a FROM t").fetchall() == [(1,)]
    other.close()


def test_a_database_locked_past_the_timeout_is_an_error(tmp_path):
    other = _writing(tmp_path / "c.sqlite3")
    try:
        with pytest.raises(sqlite3.OperationalError, match="database is locked"), connect(tmp_path / "c.sqlite3", 0.3):
            pass
    finally:
        other.execute("COMMIT")
        other.close()


def test_connect_waits_its_timeout_commits_each_statement_and_closes(tmp_path):
    path = tmp_path / "c.sqlite3"
    with connect(path, 2.5) as conn:
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (2500,)  # milliseconds
        conn.execute("CREATE TABLE t (a)")
        conn.execute("INSERT INTO t VALUES (1)")  # autocommit: no transaction left open
        assert not conn.in_transaction
        assert sqlite3.connect(path).execute("SELECT a FROM t").fetchall() == [(1,)]  # seen by another reader
    with pytest.raises(sqlite3.ProgrammingError):  # one connection per operation: closed after the block
        conn.execute("SELECT 1")
    with pytest.raises(KeyError), connect(path, 1.0) as failing:
        raise KeyError("body")
    with pytest.raises(sqlite3.ProgrammingError):  # closed when the body raises, too
        failing.execute("SELECT 1")


def test_write_is_all_or_nothing(tmp_path):
    with connect(tmp_path / "c.sqlite3", 1.0) as conn:
        conn.execute("CREATE TABLE t (a TEXT NOT NULL)")
        with pytest.raises(sqlite3.IntegrityError):
            write(conn, "INSERT INTO t VALUES (?)", [("x",), (None,)])  # the second row breaks NOT NULL
        assert not conn.in_transaction and conn.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)
        write(conn, "INSERT INTO t VALUES (?)", [("y",), ("z",)])  # the connection is usable again
        assert not conn.in_transaction
    assert sqlite3.connect(tmp_path / "c.sqlite3").execute("SELECT a FROM t ORDER BY a").fetchall() == [("y",), ("z",)]


def test_private_dir_creates_each_missing_folder_0700(tmp_path):
    d = private_dir(str(tmp_path / "a" / "b" / "c"))
    assert d == tmp_path / "a" / "b" / "c" and d.is_dir()
    assert [stat.S_IMODE(p.stat().st_mode) for p in (d, d.parent, d.parent.parent)] == [0o700] * 3
    assert private_dir(d) == d  # existing: nothing to do, no error
    assert private_path(str(tmp_path / "f.db")) == tmp_path / "f.db"


def test_a_key_file_written_by_hand_and_the_variable_agree(tmp_path, monkeypatch):
    """``echo s3cret > cache_secret.key`` and ``REWARDKIT_CACHE_SECRET=s3cret`` must seal alike (the newline is
    not part of the key); an existing key file is used as it is, never replaced; an empty variable is unset."""
    monkeypatch.setenv("REWARDKIT_CACHE", str(tmp_path))
    (tmp_path / "cache_secret.key").write_text("s3cret\n")
    monkeypatch.setenv("REWARDKIT_CACHE_SECRET", "")
    assert cache_secret() == b"s3cret"
    assert (tmp_path / "cache_secret.key").read_text() == "s3cret\n"
    monkeypatch.setenv("REWARDKIT_CACHE_SECRET", "s3cret")
    assert cache_secret() == b"s3cret"


def test_seal_is_a_hex_sha256_mac_and_anything_else_fails():
    mac = seal(b"s", "k", "v")
    assert len(mac) == 64 and set(mac) <= set("0123456789abcdef")
    assert seal(b"s", "k", "v") == mac and seal(b"s", "k", "w") != mac  # deterministic, binds the value
    assert unsealed(b"s", "k", "v", mac[:-1]) and unsealed(b"s", "k", "v", mac + "0")
    assert unsealed(b"s", "k", "v", mac.upper()) and unsealed(b"s", "k", "v", "")
    assert unsealed(b"s", "k", "v", "é" * 64) and unsealed(b"s", "k", "v", None)  # a planted mac fails, never raises
    assert seal(b"s", "ké", "vé") != seal(b"s", "ke", "ve") and not unsealed(b"s", "ké", "vé", seal(b"s", "ké", "vé"))


def test_an_error_other_than_busy_is_raised_at_once(tmp_path):
    """Only SQLITE_BUSY is waited out: a database whose WAL file cannot be created fails now, not after the
    timeout (here the ``-wal`` path is taken by a folder)."""
    import time

    path = tmp_path / "c.sqlite3"
    sqlite3.connect(path).execute("CREATE TABLE t (a)").connection.close()
    (tmp_path / "c.sqlite3-wal").mkdir()
    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError) as err, connect(path, 30.0):
        pass
    assert "locked" not in str(err.value) and time.monotonic() - t0 < 5


def test_the_wait_for_a_busy_database_ends_soon_after_the_write(tmp_path):
    """Retries start within milliseconds and are at most 50 ms apart: a writer that holds a new database for 0.7 s
    delays the next connection by about that, not by a backoff step grown past the wait (1 s or more)."""
    import time

    other = _writing(tmp_path / "c.sqlite3")
    released: list[float] = []

    def commit_later() -> None:
        time.sleep(0.7)
        released.append(time.monotonic())
        other.execute("COMMIT")

    threading.Thread(target=commit_later).start()
    with connect(tmp_path / "c.sqlite3", 60.0) as conn:
        late = time.monotonic() - released[0]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    other.close()
    assert late < 0.2, late


class _Conn:
    """A connection whose first ``PRAGMA journal_mode`` calls fail with the given errors."""

    def __init__(self, errors):
        self.errors, self.calls = list(errors), 0

    def execute(self, sql):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return sqlite3.connect(":memory:").execute("SELECT 'wal'")


def _error(message, code=None):
    e = sqlite3.OperationalError(message)
    if code is not None:
        e.sqlite_errorcode = code
    return e


def test_busy_is_known_by_its_code_its_extended_codes_and_on_python_3_10_by_its_message():
    """Python 3.10 (supported) raises OperationalError without ``sqlite_errorcode`` and has no ``SQLITE_BUSY``:
    the wait for a busy new database raised AttributeError there. SQLITE_BUSY_RECOVERY (261 = 5 | 1 << 8) and
    SQLITE_BUSY_SNAPSHOT (517 = 5 | 2 << 8) are busy as well; SQLITE_LOCKED (6) and SQLITE_IOERR (10) are not."""
    busy = [_error("database is locked"), _error("database is locked", 5), _error("busy", 5),
            _error("database is locked", 261), _error("database is locked", 517)]
    conn = _Conn(busy)
    _wal(conn, 30.0)
    assert conn.calls == 6  # five waited out, then WAL
    # where there is a code it decides, whatever the message says
    for e in (_error("database table is locked", 6), _error("database is locked", 6), _error("disk I/O error", 10),
              _error("disk I/O error")):
        with pytest.raises(sqlite3.OperationalError) as err:
            _wal(_Conn([e]), 30.0)
        assert err.value is e
