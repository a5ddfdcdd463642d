"""OpenRLHF's ``--reward.remote_url`` contract as an HTTP reward server over any scorer (``rewardkit serve``).

OpenRLHF POSTs ``{"query": [prompt + response, ...], "prompts": [prompt, ...], "labels": [label, ...]}``
to the URL and reads ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``. Each response is the
query with its prompt prefix removed; rows sharing a prompt and label form one group.

OpenRLHF 0.11's single-turn executor sends ONE query per request, and a rollout batch puts
``rollout.batch_size x n_samples_per_prompt`` requests in flight at once (1024 x n by default). With
``group_size=N`` (the trainer's ``n_samples_per_prompt``) the server holds each row until N rows of the same
(prompt, label) have arrived, across requests, then scores the full group in one scorer call and answers
every waiting request. A waiting request holds only a future: ``max_pending`` (default 16,384) bounds the
requests held at once, waiting or being scored; scoring itself is one worker that batches every closed
group into one scorer call. A group still short after ``group_timeout`` seconds is scored as it stands and
reported in ``extra_logs["partial_group"]``. Without ``group_size`` a group is the rows of one request.

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
import logging
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from rewardkit.http_server import HTTPError, JSONRequest, Route, make_app
from rewardkit.integrations.common import GroupGatherer, group_rows
from rewardkit.scoring import Scorer
from rewardkit.types import Group, GroupScore

log = logging.getLogger(__name__)
KEY_PARAM = "api_key"


@dataclass(frozen=True)
class RewardRequest:
    responses: list[str]
    prompts: list[str]
    labels: list[str | None]


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
        raise HTTPError(400, f"field 'labels': expected a list of {len(queries)} labels (string, number or null)")
    for i, x in enumerate(labels):
        if x is not None and (isinstance(x, bool) or not isinstance(x, (str, int, float))):
            raise HTTPError(400, f"field 'labels[{i}]': expected a string, number or null, got {type(x).__name__}")
    responses = []
    for i, (q, p) in enumerate(zip(queries, prompts, strict=True)):
        if not q.startswith(p):
            raise HTTPError(400, f"field 'query[{i}]': does not start with prompts[{i}] (query = prompt + response)")
        responses.append(q[len(p):])
    # an empty label is no reference: OpenRLHF sends "" for every row when --data.label_key is unset
    return RewardRequest(responses, list(prompts), [None if x is None or x == "" else str(x) for x in labels])


def _reward(v: float, masked_reward: float | None) -> float | None:
    return (None if masked_reward is None else float(masked_reward)) if math.isnan(v) else float(v)


class RewardService:
    """The ``/get_reward`` handler: validates, groups by prompt (optionally across requests), scores."""

    def __init__(self, scorer: Scorer, *, group_size: int | None = None, group_timeout: float = 150.0,
                 masked_reward: float | None = 0.0, max_items: int = 4096):
        self.scorer, self.group_size, self.group_timeout = scorer, group_size, group_timeout
        self.masked_reward, self.max_items = masked_reward, max_items
        self.gatherer = GroupGatherer(scorer, group_size or 1, group_timeout)
        self._said: set[str] = set()

    def _say_once(self, what: str, message: str) -> None:
        if what not in self._said:
            self._said.add(what)
            log.error(message)

    def _check(self, s: GroupScore, reference: str | None, partial: bool) -> None:
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

    async def _add(self, prompt: str, response: str, label: str | None) -> dict[str, Any]:
        s, j, partial = await self.gatherer.add((prompt, label), prompt, response, label)
        self._check(s, label, partial)
        return self._row(s, j, partial)

    async def handle(self, req: JSONRequest) -> dict[str, Any]:
        r = parse_request(req.body, self.max_items)
        if self.group_size is None:
            rows = await self._score_request(r)
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


def reward_app(scorer: Scorer, *, api_key: str | None = None, group_size: int | None = None,
               group_timeout: float = 150.0, masked_reward: float | None = 0.0, max_items: int = 4096,
               max_body: int = 16 << 20, max_pending: int = 16384, request_timeout: float = 600.0) -> Any:
    """The ASGI app: ``POST /get_reward`` (bearer key or ``?api_key=`` when set) and a public ``GET /health``.

    ``max_pending`` bounds the requests held at once (waiting for their group or for the scorer): 503 above.
    """
    if not group_timeout < request_timeout:
        raise ValueError(f"group_timeout ({group_timeout:g}s) must be shorter than request_timeout "
                         f"({request_timeout:g}s): a short group is answered before its requests time out")
    if group_size is not None and max_pending < group_size:
        raise ValueError(f"max_pending ({max_pending}) must be >= group_size ({group_size}): "
                         "a group's requests wait for each other")
    svc = RewardService(scorer, group_size=group_size, group_timeout=group_timeout, masked_reward=masked_reward,
                        max_items=max_items)

    def health(req: JSONRequest) -> dict[str, Any]:
        return {"status": "ok", "scorer": getattr(scorer, "name", type(scorer).__name__), "group_size": group_size,
                "waiting_rows": svc.gatherer.waiting, **svc.gatherer.counts}

    app = make_app([Route("POST", "/get_reward", svc.handle), Route("GET", "/health", health, public=True)],
                   api_key=api_key, max_body=max_body, max_concurrency=max_pending, request_timeout=request_timeout)
    return KeyInURL(app)
