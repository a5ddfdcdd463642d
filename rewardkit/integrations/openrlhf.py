"""OpenRLHF's ``--remote_rm_url`` contract as an HTTP reward server over any scorer (``rewardkit serve``).

OpenRLHF POSTs ``{"query": [prompt + response, ...], "prompts": [prompt, ...], "labels": [label, ...]}``
to the URL and reads ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``. Each response is the
query with its prompt prefix removed; rows sharing a prompt and label form one group.

OpenRLHF 0.11's single-turn executor sends ONE query per request, so a group never arrives whole. With
``group_size=N`` (the trainer's ``n_samples_per_prompt``) the server holds each row until N rows of the
same (prompt, label) have arrived, across requests, then scores the full group in one scorer call and
answers every waiting request. A group still short after ``group_timeout`` seconds is scored as it
stands and reported in ``extra_logs["partial_group"]``. Without ``group_size`` a group is the rows of
one request.

A masked response (non-ok status) gets ``masked_reward`` when set, else ``null``: OpenRLHF turns rewards
into a tensor and fails loudly on ``null``, which is the point: no silent 0 unless asked for.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

from rewardkit.http_server import HTTPError, JSONRequest, Route, make_app
from rewardkit.integrations.common import GroupGatherer, group_rows
from rewardkit.scoring import Scorer
from rewardkit.types import Group, GroupScore


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
        if not isinstance(col, list) or not col:
            raise HTTPError(400, f"field '{name}': expected a non-empty list of strings")
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
    return RewardRequest(responses, list(prompts), [None if x is None else str(x) for x in labels])


def _reward(v: float, masked_reward: float | None) -> float | None:
    return (None if masked_reward is None else float(masked_reward)) if math.isnan(v) else float(v)


class RewardService:
    """The ``/get_reward`` handler: validates, groups by prompt (optionally across requests), scores."""

    def __init__(self, scorer: Scorer, *, group_size: int | None = None, group_timeout: float = 60.0,
                 masked_reward: float | None = None, max_items: int = 4096):
        self.scorer, self.group_size, self.group_timeout = scorer, group_size, group_timeout
        self.masked_reward, self.max_items = masked_reward, max_items
        self.gatherer = GroupGatherer(scorer, group_size or 1, group_timeout)

    def _row(self, s: GroupScore, i: int, partial: bool) -> dict[str, Any]:
        v = _reward(s.rewards[i], self.masked_reward)
        return {"reward": v, "status": s.statuses[i].value, "group_size": len(s.rewards), "partial": partial,
                "judge_calls": s.cost.judge_calls / max(len(s.rewards), 1)}

    async def handle(self, req: JSONRequest) -> dict[str, Any]:
        r = parse_request(req.body, self.max_items)
        if self.group_size is None:
            rows = await self._score_request(r)
        else:
            got = await asyncio.gather(*(self.gatherer.add((r.prompts[i], r.labels[i]), r.prompts[i], r.responses[i],
                                                           r.labels[i]) for i in range(len(r.responses))))
            rows = [self._row(s, j, partial) for s, j, partial in got]
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
        scores = await self.gatherer.score(groups)
        out: list[dict[str, Any] | None] = [None] * len(r.responses)
        for rows, s in zip(idx, scores, strict=True):
            for j, i in enumerate(rows):
                out[i] = self._row(s, j, partial=False)
        return out  # type: ignore[return-value]


def reward_app(scorer: Scorer, *, api_key: str | None = None, group_size: int | None = None,
               group_timeout: float = 60.0, masked_reward: float | None = None, max_items: int = 4096,
               max_body: int = 16 << 20, max_concurrency: int = 256, request_timeout: float = 600.0) -> Any:
    """The ASGI app: ``POST /get_reward`` (bearer key when set) and a public ``GET /health``."""
    svc = RewardService(scorer, group_size=group_size, group_timeout=group_timeout, masked_reward=masked_reward,
                        max_items=max_items)
    if group_size is not None and max_concurrency < group_size:
        raise ValueError(f"max_concurrency ({max_concurrency}) must be >= group_size ({group_size}): "
                         "a group's requests wait for each other")

    def health(req: JSONRequest) -> dict[str, Any]:
        return {"status": "ok", "scorer": getattr(scorer, "name", type(scorer).__name__), "group_size": group_size}

    return make_app([Route("POST", "/get_reward", svc.handle), Route("GET", "/health", health, public=True)],
                    api_key=api_key, max_body=max_body, max_concurrency=max_concurrency,
                    request_timeout=request_timeout)

