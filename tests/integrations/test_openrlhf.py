"""`rewardkit serve`: OpenRLHF's remote reward contract over real HTTP, grouping, auth and bad requests."""

from __future__ import annotations

import concurrent.futures as cf
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import httpx
import numpy as np
import pytest

from rewardkit.http_server import BackgroundServer, HTTPError
from rewardkit.integrations.openrlhf import parse_request, reward_app
from rewardkit.scoring import BaseScorer, get_scorer
from rewardkit.testing import reward_server
from rewardkit.types import GroupScore, Status

ROOT = Path(__file__).resolve().parents[2]
P1, P2 = "<|user|>What is 2+2?<|assistant|>", "<|user|>What is 3+3?<|assistant|>"


class Recorder(BaseScorer):
    """Reward = 1 / group size; responses containing 'FAIL' get an error status. Records every call."""

    name = "recorder"

    def __init__(self):
        self.calls: list[list[list[str]]] = []

    def _score(self, groups):
        self.calls.append([g.responses for g in groups])
        out = []
        for g in groups:
            st = [Status.ERROR if "FAIL" in r else Status.OK for r in g.responses]
            out.append(GroupScore(g.id, np.full(len(g), 1.0 / len(g)), st))
        return out


def _post(url, body, **kw):
    return httpx.post(url + "/get_reward", json=body, timeout=60, **kw)


def test_verifier_rewards_over_http_in_row_order():
    app = reward_app(get_scorer("verifier"))
    body = {"query": [P1 + r"so \boxed{4}", P2 + r"\boxed{7}", P1 + r"\boxed{5}", P2 + r"it is \boxed{6}"],
            "prompts": [P1, P2, P1, P2], "labels": ["4", "6", "4", "6"]}
    with BackgroundServer(app) as srv:
        r = _post(srv.url, body)
        health = httpx.get(srv.url + "/health").json()
    assert r.status_code == 200
    out = r.json()
    assert out["rewards"] == [1.0, 0.0, 0.0, 1.0] == out["scores"]
    assert out["extra_logs"]["group_size"] == [2.0] * 4 and out["extra_logs"]["status_ok"] == [1.0] * 4
    assert health["status"] == "ok"
    assert (health["rows"], health["groups"], health["refused"]) == (4, 2, {})  # counted without --group-size too


def test_rows_are_grouped_by_prompt_and_label_within_a_request():
    sc = Recorder()
    body = {"query": [P1 + "a", P2 + "b", P1 + "c"], "prompts": [P1, P2, P1], "labels": ["4", "6", "4"]}
    with BackgroundServer(reward_app(sc)) as srv:
        out = _post(srv.url, body).json()
    assert sc.calls == [[["a", "c"], ["b"]]]  # one scorer call, two whole groups
    assert out["rewards"] == [0.5, 1.0, 0.5]


def test_group_size_gathers_one_query_requests_into_whole_groups():
    # OpenRLHF 0.11 posts one query per request: three concurrent requests must be scored as ONE group.
    sc = Recorder()
    with BackgroundServer(reward_app(sc, group_size=3, group_timeout=30)) as srv:
        bodies = [{"query": [P1 + t], "prompts": [P1], "labels": ["4"]} for t in ("x", "y", "z")]
        with cf.ThreadPoolExecutor(3) as ex:
            outs = [f.result().json() for f in [ex.submit(_post, srv.url, b) for b in bodies]]
    assert len(sc.calls) == 1 and sorted(sc.calls[0][0]) == ["x", "y", "z"]
    assert [o["rewards"] for o in outs] == [[pytest.approx(1 / 3)]] * 3
    assert all(o["extra_logs"]["partial_group"] == [0.0] for o in outs)


def test_a_group_that_never_fills_is_scored_as_it_stands_and_flagged():
    sc = Recorder()
    with BackgroundServer(reward_app(sc, group_size=4, group_timeout=0.5)) as srv:
        out = _post(srv.url, {"query": [P1 + "x", P1 + "y"], "prompts": [P1, P1], "labels": [None, None]}).json()
    assert sc.calls == [[["x", "y"]]]
    assert out["rewards"] == [0.5, 0.5] and out["extra_logs"]["partial_group"] == [1.0, 1.0]


def test_masked_responses_are_a_number_with_the_mask_in_extra_logs_unless_null_is_asked_for():
    body = {"query": [P1 + "ok", P1 + "FAIL"], "prompts": [P1, P1], "labels": ["4", "4"]}
    with BackgroundServer(reward_app(Recorder())) as srv:
        out = _post(srv.url, body).json()
    assert out["rewards"] == [0.5, 0.0] and out["extra_logs"]["status_ok"] == [1.0, 0.0]
    with BackgroundServer(reward_app(Recorder(), masked_reward=None)) as srv:
        assert _post(srv.url, body).json()["rewards"] == [0.5, None]


def test_an_empty_shard_gets_empty_lists():
    # OpenRLHF 0.11.0-0.11.1 split each request over every --reward.remote_url: the other servers get []
    with BackgroundServer(reward_app(Recorder(), group_size=2)) as srv:
        out = _post(srv.url, {"query": [], "prompts": [], "labels": []})
    assert out.status_code == 200 and out.json()["rewards"] == [] and out.json()["extra_logs"]["status_ok"] == []


def test_the_key_may_ride_in_the_url_query():
    body = {"query": [P1 + "a"], "prompts": [P1], "labels": ["4"]}
    with BackgroundServer(reward_app(Recorder(), api_key="s3cret")) as srv:
        assert httpx.post(srv.url + "/get_reward?api_key=wrong", json=body).status_code == 401
        ok = httpx.post(srv.url + "/get_reward?api_key=s3cret", json=body)
    assert ok.status_code == 200 and ok.json()["rewards"] == [1.0]


def test_bearer_token_is_required_when_set():
    body = {"query": [P1 + "a"], "prompts": [P1], "labels": ["4"]}
    with BackgroundServer(reward_app(Recorder(), api_key="s3cret")) as srv:
        assert _post(srv.url, body).status_code == 401
        assert _post(srv.url, body, headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = _post(srv.url, body, headers={"Authorization": "Bearer s3cret"})
        assert httpx.get(srv.url + "/health").status_code == 200  # health needs no key
    assert ok.status_code == 200 and ok.json()["rewards"] == [1.0]


@pytest.mark.parametrize("body, status, needle", [
    ([1, 2], 400, "JSON object"),
    ({"prompts": [P1], "labels": ["4"]}, 400, "'query'"),
    ({"query": "x", "prompts": [P1], "labels": ["4"]}, 400, "expected a list"),
    ({"query": [P1 + "a", 3], "prompts": [P1, P1], "labels": ["4", "4"]}, 400, "query[1]"),
    ({"query": [P1 + "a"], "prompts": [P1, P2], "labels": ["4"]}, 400, "2 prompts for 1 queries"),
    ({"query": [P1 + "a"], "prompts": [P1], "labels": ["4", "5"]}, 400, "'labels'"),
    ({"query": [P1 + "a"], "prompts": [P1], "labels": [{"x": 1}]}, 400, "labels[0]"),
    ({"query": ["something else"], "prompts": [P1], "labels": ["4"]}, 400, "starts with neither"),
    ({"query": [P1 + "a"], "prompts": [P1], "labels": ["4"], "extra": 1}, 400, "unknown field"),
    ({"query": [P1 + "a"] * 5, "prompts": [P1] * 5, "labels": ["4"] * 5}, 413, "at most 4"),
])
def test_malformed_requests_get_a_clear_4xx_and_never_rewards(body, status, needle):
    sc = Recorder()
    with BackgroundServer(reward_app(sc, max_items=4)) as srv:
        r = _post(srv.url, body)
    assert r.status_code == status
    assert needle in r.json()["error"]["message"] and "rewards" not in r.json()
    assert sc.calls == []  # the scorer never ran


def test_a_query_whose_prompt_was_cut_from_the_left_is_scored_on_the_prompts_tail():
    # OpenRLHF keeps the last max_len - max_new_tokens tokens of a long prompt; prompts[i] stays whole
    long_prompt = "Background: " + "the same old story, " * 40 + "so what is 2+2? "
    tail = long_prompt[-120:]
    body = {"query": [tail + r"\boxed{4}", tail + r"\boxed{5}", P1 + r"\boxed{6}"],
            "prompts": [long_prompt, long_prompt, P1], "labels": ["4", "4", "6"]}
    sc = get_scorer("verifier")
    with BackgroundServer(reward_app(sc)) as srv:
        r = _post(srv.url, body)
    assert r.status_code == 200, r.text
    assert r.json()["rewards"] == [1.0, 0.0, 1.0]
    assert parse_request(body).responses == [r"\boxed{4}", r"\boxed{5}", r"\boxed{6}"]


def test_split_query_takes_the_longest_tail_and_skips_a_cut_multibyte_character():
    from rewardkit.integrations.openrlhf import split_query

    prompt = "Ein langer Prompt über Zahlen, wirklich lang genug: 2+2? "
    assert split_query("\ufffd" + prompt[20:] + "vier", prompt) == "vier"
    assert split_query(prompt[-10:] + "vier", prompt) is None  # under MIN_TAIL characters left: not a tail
    assert split_query("ganz etwas anderes, nicht der Prompt", prompt) is None


def test_refusals_are_logged_once_per_reason_and_counted(caplog):
    bad = {"query": ["something else"], "prompts": [P1], "labels": ["4"]}
    other = {"query": [P1 + "a", "x" * 40], "prompts": [P1, P2], "labels": ["4", "6"]}
    with caplog.at_level("ERROR", logger="rewardkit.integrations.openrlhf"):
        with BackgroundServer(reward_app(Recorder())) as srv:
            codes = [_post(srv.url, bad).status_code for _ in range(5)]  # OpenRLHF's five tries
            codes.append(_post(srv.url, other).status_code)  # same reason, another row index
            codes.append(_post(srv.url, {"query": [P1 + "a"], "prompts": [P1], "labels": [True]}).status_code)
            health = httpx.get(srv.url + "/health").json()
    assert codes == [400] * 7
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "query[0]" in lines[0] and "starts with neither prompts[0]" in lines[0]
    assert "labels[0]" in lines[1] and "got a boolean" in lines[1]
    assert health["refused"] == {"400": 7}


def test_a_list_label_means_any_of_its_references_is_right():
    # before: 400 "a list of 2 references"
    body = {"query": [P1 + r"\boxed{four}", P1 + r"\boxed{4}", P1 + r"\boxed{5}"], "prompts": [P1] * 3,
            "labels": [["4", "four"]] * 3}
    with BackgroundServer(reward_app(get_scorer("verifier"))) as srv:
        r = _post(srv.url, body)
    assert r.status_code == 200, r.text
    assert r.json()["rewards"] == [1.0, 1.0, 0.0]


def test_a_group_relative_scorer_needs_a_group_size_or_whole_groups_per_request():
    with pytest.raises(ValueError, match="no --group-size was given"):
        reward_app(get_scorer("majority-vote"))
    with pytest.raises(ValueError, match="expected an integer >= 1"):
        reward_app(get_scorer("verifier"), group_size=0)
    body = {"query": [P1 + r"\boxed{4}", P1 + r"\boxed{5}", P1 + r"\boxed{5}"], "prompts": [P1] * 3,
            "labels": [None] * 3}
    with BackgroundServer(reward_app(get_scorer("majority-vote"), group_size="request")) as srv:
        out = _post(srv.url, body).json()
    assert out["rewards"] == [0.0, 1.0, 1.0] and out["extra_logs"]["group_size"] == [3.0] * 3


def test_a_group_timeout_at_or_over_openrlhfs_client_timeout_is_warned_about(caplog):
    with caplog.at_level("WARNING", logger="rewardkit.integrations.openrlhf"):
        reward_app(Recorder(), group_size=2, group_timeout=200)
        reward_app(Recorder(), group_size=2, group_timeout=150)
    lines = [r.getMessage() for r in caplog.records if "client timeout" in r.getMessage()]
    assert len(lines) == 1 and "200s" in lines[0] and "180s" in lines[0]


@pytest.mark.parametrize("args, needle", [
    (["--scorer", "majority-vote"], "scorer 'majority-vote' rewards a response against its group"),
    (["--scorer", "verifier", "--group-size", "0"], "--group-size: expected an integer >= 1"),
])
def test_serve_refuses_to_start_without_usable_groups_in_one_line(args, needle):
    cmd = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()", "serve", "--port", "0",
           *args]
    done = subprocess.run(cmd, cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: ") and needle in done.stderr


def test_serve_says_when_the_open_file_limit_holds_fewer_requests_than_max_pending():
    import resource

    def low_limit():  # a hard limit of 2,048 descriptors, as a small machine or container might have
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 2048))

    cmd = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()", "serve", "--port", "0",
           "--scorer", "verifier", "--max-pending", "4096"]
    proc = subprocess.Popen(cmd, cwd=str(ROOT), stderr=subprocess.PIPE, text=True, preexec_fn=low_limit)
    try:
        lines = []
        while not lines or "serving" not in lines[-1]:
            lines.append(proc.stderr.readline())
            assert lines[-1] or proc.poll() is None, lines
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    said = [x for x in lines if "open files" in x]
    # 2,048 descriptors less 256 for everything that is not a connection
    assert len(said) == 1 and "at most 1792 requests are held at once" in said[0], lines


def test_not_json_and_oversized_bodies_are_refused():
    with BackgroundServer(reward_app(Recorder(), max_body=1000)) as srv:
        r = httpx.post(srv.url + "/get_reward", content=b"{not json", headers={"Content-Type": "application/json"})
        big = _post(srv.url, {"query": [P1 + "a" * 5000], "prompts": [P1], "labels": ["4"]})
    assert r.status_code == 400 and "rewards" not in r.json()
    assert big.status_code == 413


def test_parse_request_strips_the_prompt_prefix():
    r = parse_request({"query": [P1 + " answer"], "prompts": [P1], "labels": [4]})
    assert r.responses == [" answer"] and r.labels == ["4"]
    with pytest.raises(HTTPError):
        parse_request({"query": [P1], "prompts": [P1], "labels": [True]})


def test_rewardkit_serve_command_answers_real_requests():
    url, proc = _serve("--scorer", "rewardkit.grpo.toy_rewards:KeywordScorer", "-o", "keyword=yes")
    try:
        assert url.startswith("http://127.0.0.1:")  # loopback by default
        out = httpx.post(url, json={"query": [P1 + "yes!", P1 + "no"], "prompts": [P1, P1], "labels": [None, None]},
                         timeout=60).json()
        assert out["rewards"] == [1.0, 0.0]
    finally:
        _stop(proc)


# ----------------------------------------------------------------------------- OpenRLHF 0.11.2's own client
# `pip install --no-deps openrlhf==0.11.2 pylatexenc` (its deepspeed/flash-attn/vllm stack cannot install here):
# its SingleTurnAgentExecutor (generation stubbed, the rest real: tokenise, decode the query, POST, retry) and
# SamplesGenerator._process_response_into_experience (rewards -> tensors) run against a real `rewardkit serve`.


@pytest.fixture(scope="module")
def openrlhf():
    """OpenRLHF's executor class and its response -> Experience function (vllm stubbed for the import only)."""
    import types

    from rewardkit.testing import import_or_skip

    import_or_skip("openrlhf", "scripts/frameworks_env.sh builds an environment with it (pip install --no-deps "
                               "openrlhf==0.11.2 pylatexenc)")
    stubs = {"vllm": types.ModuleType("vllm"), "vllm.inputs": types.ModuleType("vllm.inputs"),
             "vllm.utils": types.ModuleType("vllm.utils")}
    stubs["vllm"].SamplingParams, stubs["vllm"].__version__ = object, "0.0"
    stubs["vllm.inputs"].TokensPrompt, stubs["vllm.utils"].random_uuid = object, lambda: "x"
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    try:
        from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
        from openrlhf.utils.agent import SingleTurnAgentExecutor
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    from transformers import AutoTokenizer

    from rewardkit.backends.embedded import embedded_model_path

    tok = AutoTokenizer.from_pretrained(str(embedded_model_path()))
    return SimpleNamespace(executor=SingleTurnAgentExecutor, tokenizer=tok,
                           to_experience=lambda r: SamplesGenerator._process_response_into_experience(None, r))


class _Engine:
    """Stands in for vLLM: 'generates' the text it is told for each prompt, finishing in a random order."""

    def __init__(self, tok, replies):
        import random

        self.tok, self.replies, self.rng = tok, replies, random.Random(0)

    async def generate(self, prompt_token_ids, params, multi_modal_data=None):
        import asyncio

        await asyncio.sleep(self.rng.uniform(0, 2))  # samples of one prompt finish at different times
        seen = self.tok.decode(prompt_token_ids)  # the prompt, or its tail when OpenRLHF cut it from the left
        text = next(v for k, v in self.replies.items() if k.endswith(seen)).pop()
        out = SimpleNamespace(token_ids=self.tok.encode(text, add_special_tokens=False), finish_reason="stop",
                              logprobs=None)
        return SimpleNamespace(outputs=[out])


def _rollout(openrlhf, urls, groups, labels=None, max_len=256):
    """OpenRLHF's rollout of ``groups`` ({prompt: [reply, ...]}): every sample's request in flight at once."""
    import asyncio
    import logging

    ex = openrlhf.executor(urls)
    client_log = logging.getLogger("openrlhf.utils.agent")  # OpenRLHF logs each failed attempt before its retry
    errors: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: errors.append(record.getMessage())
    client_log.addHandler(handler)
    client_log.setLevel(logging.INFO)
    engine = _Engine(openrlhf.tokenizer, {p: list(reversed(r)) for p, r in groups.items()})
    params = SimpleNamespace(max_tokens=32, logprobs=None)
    jobs = [(p, (labels or {}).get(p, "")) for p, replies in groups.items() for _ in replies]

    async def run():
        return await asyncio.gather(*(ex.execute(p, label, params, max_len, openrlhf.tokenizer, engine)
                                      for p, label in jobs))

    try:
        outs = asyncio.run(run())
    finally:
        client_log.removeHandler(handler)
    return outs, [e for e in errors if "error" in e.lower() or "truncat" in e.lower()]


def _serve(*args):
    return reward_server(args, cwd=str(ROOT))


def _stop(proc):
    """Terminate a served process; its stderr after the 'serving' line."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.log_reader.join(timeout=30)
    return "".join(proc.log_lines)


@pytest.mark.slow
def test_openrlhf_rollout_batch_at_default_limits_gets_every_group_whole(openrlhf):
    """256 prompts x 8 samples = 2,048 one-query requests at once (OpenRLHF's default batch is 1024 x n)."""
    n, prompts = 8, 256
    groups, expected = {}, {}
    for k in range(prompts):  # 7 samples answer k, one answers k+1: the whole group's majority is k
        p = f"Question {k}: what is {k}? Answer: "
        groups[p] = [f"\\boxed{{{k + 1 if j == k % n else k}}}" for j in range(n)]
        expected[p] = sorted(0.0 if j == k % n else 1.0 for j in range(n))
    url, proc = _serve("--scorer", "majority-vote", "--group-size", str(n))
    try:
        outs, client_errors = _rollout(openrlhf, url, groups)
    finally:
        _stop(proc)
    assert client_errors == []  # no request refused, dropped or retried
    assert all(o["reward"] is not None for o in outs)  # none lost
    exps = [openrlhf.to_experience(o) for o in outs]  # OpenRLHF's own tensor conversion
    got: dict[str, list[float]] = {}
    for o, e in zip(outs, exps, strict=True):
        got.setdefault(o["prompt"], []).append(float(e.rewards.item()))
        assert e.info["partial_group"].item() == 0.0 and e.info["group_size"].item() == n
    assert {p: sorted(v) for p, v in got.items()} == expected


@pytest.mark.slow
def test_openrlhf_without_label_key_gets_numbers_and_one_clear_log_line(openrlhf):
    groups = {f"Q{k}: 2+{k}? ": ["\\boxed{4}", "\\boxed{5}"] for k in range(3)}  # labels "" (no --data.label_key)
    url, proc = _serve("--scorer", "verifier", "--group-size", "2")
    try:
        outs, _ = _rollout(openrlhf, url, groups)
    finally:
        err = _stop(proc)
    exps = [openrlhf.to_experience(o) for o in outs]  # a null reward would raise here
    assert [float(e.rewards.item()) for e in exps] == [0.0] * 6
    assert [e.info["status_ok"].item() for e in exps] == [0.0] * 6
    lines = [x for x in err.splitlines() if "--data.label_key" in x]
    assert len(lines) == 1 and "verifier" in lines[0] and "no reference" in lines[0]


def test_openrlhf_prompt_longer_than_max_len_is_cut_from_the_left_and_still_scored(openrlhf):
    """OpenRLHF's executor keeps the last max_len - max_tokens prompt tokens; the server matches that tail."""
    prompt = "Context: " + " ".join(f"fact {i} is irrelevant." for i in range(80)) + " Question: what is 2+2? "
    assert len(openrlhf.tokenizer(prompt)["input_ids"]) > 64
    url, proc = _serve("--scorer", "verifier", "--group-size", "2")
    try:
        outs, client_log = _rollout(openrlhf, url, {prompt: ["\\boxed{4}", "\\boxed{5}"]}, {prompt: "4"}, max_len=64)
    finally:
        err = _stop(proc)
    assert any("Truncating" in x for x in client_log)  # OpenRLHF did cut the prompt
    assert not any("error" in x.lower() for x in client_log), client_log  # and no request failed
    exps = [openrlhf.to_experience(o) for o in outs]
    assert sorted(float(e.rewards.item()) for e in exps) == [0.0, 1.0]
    assert [e.info["status_ok"].item() for e in exps] == [1.0, 1.0] and "refused" not in err


def test_openrlhf_sends_a_list_label_and_any_reference_counts(openrlhf):
    """OpenRLHF's own executor posts a dataset label that is a list of answers; groups gather across requests."""
    url, proc = _serve("--scorer", "verifier", "--group-size", "3")
    try:
        outs, errors = _rollout(openrlhf, url, {"Half of 1? ": [r"\boxed{0.5}", r"\boxed{1/2}", r"\boxed{2}"]},
                                {"Half of 1? ": ["1/2", "0.5"]})
    finally:
        _stop(proc)
    assert errors == []
    exps = [openrlhf.to_experience(o) for o in outs]
    assert sorted(float(e.rewards.item()) for e in exps) == [0.0, 1.0, 1.0]


def test_openrlhf_client_carries_the_key_in_the_url(openrlhf):
    with BackgroundServer(reward_app(get_scorer("verifier"), api_key="s3cret")) as srv:
        outs, _ = _rollout(openrlhf, srv.url + "/get_reward?api_key=s3cret", {"2+2? ": ["\\boxed{4}"]}, {"2+2? ": "4"})
    assert outs[0]["reward"] == [1.0]


def test_serve_cli_refuses_a_keyless_public_bind_before_loading_the_scorer(monkeypatch):
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    monkeypatch.delenv("REWARDKIT_REWARD_API_KEY", raising=False)
    # an unknown scorer name: had the bind check come after loading, the error would be about the scorer
    r = CliRunner().invoke(app, ["serve", "--scorer", "no-such-scorer", "--host", "0.0.0.0", "--port", "0"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert r.stderr.startswith("error: serve: listening on 0.0.0.0 without an API key")
