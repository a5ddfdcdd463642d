"""A scripted judge backend for tests: replies and verdict probabilities come from plain functions.

One test double for every judge-based scorer: it answers from the prompt text with functions the test
supplies, records every request and every batch, and can fail a request with a typed status.

    judge = ScriptedJudge(reply=lambda prompt: "\\\\boxed{A}", probs=lambda prompt, choices: [0.8, 0.1, 0.1])
    ArenaScorer(judge=judge, mode="logit").score(groups)
    judge.batches   # [("verdict", 6), ...]: one entry per backend call with its batch size
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    JudgeBackend,
    VerdictRequest,
    VerdictResult,
    check_choices,
)
from rewardkit.gar.slicing import whitespace_tokens
from rewardkit.types import Status

#: reply(prompt) -> text, list of n texts, a failure Status, or a full Completion
Reply = Callable[[str], "str | list[str] | Status | Completion"]
#: probs(prompt, choices) -> one probability per choice, a failure Status, or a full VerdictResult
Probs = Callable[[str, Sequence[str]], "Sequence[float] | Status | VerdictResult"]


class ScriptedJudge(JudgeBackend):
    """A JudgeBackend whose answers are scripted by ``reply`` (generate) and ``probs`` (verdict_probs).

    ``reply`` / ``probs`` get the text of the last message (the prompt the scorer built). A returned
    ``Status`` fails that one request (e.g. ``Status.TIMEOUT``); a constant may be given instead of a
    function. Token counts are fixed per request (``prompt_tokens``, ``completion_tokens``) unless the
    function returns a full result. ``requests`` holds every request; ``batches`` one ``(kind, size)``
    entry per backend call, kind ``"generate"`` or ``"verdict"``.
    """

    def __init__(self, reply: Reply | str | None = None, probs: Probs | Sequence[float] | None = None, *,
                 model_id: str = "scripted", prompt_tokens: int = 10, completion_tokens: int = 5,
                 tokenizer: Callable[[Sequence[str]], list[int]] = whitespace_tokens):
        self._reply = reply
        self._probs = probs
        self.model_id = model_id
        self.prompt_tokens, self.completion_tokens = prompt_tokens, completion_tokens
        self._tokenizer = tokenizer
        self.requests: list[ChatRequest | VerdictRequest] = []
        self.batches: list[tuple[str, int]] = []

    # ------------------------------------------------------------------ what the test reads back
    @property
    def generate_batches(self) -> list[int]:
        return [n for k, n in self.batches if k == "generate"]

    @property
    def verdict_batches(self) -> list[int]:
        return [n for k, n in self.batches if k == "verdict"]

    @property
    def prompts(self) -> list[str]:
        return [r.messages[-1]["content"] for r in self.requests]

    # ------------------------------------------------------------------ JudgeBackend
    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        if self._reply is None:
            raise AssertionError("ScriptedJudge: generate() called but no reply was scripted")
        self.batches.append(("generate", len(requests)))
        self.requests.extend(requests)
        return [self._completion(r) for r in requests]

    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        if self._probs is None:
            raise AssertionError("ScriptedJudge: verdict_probs() called but no probabilities were scripted")
        check_choices(requests)  # refused as every real backend refuses them, before the call is recorded
        self.batches.append(("verdict", len(requests)))
        self.requests.extend(requests)
        return [self._verdict(r) for r in requests]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._tokenizer(texts)

    def _completion(self, r: ChatRequest) -> Completion:
        prompt = r.messages[-1]["content"]
        got: Any = self._reply(prompt) if callable(self._reply) else self._reply
        if isinstance(got, Completion):
            return got
        if isinstance(got, Status):
            return Completion([], got, error=f"scripted {got.value}")
        texts = [got] * r.n if isinstance(got, str) else list(got)[: r.n]
        return Completion(texts, prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens * len(texts))

    def _verdict(self, r: VerdictRequest) -> VerdictResult:
        prompt = r.messages[-1]["content"]
        got: Any = self._probs(prompt, tuple(r.choices)) if callable(self._probs) else self._probs
        if isinstance(got, VerdictResult):
            return got
        if isinstance(got, Status):
            return VerdictResult(np.array([]), got, error=f"scripted {got.value}")
        p = np.asarray(got, dtype=np.float64)
        if p.shape != (len(r.choices),):
            raise AssertionError(f"ScriptedJudge: {len(p)} probabilities for choices {tuple(r.choices)}")
        return VerdictResult(p, prompt_tokens=self.prompt_tokens)


__all__ = ["ScriptedJudge", "whitespace_tokens"]


def reward_server(args: Sequence[str], cwd: str | None = None) -> tuple[str, Any]:
    """Start a real ``rewardkit serve ARGS --port 0`` process; ``(its /get_reward URL, the Popen)`` once it
    listens. A thread keeps reading its stderr into ``proc.log_lines`` (an unread pipe would fill and stall
    the server); the caller terminates it."""
    import re
    import subprocess
    import sys
    import threading

    cmd = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()", "serve",
           "--port", "0", *args]
    proc = subprocess.Popen(cmd, cwd=cwd, stderr=subprocess.PIPE, text=True)
    line = ""
    while "serving" not in line:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError(f"rewardkit serve exited with {proc.returncode} before listening")
    proc.log_lines = []
    proc.log_reader = threading.Thread(target=lambda: proc.log_lines.extend(iter(proc.stderr.readline, "")),
                                       daemon=True)
    proc.log_reader.start()
    return re.search(r"(http://\S+/get_reward)", line).group(1), proc


def listening_ports(pid: int) -> list[int]:
    """TCP ports on which process ``pid`` listens, read from /proc (its socket inodes in /proc/net/tcp{,6}).
    For a server started with port 0 that does not say which port it got (vLLM logs the port it was given):
    a port picked by the caller, closed and handed over could be taken by another process meanwhile."""
    from pathlib import Path

    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # st 0A: LISTEN
                ports.append(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def import_or_skip(name: str, install: str) -> ModuleType:
    """``import name``, or skip the calling test (or module) saying why with the real import error and how to
    install it. ``pytest.importorskip(name, reason=...)`` shows only the reason: "verl not installed" where
    verl is installed and the error was ``No module named 'ray'``."""
    import pytest

    try:
        return importlib.import_module(name)
    except ImportError as e:
        pytest.skip(f"{name} does not import ({type(e).__name__}: {e}); {install}", allow_module_level=True)
