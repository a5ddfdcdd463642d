"""The verification cache: private files and sealed entries (a planted or altered verdict is a miss)."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

from rewardkit.jury.lean.cache import VerificationCache, cache_key


def test_created_private(tmp_path):
    path = tmp_path / "lean" / "verify.sqlite"
    VerificationCache(path, secret=b"s").put("k", "verified", "ok")
    assert stat.S_IMODE((tmp_path / "lean").stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_planted_and_altered_verdicts_are_misses(tmp_path, caplog):
    path = tmp_path / "verify.sqlite"
    key = cache_key("theorem t : 1 = 1", "rfl", {"checker": "lean"})
    # an attacker without the secret marks a wrong proof as verified
    VerificationCache(path, secret=b"attacker").put(key, "verified", "forged", {"axioms": []})
    mine = VerificationCache(path, secret=b"mine")
    with caplog.at_level("WARNING", logger="rewardkit.cache"):
        assert mine.get(key) is None
    assert (mine.rejected, mine.misses, mine.hits) == (1, 1, 0) and "integrity" in caplog.text
    mine.put(key, "rejected", "sorry", {"axioms": ["sorryAx"]})
    assert mine.get(key).outcome == "rejected"
    with sqlite3.connect(path) as db:  # flip the stored outcome in place, keeping the seal
        db.execute("UPDATE verify_v2 SET outcome = 'verified'")
    assert mine.get(key) is None and mine.rejected == 2
    with sqlite3.connect(path) as db:  # or the detail
        db.execute("UPDATE verify_v2 SET outcome = 'rejected', detail = '{\"axioms\": []}'")
    assert mine.get(key) is None and mine.rejected == 3


def test_one_secret_shares_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REWARDKIT_CACHE_SECRET", "team-secret")
    a, b = VerificationCache(tmp_path / "v.sqlite"), VerificationCache(tmp_path / "v.sqlite")
    a.put("k", "verified", "ok", {"n": 1})
    assert b.get("k").detail == {"n": 1} and b.rejected == 0


def test_a_sealed_entry_moved_to_another_key_is_a_miss(tmp_path):
    """The seal binds the entry to its key: a genuine 'verified' row copied under another claim's key is refused."""
    path = tmp_path / "v.sqlite"
    cache = VerificationCache(path, secret=b"s")
    proven, other = cache_key("1 + 1 = 2", "2", {}), cache_key("1 + 1 = 3", "3", {})
    cache.put(proven, "verified", "Lean accepted a proof", {"proof": "rfl"})
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO verify_v2 SELECT ?, outcome, reason, detail, created, mac FROM verify_v2", (other,))
    assert cache.get(other) is None and cache.rejected == 1
    assert cache.get(proven).detail == {"proof": "rfl"}
    with sqlite3.connect(path) as db:  # the reason is sealed too
        db.execute("UPDATE verify_v2 SET reason = 'x' WHERE key = ?", (proven,))
    assert cache.get(proven) is None and cache.rejected == 2


def test_hits_misses_replacement_and_round_trip(tmp_path):
    cache = VerificationCache(tmp_path / "v.sqlite", secret=b"s")
    assert cache.hit_rate == 0.0 and len(cache) == 0
    assert cache.get("k") is None and (cache.hits, cache.misses, cache.rejected) == (0, 1, 0)
    cache.put("k", "inconclusive", "no proof accepted in 16 attempt(s)")  # no detail: an empty one
    got = cache.get("k")
    assert (got.outcome, got.reason, got.detail) == ("inconclusive", "no proof accepted in 16 attempt(s)", {})
    cache.put("k", "verified", "Lean accepted a proof after 3 attempt(s)", {"proof": "by simp -- ∀ é", "n": 3})
    assert len(cache) == 1  # the same key: replaced, not added
    got = cache.get("k")
    assert (got.outcome, got.detail) == ("verified", {"proof": "by simp -- ∀ é", "n": 3})
    assert (cache.hits, cache.misses) == (2, 1) and cache.hit_rate == 2 / 3
    cache.put("j", "verified", "ok", {"path": tmp_path})  # what JSON cannot hold is stored as its text
    assert cache.get("j").detail == {"path": str(tmp_path)} and len(cache) == 2
    assert cache.get("other") is None and (cache.hits, cache.misses) == (3, 2)
    assert VerificationCache(tmp_path / "v.sqlite", secret=b"s").get("k").outcome == "verified"  # on disk


def test_cache_key_names_the_claim_and_every_setting():
    base = cache_key("If x + 2 = 5, what is x?", "3", {"k_prove": 16, "seed": None, "checker": "repl"})
    assert len(base) == 64 and int(base, 16) >= 0  # a sha256 hex digest
    assert base == cache_key("If x + 2 = 5, what is x?", "3", {"checker": "repl", "seed": None, "k_prove": 16})
    others = [cache_key("If x + 2 = 5, what is x?", "03", {"k_prove": 16, "seed": None, "checker": "repl"}),
              cache_key("If x + 2 = 6, what is x?", "3", {"k_prove": 16, "seed": None, "checker": "repl"}),
              cache_key("If x + 2 = 5, what is x?", "3", {"k_prove": 8, "seed": None, "checker": "repl"}),
              cache_key("If x + 2 = 5, what is x?", "3", {"k_prove": 16, "seed": 0, "checker": "repl"}),
              cache_key("If x + 2 = 5, what is x?", "3", {"k_prove": 16, "seed": None}),
              cache_key("3", "If x + 2 = 5, what is x?", {"k_prove": 16, "seed": None, "checker": "repl"})]
    assert len({base, *others}) == 7
    # a setting JSON cannot hold (a path) is keyed by its text, not refused
    assert cache_key("p", "a", {"lean": Path("/opt/lean")}) != cache_key("p", "a", {"lean": Path("/opt/lean4")})


def test_a_planted_row_that_is_not_text_is_a_miss_not_a_crash(tmp_path, caplog):
    """A row whose fields are bytes, or text that is not UTF-8, fails its integrity check like any other planted
    row; before, json.dumps raised TypeError (bytes) and sqlite3 OperationalError (not UTF-8) in every batch."""
    path = tmp_path / "v.sqlite"
    cache = VerificationCache(path, secret=b"s")
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO verify_v2 VALUES ('a', ?, 'r', '{}', 0, 'x')", (b"verified",))
        db.execute("INSERT INTO verify_v2 VALUES ('b', CAST(X'ff76' AS TEXT), 'r', '{}', 0, 'x')")
        db.execute("INSERT INTO verify_v2 VALUES ('c', 'verified', 'r', '{}', 0, ?)", (b"\xff\x00",))
        db.execute("INSERT INTO verify_v2 VALUES ('d', 'verified', 'r', '{}', 0, 'é')")
    with caplog.at_level("WARNING", logger="rewardkit.cache"):
        assert [cache.get(k) for k in "abcd"] == [None] * 4
    assert (cache.rejected, cache.misses, cache.hits) == (4, 4, 0) and caplog.text.count("integrity") == 4
    cache.put("b", "verified", "ok", {"proof": "rfl"})  # and the key is usable again
    assert cache.get("b").detail == {"proof": "rfl"}


def test_a_planted_table_without_not_null_gives_misses_not_crashes(tmp_path):
    # CREATE TABLE IF NOT EXISTS keeps a table someone made first: its NULL fields raised AttributeError
    path = tmp_path / "v.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE verify_v2 (key TEXT PRIMARY KEY, outcome TEXT, reason TEXT, detail TEXT, "
                   "created REAL, mac TEXT)")
        db.executemany("INSERT INTO verify_v2 VALUES (?, ?, ?, ?, 0, ?)",
                       [("a", None, "r", "{}", "x"), ("b", "verified", "r", None, "x"), ("c", "verified", "r", "{}", None)])
    cache = VerificationCache(path, secret=b"s")
    assert [cache.get(k) for k in "abc"] == [None] * 3
    assert (cache.rejected, cache.misses, cache.hits) == (3, 3, 0)
