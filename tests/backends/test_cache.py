"""The persistent judge cache: content addressing, cache hits in the cost record, several processes at once."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rewardkit.backends import ChatRequest, JudgeBackend, VerdictRequest, cost_of, load_backend
from rewardkit.backends.base import Completion, TopLogprobs, VerdictResult
from rewardkit.backends.cache import CachedBackend, JudgeCache, cacheable, request_key
from rewardkit.types import Status

ROOT = Path(__file__).resolve().parents[2]
MSG = [{"role": "user", "content": "Which is better?"}]


class Counting(JudgeBackend):
    """A test double that records every request it receives; fails requests whose text says 'fail'."""

    model_id = "double@v1"

    def __init__(self):
        self.seen: list = []

    def generate(self, requests):
        self.seen += requests
        return [Completion([], Status.TIMEOUT, error="slow") if "fail" in r.messages[-1]["content"]
                else Completion([r.messages[-1]["content"].upper()], Status.OK, 5, 2, ["stop"]) for r in requests]

    def verdict_probs(self, requests):
        self.seen += requests
        return [VerdictResult(np.array([0.25, 0.75]), Status.OK, 4) for _ in requests]


def test_key_is_content_addressed():
    base = ChatRequest(MSG, max_tokens=64, temperature=0.0)
    k = request_key("m", base)
    assert k == request_key("m", ChatRequest([dict(m) for m in MSG], max_tokens=64, temperature=0.0))
    variants = [
        request_key("other-model", base),
        request_key("m", ChatRequest(MSG, max_tokens=65)),
        request_key("m", ChatRequest(MSG, max_tokens=64, temperature=0.5, seed=1)),
        request_key("m", ChatRequest(MSG, max_tokens=64, top_p=0.9)),
        request_key("m", ChatRequest(MSG, max_tokens=64, stop=["\n"])),
        request_key("m", ChatRequest(MSG, max_tokens=64, min_tokens=64)),
        request_key("m", ChatRequest([{"role": "user", "content": "Which is better? "}], max_tokens=64)),
        request_key("m", VerdictRequest(MSG, ["A", "B"])),
        request_key("m", VerdictRequest(MSG, ["A", "B"], "\\boxed{")),
        request_key("m", VerdictRequest(MSG, ["B", "A"])),
    ]
    assert len({k, *variants}) == len(variants) + 1


def test_unseeded_sampling_is_not_cacheable():
    assert cacheable(ChatRequest(MSG, temperature=0.0))
    assert cacheable(ChatRequest(MSG, temperature=0.7, seed=1))
    assert not cacheable(ChatRequest(MSG, temperature=0.7))
    assert cacheable(VerdictRequest(MSG, ["A", "B"]))


def test_store_keeps_first_value(tmp_path):
    c = JudgeCache(tmp_path / "c.sqlite3")
    c.put_many({"a": {"x": 1}})
    c.put_many({"a": {"x": 2}, "b": [1, "é"]})
    assert c.get_many(["a", "b", "zz"]) == {"a": {"x": 1}, "b": [1, "é"]}
    assert len(c) == 2
    assert JudgeCache(tmp_path / "c.sqlite3").get_many(["b"]) == {"b": [1, "é"]}  # persisted
    assert sqlite3.connect(tmp_path / "c.sqlite3").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _fork_writer(path, start):
    JudgeCache(path).put_many({f"k{i}": i for i in range(start, start + 100)})


def test_forked_workers_lose_no_writes(tmp_path):
    import multiprocessing as mp

    path = tmp_path / "c.sqlite3"
    parent = JudgeCache(path)
    parent.put_many({"seed": 0})  # the parent has used the cache before forking, as a trainer would
    procs = [mp.get_context("fork").Process(target=_fork_writer, args=(path, k * 100)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert len(parent) == 301
    assert parent.get_many(["k0", "k150", "k299"]) == {"k0": 0, "k150": 150, "k299": 299}


def test_cached_backend_hits_cost_no_calls(tmp_path):
    inner = Counting()
    b = CachedBackend(inner, tmp_path / "c.sqlite3")
    reqs = [ChatRequest([{"role": "user", "content": f"q{i}"}]) for i in range(3)]
    first = b.generate(reqs)
    assert [c.cached for c in first] == [False] * 3 and len(inner.seen) == 3
    again = b.generate(reqs + [ChatRequest([{"role": "user", "content": "new"}])])
    assert [c.cached for c in again] == [True, True, True, False]
    assert len(inner.seen) == 4  # only the new request reached the model
    assert [c.texts for c in again[:3]] == [c.texts for c in first]
    cost = cost_of(again)
    assert (cost.cache_hits, cost.judge_calls, cost.prompt_tokens, cost.completion_tokens) == (3, 1, 5, 2)

    v1 = b.verdict_probs([VerdictRequest(MSG, ["A", "B"])])
    v2 = b.verdict_probs([VerdictRequest(MSG, ["A", "B"])])
    assert not v1[0].cached and v2[0].cached and v2[0].status is Status.OK
    np.testing.assert_allclose(v2[0].probs, [0.25, 0.75])


def test_failures_and_unseeded_samples_are_not_cached(tmp_path):
    inner = Counting()
    b = CachedBackend(inner, tmp_path / "c.sqlite3")
    reqs = [ChatRequest([{"role": "user", "content": "fail"}]), ChatRequest(MSG, temperature=1.0)]
    b.generate(reqs)
    out = b.generate(reqs)
    assert [c.cached for c in out] == [False, False] and len(inner.seen) == 4
    assert out[0].status is Status.TIMEOUT


def test_load_backend_cache_option(tmp_path):
    b = load_backend("http://127.0.0.1:9/v1?model=j", cache=tmp_path / "c.sqlite3")
    assert isinstance(b, CachedBackend) and b.model_id == "http:j@http://127.0.0.1:9/v1"
    assert load_backend("http://127.0.0.1:9/v1?model=j") is b.inner  # one underlying backend


WORKER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from rewardkit.backends.cache import JudgeCache
cache = JudgeCache(sys.argv[2])
wid, n = int(sys.argv[3]), int(sys.argv[4])
seen = 0
for i in range(n):
    # overlapping keys: every worker writes key i, with its own id as the value
    cache.put_many({f"k{i}": {"worker": wid, "i": i}, f"own{wid}-{i}": {"worker": wid}})
    got = cache.get_many([f"k{i}", f"own{wid}-{i}"])
    assert got[f"own{wid}-{i}"] == {"worker": wid}
    assert got[f"k{i}"]["i"] == i
    seen += len(got)
print(json.dumps({"worker": wid, "seen": seen}))
"""


def test_several_processes_share_one_cache(tmp_path):
    path = tmp_path / "shared.sqlite3"
    n, workers = 150, 4
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(ROOT), str(path), str(w), str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for w in range(workers)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        assert json.loads(out)["seen"] == 2 * n
    c = JudgeCache(path)
    assert len(c) == n + workers * n
    firsts = c.get_many([f"k{i}" for i in range(n)])
    assert all(v["i"] == i and 0 <= v["worker"] < workers for i, v in ((int(k[1:]), v) for k, v in firsts.items()))


@pytest.mark.model
def test_real_model_verdicts_cached(judge_backend, tmp_path):
    b = load_backend("smollm2", dtype="float32", cache=tmp_path / "c.sqlite3")  # the fp32 fixture
    assert b.inner is judge_backend  # the cache wraps the one loaded model
    req = [VerdictRequest([{"role": "user", "content": "Is 2+2=4? Answer YES or NO."}], ["YES", "NO"], "**")]
    first, second = b.verdict_probs(req), b.verdict_probs(req)
    assert not first[0].cached and second[0].cached
    np.testing.assert_allclose(second[0].probs, first[0].probs, rtol=1e-12)
    assert cost_of(second).judge_calls == 0 and cost_of(second).cache_hits == 1


# ------------------------------------------------------------------------------ private, sealed, keyed on the model
def test_cache_files_are_private(tmp_path):
    path = tmp_path / "new" / "deeper" / "judge.sqlite3"
    c = JudgeCache(path, secret=b"s")
    c.put_many({"a": 1})
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new" / "deeper").stat().st_mode) == 0o700
    files = [p for p in path.parent.iterdir() if p.name.startswith("judge.sqlite3")]
    assert {p.name for p in files} >= {"judge.sqlite3"}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files), [oct(p.stat().st_mode) for p in files]


def _plant(path, key, value, mac="0" * 64):
    with sqlite3.connect(path) as db:
        db.execute("INSERT OR REPLACE INTO judge_v2 (key, value, mac) VALUES (?, ?, ?)", (key, json.dumps(value), mac))


def test_planted_or_altered_entries_are_ignored_and_replaced(tmp_path, caplog):
    path = tmp_path / "shared.sqlite3"
    inner = Counting()
    b = CachedBackend(inner, JudgeCache(path, secret=b"mine"))
    req = ChatRequest(MSG)
    key = request_key(inner.cache_identity(), req)
    # someone with write access but without the secret plants a verdict first ("first value wins" before)
    JudgeCache(path, secret=b"theirs").put_many({key: {"texts": ["POISON"], "prompt_tokens": 1,
                                                       "completion_tokens": 1, "finish_reasons": ["stop"]}})
    with caplog.at_level("WARNING", logger="rewardkit.cache"):
        [c] = b.generate([req])
    assert c.texts == ["WHICH IS BETTER?"] and not c.cached and len(inner.seen) == 1
    assert b.cache.rejected == 1 and "integrity" in caplog.text
    [again] = b.generate([req])  # the recomputed value replaced the planted one
    assert again.cached and again.texts == ["WHICH IS BETTER?"] and len(inner.seen) == 1
    # a value altered in place (mac kept) is caught as well
    with sqlite3.connect(path) as db:
        db.execute("UPDATE judge_v2 SET value = replace(value, 'WHICH', 'WITCH')")
    [third] = b.generate([req])
    assert not third.cached and third.texts == ["WHICH IS BETTER?"] and b.cache.rejected == 2
    _plant(path, "raw", {"x": 1})
    assert JudgeCache(path, secret=b"mine").get_many(["raw"]) == {}


def test_a_planted_table_without_not_null_gives_misses_not_crashes(tmp_path):
    # CREATE TABLE IF NOT EXISTS keeps a table someone made first: a NULL value raised AttributeError (the
    # read path bypasses the cache only on sqlite errors), a NULL mac was already refused
    path = tmp_path / "planted.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE judge_v2 (key TEXT PRIMARY KEY, value TEXT, mac TEXT)")
        db.executemany("INSERT INTO judge_v2 VALUES (?, ?, ?)", [("a", None, "x"), ("b", "{}", None)])
    cache = JudgeCache(path, secret=b"mine")
    assert cache.get_many(["a", "b"]) == {} and cache.rejected == 2


def test_top_logprobs_are_cached(tmp_path):
    class Top(Counting):
        def top_logprobs(self, requests, k=20):
            self.seen += requests
            return [TopLogprobs([("A", -0.1), ("B", -2.4)][:k], Status.OK, 4) for _ in requests]

    inner = Top()
    b = CachedBackend(inner, tmp_path / "c.sqlite3")
    req = VerdictRequest(MSG, (), "\\boxed{")
    first, second = b.top_logprobs([req], 20), b.top_logprobs([req], 20)
    assert first[0].tokens == second[0].tokens == [("A", -0.1), ("B", -2.4)] and len(inner.seen) == 1
    assert (first[0].cached, second[0].cached) == (False, True)  # a hit says so: cost_of counts no call for it
    assert (cost_of(first).judge_calls, cost_of(second).judge_calls, cost_of(second).cache_hits) == (1, 0, 1)
    assert b.top_logprobs([req], 1)[0].tokens == [("A", -0.1)] and len(inner.seen) == 2  # k is in the key


def test_http_cache_keys_on_the_served_model(tmp_path):
    """A model swapped behind the same URL and name misses the cache instead of serving stale verdicts."""
    from rewardkit.backends.http import HTTPBackend
    from rewardkit.backends.server import JudgeServer

    class Judge(Counting):
        def __init__(self, model_id, answer):
            super().__init__()
            self.model_id, self.answer = model_id, answer

        def generate(self, requests):
            self.seen += requests
            return [Completion([self.answer], Status.OK, 5, 1, ["stop"]) for _ in requests]

    old, new = Judge("judge-7b@float32", "A"), Judge("judge-7b-v2@float32", "B")
    with JudgeServer(old, port=0, model_name="judge") as s1:
        url = s1.url
        client = CachedBackend(HTTPBackend(url, model="judge", retries=0, timeout=10), tmp_path / "c.sqlite3")
        assert [client.generate([ChatRequest(MSG)])[0].text for _ in range(2)] == ["A", "A"]
        assert len(old.seen) == 1  # second answer from the cache
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with JudgeServer(new, port=port, model_name="judge"):  # same URL, same name, other weights
        [c] = client.generate([ChatRequest(MSG)])
        assert (c.text, c.cached, len(new.seen)) == ("B", False, 1)
    # the server is gone: the model cannot be identified, so nothing is served from the cache
    [gone] = client.generate([ChatRequest(MSG)])
    assert gone.status is not Status.OK and not gone.cached and client.bypassed == 1


def test_the_cache_counts_tokens_and_knows_the_context_as_its_judge_does(tmp_path):
    """The judges budget their inputs with ``count_tokens`` and ``context_length`` (the rollout judge cuts where
    the context ends): behind the cache they are the inner judge's, not the base class's whitespace words."""
    from rewardkit.testing import ScriptedJudge

    inner = ScriptedJudge("x", tokenizer=lambda texts: [len(t) for t in texts])  # characters, not words
    inner.context_length = lambda: 1234
    b = CachedBackend(inner, tmp_path / "c.sqlite3")
    assert b.count_tokens(["two words"]) == [9] and b.context_length() == 1234


# ------------------------------------------------------------------------------ keys, round trips, the wrapper
def test_key_ignores_form_and_separates_every_setting():
    """Same request written differently: one key (a JSON object's field order, 0 vs 0.0, no stop list vs an empty
    one, a tuple of choices). Anything that can change the answer: another key."""
    msg = [{"role": "user", "content": "Is 2+2=4?"}]
    k = request_key("m", ChatRequest(msg, temperature=0.0, top_p=1.0))
    assert len(k) == 64 and set(k) <= set("0123456789abcdef")  # a sha256 digest
    assert k == request_key("m", ChatRequest([{"content": "Is 2+2=4?", "role": "user"}], temperature=0, top_p=1))
    assert k == request_key("m", ChatRequest(msg, stop=[]))
    v = request_key("m", VerdictRequest(msg, ["YES", "NO"], "**"))
    assert v == request_key("m", VerdictRequest([dict(reversed(msg[0].items()))], ("YES", "NO"), "**"))
    t = request_key("m", VerdictRequest(msg, ["YES", "NO"], "**"), top_k=5)
    assert t == request_key("m", VerdictRequest(msg, ["A"], "**"), top_k=5)  # next-token alternatives: no choices
    others = [
        request_key("m", ChatRequest(msg, n=2)),
        request_key("m", ChatRequest(msg, temperature=0.7, seed=1)),
        request_key("m", ChatRequest(msg, temperature=0.7, seed=2)),
        request_key("m", ChatRequest(msg, stop=["\n"])),
        request_key("m", ChatRequest(msg, stop=["\n\n"])),
        request_key("m", ChatRequest([{"role": "system", "content": "Is 2+2=4?"}])),
        request_key("m2", ChatRequest(msg)),
        request_key("m", VerdictRequest(msg, ["YES", "NO"])),
        request_key("m", VerdictRequest(msg, ["YES", "NO", "Tie"], "**")),
        request_key("m2", VerdictRequest(msg, ["YES", "NO"], "**")),
        request_key("m", VerdictRequest(msg, ["YES", "NO"], "**"), top_k=20),
        request_key("m", VerdictRequest(msg, ["YES", "NO"], ""), top_k=5),
        request_key("m2", VerdictRequest(msg, ["YES", "NO"], "**"), top_k=5),
        request_key("m", VerdictRequest(msg, ())),  # a verdict on the prompt of the top_logprobs call above
    ]
    assert len({k, v, t, *others}) == len(others) + 3


def test_cached_results_come_back_as_they_were_computed(tmp_path):
    class Full(Counting):
        def generate(self, requests):
            self.seen += requests
            return [Completion([f"{r.messages[-1]['content']}-1", "two"], Status.OK, 11, 7, ["stop", "length"])
                    for r in requests]

        def verdict_probs(self, requests):
            self.seen += requests
            return [VerdictResult(np.array([0.125, 0.875]), Status.OK, 9) for _ in requests]

        def top_logprobs(self, requests, k=20):
            self.seen += requests
            return [TopLogprobs([("A", -0.5), ("B", -1.5)], Status.OK, 3) for _ in requests]

    inner = Full()
    b = CachedBackend(inner, JudgeCache(tmp_path / "c.sqlite3", secret=b"s"))
    q = [ChatRequest([{"role": "user", "content": f"q{i}"}], n=2, temperature=0.5, seed=3) for i in range(4)]
    b.generate([q[1], q[3]])
    mixed = b.generate(q)  # hits and misses interleaved keep their places
    assert [c.cached for c in mixed] == [False, True, False, True] and len(inner.seen) == 4
    assert [c.texts for c in mixed] == [[f"q{i}-1", "two"] for i in range(4)]
    assert all((c.status, c.prompt_tokens, c.completion_tokens, c.finish_reasons) == (Status.OK, 11, 7, ["stop", "length"])
               for c in mixed)
    vr = VerdictRequest(MSG, ["A", "B"])
    b.verdict_probs([vr])
    [v] = b.verdict_probs([vr])
    assert v.cached and v.status is Status.OK and v.prompt_tokens == 9 and v.best() == 1
    np.testing.assert_array_equal(v.probs, [0.125, 0.875])
    b.top_logprobs([vr], 2)
    [t] = b.top_logprobs([vr], 2)
    assert (t.tokens, t.status, t.prompt_tokens, len(inner.seen)) == ([("A", -0.5), ("B", -1.5)], Status.OK, 3, 6)


def test_failed_verdicts_are_not_cached(tmp_path):
    class Flaky(Counting):
        def verdict_probs(self, requests):
            self.seen += requests
            return [VerdictResult(np.array([]), Status.ERROR, error="down") for _ in requests]

    inner = Flaky()
    b = CachedBackend(inner, JudgeCache(tmp_path / "c.sqlite3", secret=b"s"))
    req = VerdictRequest(MSG, ["A", "B"])
    assert [r.status for r in b.verdict_probs([req]) + b.verdict_probs([req])] == [Status.ERROR] * 2
    assert len(inner.seen) == 2 and len(b.cache) == 0


def test_an_unidentifiable_model_is_never_served_from_the_cache(tmp_path, caplog):
    class Anonymous(Counting):
        known = True

        def cache_identity(self):
            if not self.known:
                raise ConnectionError("no /v1/models")
            return self.model_id

    inner = Anonymous()
    b = CachedBackend(inner, JudgeCache(tmp_path / "c.sqlite3", secret=b"s"))
    b.generate([ChatRequest(MSG)])
    inner.known = False
    assert b.generate([]) == [] and b.bypassed == 0  # nothing to do: the model is not asked who it is
    with caplog.at_level("WARNING", logger="rewardkit.cache"):
        [c] = b.generate([ChatRequest(MSG)])
    assert not c.cached and len(inner.seen) == 2 and b.bypassed == 1
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("rewardkit.cache", "WARNING", "judge cache bypassed for double@v1: cannot identify the served model "
                                       "(ConnectionError: no /v1/models)")]
    b.generate([ChatRequest([{"role": "user", "content": "new"}])])
    assert b.bypassed == 2  # counted per call
    inner.known = True
    assert len(b.cache) == 1 and not b.generate([ChatRequest([{"role": "user", "content": "new"}])])[0].cached


def test_a_rejected_entry_counts_each_read_logs_once_and_is_replaced_once(tmp_path, caplog):
    path = tmp_path / "c.sqlite3"
    c = JudgeCache(path, secret=b"mine")
    k = "0123456789abcdef" + "9" * 48  # the log names the file and the key's first 16 characters
    _plant(path, k, {"x": "planted"})
    with caplog.at_level("WARNING", logger="rewardkit.cache"):
        assert c.get_many([k]) == {} and c.get_many([k, k]) == {}
    assert c.rejected == 2 and [(r.name, r.levelname) for r in caplog.records] == [("rewardkit.cache", "WARNING")]
    assert caplog.records[0].getMessage().startswith(f"judge cache {path}: entry 0123456789abcdef fails its integrity")
    c.put_many({k: {"x": 1}})  # replaces the planted entry
    c.put_many({k: {"x": 2}})  # a verified entry keeps its first value again
    assert c.get_many([k]) == {k: {"x": 1}} and c.rejected == 2


def test_many_keys_in_one_read(tmp_path):
    c = JudgeCache(tmp_path / "c.sqlite3", secret=b"s")
    c.put_many({f"k{i}": i for i in range(1201)})
    got = c.get_many([f"k{i}" for i in range(1201)] + ["absent"])
    assert got == {f"k{i}": i for i in range(1201)}


def test_default_place_and_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("REWARDKIT_CACHE", str(tmp_path / "rk"))
    monkeypatch.setenv("REWARDKIT_CACHE_SECRET", "team")
    c = JudgeCache()
    assert c.path == tmp_path / "rk" / "judge_cache.sqlite3" and c.path.exists() and c.secret == b"team"
    c.put_many({"k": 1})
    assert JudgeCache(tmp_path / "rk" / "judge_cache.sqlite3", secret=b"team").get_many(["k"]) == {"k": 1}
    monkeypatch.setenv("REWARDKIT_CACHE_SECRET", "other")
    assert JudgeCache().get_many(["k"]) == {}
    assert CachedBackend(Counting()).cache.path == c.path  # a wrapper without a cache given uses the default


def test_a_cache_locked_past_its_timeout_is_an_error(tmp_path):
    path = tmp_path / "c.sqlite3"
    c = JudgeCache(path, timeout=0.3, secret=b"s")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            c.put_many({"k": 1})
    finally:
        other.execute("ROLLBACK")
        other.close()
    c.put_many({"k": 1})
    assert c.get_many(["k"]) == {"k": 1}


class Extra(Counting):
    """A backend with an extra method and its own identity (module level: it pickles)."""

    closed = checked = False
    default_mode = "verdict"

    def score_tokens(self, requests):
        return [f"scores of {r}" for r in requests]

    def prefix_scores(self, x):
        return f"scored {x}"

    def check(self):
        self.checked = True

    def close(self):
        self.closed = True

    def served_name(self):
        return "judge"

    def cache_identity(self):
        return "double@v1 sha:abc"


def test_the_wrapper_passes_through_and_pickles(tmp_path):
    import pickle

    b = CachedBackend(Extra(), JudgeCache(tmp_path / "c.sqlite3", secret=b"s"))
    assert b.prefix_scores(1) == "scored 1" and b.served_name() == "judge" and b.cache_identity() == "double@v1 sha:abc"
    assert b.describe() == "double@v1 (behind the judge cache)" and b.model_id == "double@v1"
    assert b.default_mode == "verdict" and b.score_tokens(["r"]) == ["scores of r"] and len(b.cache) == 0
    b.check()
    assert b.inner.checked
    copy = pickle.loads(pickle.dumps(b))  # shipped to a worker: rebuilt without recursing through __getattr__
    assert copy.cache.path == b.cache.path and copy.prefix_scores(2) == "scored 2"
    with pytest.raises(AttributeError):
        b.no_such_thing  # noqa: B018
    b.close()
    assert b.inner.closed


def test_malformed_rows_are_rejected_not_raised(tmp_path):
    """A planted row need not hold text, nor ASCII, nor UTF-8: each is an entry that fails its check (ignored,
    counted, then replaced), not an exception in every later batch that asks for its key."""
    from rewardkit.sqlite_store import seal

    path = tmp_path / "c.sqlite3"
    c = JudgeCache(path, secret=b"mine")
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO judge_v2 VALUES ('blob', CAST('1' AS BLOB), ?)", (seal(b"mine", "blob", "2"),))
        db.execute("INSERT INTO judge_v2 VALUES ('accent', '1', ?)", ("é" * 64,))
        db.execute("INSERT INTO judge_v2 VALUES ('latin1', CAST(X'22E922' AS TEXT), ?)", ("0" * 64,))
    assert c.get_many(["blob", "accent", "latin1"]) == {} and c.rejected == 3
    c.put_many({"blob": 2, "accent": 3, "latin1": "é"})
    assert c.get_many(["blob", "accent", "latin1"]) == {"blob": 2, "accent": 3, "latin1": "é"}


def test_a_rejected_entry_at_a_chunk_boundary_is_read_once(tmp_path):
    c = JudgeCache(tmp_path / "c.sqlite3", secret=b"s")
    keys = [f"k{i:04d}" for i in range(1001)]
    c.put_many({k: 1 for k in keys if k != "k0500"})
    _plant(tmp_path / "c.sqlite3", "k0500", 1)  # the first key of the second chunk of 500
    assert len(c.get_many(keys)) == 1000 and c.rejected == 1


def test_a_judge_that_answers_the_wrong_number_of_requests_is_an_error(tmp_path):
    """A short answer list must not leave a request without a result (a ``None`` where a completion should be),
    even from a call the backend base class does not check (set on the instance, as test doubles do)."""
    inner = Counting()
    inner.generate = lambda requests: [Completion(["only one"], Status.OK)]
    b = CachedBackend(inner, JudgeCache(tmp_path / "c.sqlite3", secret=b"s"))
    with pytest.raises((ValueError, RuntimeError)):
        b.generate([ChatRequest(MSG), ChatRequest([{"role": "user", "content": "other"}])])
    assert len(b.cache) == 0


def test_the_cache_given_is_the_cache_used(tmp_path):
    path = tmp_path / "mine.sqlite3"
    assert CachedBackend(Counting(), path).cache.path == path
    assert CachedBackend(Counting(), str(path)).cache.path == path
    c = JudgeCache(path, secret=b"s")
    assert CachedBackend(Counting(), c).cache is c
    assert c.timeout == 60.0  # a busy shared cache is waited for up to a minute (the documented default)


def test_top_logprobs_without_k_asks_what_the_judge_would_be_asked(tmp_path):
    """No ``k`` given: the wrapper asks its judge for as many alternatives as the judge's own default (20, the
    OpenAI maximum serve-judge computes), so a cached and an uncached call answer alike."""
    class Top(Counting):
        def top_logprobs(self, requests, k=20):
            self.seen += [k] * len(requests)
            return [TopLogprobs([("A", -0.1)], Status.OK, 4) for _ in requests]

    inner = Top()
    b = CachedBackend(inner, JudgeCache(tmp_path / "c.sqlite3", secret=b"s"))
    req = VerdictRequest(MSG, (), "\\boxed{")
    inner.top_logprobs([req])
    b.top_logprobs([req])
    assert inner.seen == [20, 20]
    assert b.top_logprobs([req], 20)[0].tokens == [("A", -0.1)] and inner.seen == [20, 20]  # the same entry


def test_a_locked_cache_neither_loses_finished_calls_nor_stops_the_batch(tmp_path, caplog):
    """Another process holds the database's write lock past the cache's timeout: the judge's results are returned
    (before, put_many's 'database is locked' raised after the calls had run, throwing them away), and while the
    lock also blocks reading, the requests simply go to the judge; each time a warning names the cache."""
    import sqlite3

    path = tmp_path / "c.sqlite3"
    inner = Counting()
    b = CachedBackend(inner, JudgeCache(path, timeout=0.1, secret=b"s"))
    reqs = [ChatRequest([{"role": "user", "content": f"q{i}"}]) for i in range(2)]
    holder = sqlite3.connect(path, timeout=0.1, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # in WAL mode this blocks writers; readers still read
    try:
        with caplog.at_level("WARNING", logger="rewardkit.cache"):
            out = b.generate(reqs)
        assert [c.texts for c in out] == [["Q0"], ["Q1"]] and [c.status for c in out] == [Status.OK] * 2
        assert not any(c.cached for c in out) and b.bypassed == 1
        assert f"judge cache {path}: 2 result(s) not stored (OperationalError: database is locked)" in caplog.text
    finally:
        holder.rollback()
        holder.close()
    again = b.generate(reqs)  # nothing was stored: the judge is asked again, and now the results are kept
    assert len(inner.seen) == 4 and not any(c.cached for c in again)
    assert all(c.cached for c in b.generate(reqs)) and len(inner.seen) == 4


def test_a_cache_file_that_is_no_longer_a_database_sends_requests_to_the_judge(tmp_path, caplog):
    path = tmp_path / "c.sqlite3"
    inner = Counting()
    b = CachedBackend(inner, JudgeCache(path, timeout=0.1, secret=b"s"))
    for p in tmp_path.glob("c.sqlite3*"):
        p.write_bytes(b"not a database, " * 512)  # overwritten under the running job
    with caplog.at_level("WARNING", logger="rewardkit.cache"):
        out = b.generate([ChatRequest([{"role": "user", "content": "q"}])])
    assert out[0].texts == ["Q"] and out[0].status is Status.OK and not out[0].cached and len(inner.seen) == 1
    assert f"judge cache {path} cannot be read (DatabaseError: file is not a database)" in caplog.text
    assert f"judge cache {path}: 1 result(s) not stored (DatabaseError" in caplog.text and b.bypassed == 2
    b.generate([ChatRequest([{"role": "user", "content": "q"}])])
    assert b.bypassed == 4 and len(inner.seen) == 2  # counted per call
    # a model it cannot identify: the cache is not touched at all (no read, no write, one bypass)
    inner.cache_identity = lambda: (_ for _ in ()).throw(ConnectionError("no /v1/models"))
    caplog.clear()
    with caplog.at_level("WARNING", logger="rewardkit.cache"):
        b.generate([ChatRequest([{"role": "user", "content": "q"}])])
    assert b.bypassed == 5 and [r.getMessage()[:40] for r in caplog.records] == [
        "judge cache bypassed for double@v1: cann"]
