"""OpenRLHF's ``--reward.remote_url`` contract as an HTTP reward server over any scorer (``rewardkit serve``).

OpenRLHF POSTs ``{"query": [prompt + response, ...], "prompts": [prompt, ...], "labels": [label, ...]}``
to the URL and reads ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``. Each response is the
query with its prompt prefix removed (or with the tail of a prompt OpenRLHF cut from the left: ``split_query``);
rows sharing a prompt and label form one group.

OpenRLHF 0.11's single-turn executor sends ONE query per request, and a rollout batch puts
``rollout.batch_size x n_samples_per_prompt`` requests in flight at once (1024 x n by default). With
``group_size=N`` (the trainer's ``n_samples_per_prompt``) the server holds each row until N rows of the same
(prompt, label) have arrived, across requests, then scores the full group in one scorer call and answers
every waiting request. A waiting request holds only a future: ``max_pending`` (default 32,768: 1,024 x 32)
bounds the requests held at once, waiting or being scored; scoring itself is one worker that scores every
group closed so far in one scorer call. A group still short after ``group_timeout`` seconds is scored as it
stands and reported in ``extra_logs["partial_group"]``. ``group_size="request"`` makes the rows of one
request a group; a group-relative scorer refuses to run without one or the other (``check_group_size``).
Every refused request is logged once per reason (``RefusalLog``): OpenRLHF discards the body.

OpenRLHF turns every reward into a tensor, so a masked response (non-ok status) gets ``masked_reward``
(0.0 by default; ``None`` sends ``null``, for other clients) and the mask travels in
``extra_logs["status_ok"]``. OpenRLHF sends ``labels: ""`` when ``--data.label_key`` is unset: an empty
label is no reference, and a scorer that needs one masks those rows; the server says so once in its log.
OpenRLHF's client sends no headers of its own, so the API key may also ride in the URL:
``http://host:5000/get_reward?api_key=KEY``. OpenRLHF 0.11.0-0.11.1 shard each request over every URL
(the others get empty lists: answered with empty lists); 0.11.2 rotates URLs per request, which splits
groups: give it ONE URL when ``group_size`` is set.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from rewardkit.http_server import HTTPError, JSONRequest, Route, make_app
from rewardkit.integrations.common import GroupGatherer, group_rows
from rewardkit.scoring import Scorer, is_group_relative
from rewardkit.types import Group, GroupScore, Reference, reference_value

log = logging.getLogger(__name__)
KEY_PARAM = "api_key"
PER_REQUEST = "request"  # --group-size request: each request carries whole groups
OPENRLHF_CLIENT_TIMEOUT = 180.0  # seconds: OpenRLHF 0.11's aiohttp.ClientTimeout(total=180) per attempt
MIN_TAIL = 16  # characters of a left-cut prompt a query must still start with


@dataclass(frozen=True)
class RewardRequest:
    responses: list[str]
    prompts: list[str]
    labels: list[Reference | None]  # a list label is several references, any of which is right


def parse_request(body: Any, max_items: int = 4096) -> RewardRequest:
    """Validate an OpenRLHF reward request; any problem is an HTTPError 400 naming the field."""
    if not isinstance(body, dict):
        raise HTTPError(400, "request body must be a JSON object with 'query', 'prompts' and 'labels'")
    unknown = set(body) - {"query", "prompts", "labels"}
    if unknown:
        raise HTTPError(400, f"unknown field(s) {sorted(unknown)}; expected 'query', 'prompts', 'labels'")
    queries, prompts = body.get("query"), body.get("prompts")
    for name, col in (("query", queries), ("prompts", prompts)):
        if not isinstance(col, list):
            raise HTTPError(400, f"field '{name}': expected a list of strings")
        bad = next((i for i, x in enumerate(col) if not isinstance(x, str)), None)
        if bad is not None:
            raise HTTPError(400, f"field '{name}[{bad}]': expected a string, got {type(col[bad]).__name__}")
    if len(queries) > max_items:
        raise HTTPError(413, f"field 'query': {len(queries)} items; this server takes at most {max_items}")
    if len(prompts) != len(queries):
        raise HTTPError(400, f"field 'prompts': {len(prompts)} prompts for {len(queries)} queries")
    labels = body.get("labels")
    if labels is None:
        labels = [None] * len(queries)
    if not isinstance(labels, list) or len(labels) != len(queries):
        raise HTTPError(400, f"field 'labels': expected a list of {len(queries)} labels (string, number, list or null)")
    refs: list[Reference | None] = []
    for i, x in enumerate(labels):
        if x == "" or x == []:  # OpenRLHF sends "" for every row when --data.label_key is unset: no reference
            refs.append(None)
            continue
        try:
            refs.append(reference_value(x, f"labels[{i}]"))
        except (TypeError, ValueError) as e:
            where, _, msg = str(e).partition(": ")
            raise HTTPError(400, f"field '{where}': {msg}") from None
    responses = []
    for i, (q, p) in enumerate(zip(queries, prompts, strict=True)):
        response = split_query(q, p)
        if response is None:
            raise HTTPError(400, f"field 'query[{i}]': starts with neither prompts[{i}] nor its last {MIN_TAIL} "
                                 "characters (query = prompt + response; a long prompt may be cut from the left)")
        responses.append(response)
    return RewardRequest(responses, list(prompts), refs)


def split_query(query: str, prompt: str) -> str | None:
    """The response in ``query`` (= prompt + response), or None when the query does not start with the prompt.

    OpenRLHF keeps only the LAST ``max_len - max_new_tokens`` tokens of a long prompt
    (``prompt_token_ids[-max_prompt_length:]``) and decodes them with the response, while ``prompts[i]`` stays
    whole: such a query starts with a tail of the prompt (at least ``MIN_TAIL`` characters, the longest that
    fits). A cut through a multi-byte character decodes as U+FFFD, which is skipped.

    >>> split_query("Q: 2+2? A: 4", "Q: 2+2? A:")
    ' 4'
    >>> split_query("of a very long question? A: 4", "The start of a very long question? A:")
    ' 4'
    >>> split_query("something else", "Q: 2+2? A:") is None
    True
    """
    if query.startswith(prompt):
        return query[len(prompt):]
    q = query.lstrip("\ufffd")
    probe = q[:MIN_TAIL]
    if len(probe) < MIN_TAIL:
        return None
    i = prompt.find(probe, 1)
    while i != -1:  # the first (longest) tail of the prompt that the query starts with
        if q.startswith(prompt[i:]):
            return q[len(prompt) - i:]
        i = prompt.find(probe, i + 1)
    return None


def check_group_size(scorer: Scorer, group_size: int | str | None) -> int | str:
    """``group_size`` checked against the scorer: an int >= 1, or ``PER_REQUEST``; None means per request,
    which a group-relative scorer refuses (OpenRLHF sends one query per request: each group would be one
    response, and a vote of one is a constant reward)."""
    if group_size is None:
        if is_group_relative(scorer):
            name = getattr(scorer, "name", type(scorer).__name__)
            raise ValueError(f"scorer '{name}' rewards a response against its group, but no --group-size was "
                             "given: set it to OpenRLHF's n_samples_per_prompt (OpenRLHF sends one response per "
                             f"request), or to '{PER_REQUEST}' if each request carries whole groups")
        return PER_REQUEST
    if group_size == PER_REQUEST:
        return PER_REQUEST
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"option 'group_size': expected an integer >= 1 or '{PER_REQUEST}', got {group_size!r}")
    return group_size


def _reward(v: float, masked_reward: float | None) -> float | None:
    return (None if masked_reward is None else float(masked_reward)) if math.isnan(v) else float(v)


class RewardService:
    """The ``/get_reward`` handler: validates, groups by prompt (optionally across requests), scores.

    ``group_size``: N gathers rows across requests until N share a (prompt, label); ``"request"`` (or None,
    for a scorer that is not group-relative) makes the rows of one request their own groups.
    """

    def __init__(self, scorer: Scorer, *, group_size: int | str | None = None, group_timeout: float = 150.0,
                 masked_reward: float | None = 0.0, max_items: int = 4096):
        self.group_size = check_group_size(scorer, group_size)
        self.scorer, self.group_timeout = scorer, group_timeout
        self.masked_reward, self.max_items = masked_reward, max_items
        gathering = isinstance(self.group_size, int)
        self.gatherer = GroupGatherer(scorer, self.group_size if gathering else 1, group_timeout)  # type: ignore[arg-type]
        self._said: set[str] = set()

    def _say_once(self, what: str, message: str) -> None:
        if what not in self._said:
            self._said.add(what)
            log.error(message)

    def _check(self, s: GroupScore, reference: Reference | None, partial: bool) -> None:
        """One server-log line the first time a reference-less group is masked, or a group closes short."""
        masked = [m for st, m in zip(s.statuses, s.messages or [None] * len(s.statuses), strict=True)
                  if st.value != "ok"]
        if reference is None and masked and len(masked) == len(s.statuses):
            name = getattr(self.scorer, "name", type(self.scorer).__name__)
            self._say_once("reference", (
                f"rewardkit serve: scorer '{name}' masked every response of a group that has no reference "
                f"answer (labels were empty or null: OpenRLHF sends labels \"\" when --data.label_key is unset; "
                f"start it with --data.label_key ANSWER_COLUMN); scorer says: {masked[0] or 'no message'}"))
        if partial:
            self._say_once("partial", (
                f"rewardkit serve: a group closed with {len(s.statuses)} of {self.group_size} rows after "
                f"{self.group_timeout:g}s (extra_logs.partial_group = 1); usual causes: several "
                "--reward.remote_url (OpenRLHF 0.11.2 rotates them per request: give it one URL), "
                "--group-size not equal to n_samples_per_prompt (or to eval.n_samples_per_prompt while "
                "evaluating), or samples of one prompt finishing more than group-timeout apart"))

    def _row(self, s: GroupScore, i: int, partial: bool) -> dict[str, Any]:
        v = _reward(s.rewards[i], self.masked_reward)
        return {"reward": v, "status": s.statuses[i].value, "group_size": len(s.rewards), "partial": partial,
                "judge_calls": s.cost.judge_calls / max(len(s.rewards), 1)}

    async def _add(self, prompt: str, response: str, label: Reference | None) -> dict[str, Any]:
        s, j, partial = await self.gatherer.add((prompt, label), prompt, response, label)
        self._check(s, label, partial)
        return self._row(s, j, partial)

    async def handle(self, req: JSONRequest) -> dict[str, Any]:
        r = parse_request(req.body, self.max_items)
        if not isinstance(self.group_size, int):
            rows = await self._score_request(r)
        elif len(r.responses) == 1:  # OpenRLHF's usual request: no task per row
            rows = [await self._add(r.prompts[0], r.responses[0], r.labels[0])]
        else:
            rows = await asyncio.gather(*(self._add(r.prompts[i], r.responses[i], r.labels[i])
                                          for i in range(len(r.responses))))
        rewards = [x["reward"] for x in rows]
        return {"rewards": rewards, "scores": rewards, "extra_logs": {
            "status_ok": [1.0 if x["status"] == "ok" else 0.0 for x in rows],
            "group_size": [float(x["group_size"]) for x in rows],
            "partial_group": [1.0 if x["partial"] else 0.0 for x in rows],
            "judge_calls": [float(x["judge_calls"]) for x in rows]}}

    async def _score_request(self, r: RewardRequest) -> list[dict[str, Any]]:
        idx = group_rows(list(zip(r.prompts, r.labels, strict=True)))
        groups = [Group(f"g{k}", r.prompts[rows[0]], [r.responses[i] for i in rows], reference=r.labels[rows[0]])
                  for k, rows in enumerate(idx)]
        scores = await self.gatherer.score(groups) if groups else []
        out: list[dict[str, Any] | None] = [None] * len(r.responses)
        for rows, s, g in zip(idx, scores, groups, strict=True):
            self._check(s, g.reference, False)
            for j, i in enumerate(rows):
                out[i] = self._row(s, j, partial=False)
        return out  # type: ignore[return-value]


class KeyInURL:
    """ASGI wrapper: ``?api_key=KEY`` becomes ``Authorization: Bearer KEY`` (OpenRLHF sends no headers), so
    the server's own check (constant time, before the body) applies unchanged; the key leaves the query."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and KEY_PARAM.encode() in scope.get("query_string", b""):
            pairs = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
            keys = [v for k, v in pairs if k == KEY_PARAM]
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"authorization"]
            headers.append((b"authorization", f"Bearer {keys[-1]}".encode("latin-1", "replace")))
            scope = {**scope, "headers": headers,
                     "query_string": urlencode([(k, v) for k, v in pairs if k != KEY_PARAM]).encode("latin-1")}
        await self.app(scope, receive, send)


class RefusalLog:
    """ASGI wrapper: every refused request (status 4xx/5xx) is counted, and each distinct reason is logged once.

    OpenRLHF's client discards an error body: it retries five times, then leaves the reward ``None`` and the
    run fails later (``reward_model_group is required``). The reason must be in the server's log, once per
    reason (numbers in it, such as a row index, do not make a new reason), not once per retry.
    """

    def __init__(self, app: Any):
        self.app = app
        self.counts: dict[str, int] = {}
        self._said: set[str] = set()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status, chunks = 0, []

        async def watch(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status >= 400:
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    self._refused(status, b"".join(chunks), scope)
            await send(message)

        await self.app(scope, receive, watch)

    def _refused(self, status: int, body: bytes, scope: dict) -> None:
        self.counts[str(status)] = self.counts.get(str(status), 0) + 1
        try:
            reason = str(json.loads(body)["error"]["message"])
        except (ValueError, KeyError, TypeError):
            reason = body[:200].decode("utf-8", "replace")
        key = f"{status} {re.sub(r'[0-9]+', 'N', reason)}"
        if key not in self._said:
            self._said.add(key)
            log.error("rewardkit serve: refused %s %s with %d: %s (logged once per reason; /health counts every "
                      "refusal)", scope.get("method", "?"), scope.get("path", "?"), status, reason)


def reward_app(scorer: Scorer, *, api_key: str | None = None, group_size: int | str | None = None,
               group_timeout: float = 150.0, masked_reward: float | None = 0.0, max_items: int = 4096,
               max_body: int = 16 << 20, max_pending: int = 32768, request_timeout: float = 600.0) -> Any:
    """The ASGI app: ``POST /get_reward`` (bearer key or ``?api_key=`` when set) and a public ``GET /health``.

    ``group_size``: see ``RewardService`` (a group-relative scorer needs one). ``max_pending`` bounds the
    requests held at once (waiting for their group or for the scorer): 503 above. Every refusal is
    logged once per reason (``RefusalLog``).
    """
    if not group_timeout < request_timeout:
        raise ValueError(f"group_timeout ({group_timeout:g}s) must be shorter than request_timeout "
                         f"({request_timeout:g}s): a short group is answered before its requests time out")
    svc = RewardService(scorer, group_size=group_size, group_timeout=group_timeout, masked_reward=masked_reward,
                        max_items=max_items)
    if isinstance(svc.group_size, int) and max_pending < svc.group_size:
        raise ValueError(f"max_pending ({max_pending}) must be >= group_size ({svc.group_size}): "
                         "a group's requests wait for each other")
    if isinstance(svc.group_size, int) and group_timeout >= OPENRLHF_CLIENT_TIMEOUT:
        log.warning("rewardkit serve: --group-timeout %gs is not below OpenRLHF's %gs client timeout: a request "
                    "whose group is short gives up (and is retried) before the server answers it; use e.g. 150",
                    group_timeout, OPENRLHF_CLIENT_TIMEOUT)
    refusals: RefusalLog | None = None

    def health(req: JSONRequest) -> dict[str, Any]:
        return {"status": "ok", "scorer": getattr(scorer, "name", type(scorer).__name__),
                "group_size": svc.group_size, "waiting_rows": svc.gatherer.waiting, **svc.gatherer.counts,
                "refused": dict(refusals.counts) if refusals else {}}

    app = make_app([Route("POST", "/get_reward", svc.handle), Route("GET", "/health", health, public=True)],
                   api_key=api_key, max_body=max_body, max_concurrency=max_pending, request_timeout=request_timeout)
    refusals = RefusalLog(app)
    return KeyInURL(refusals)
