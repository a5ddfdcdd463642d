"""Kimina Lean Server client: ``POST /api/check`` with a batch of snippets, ``GET /health``."""

from __future__ import annotations

import os
from collections.abc import Sequence

import httpx

from rewardkit.backends.spec import redact
from rewardkit.jury.lean.check import LeanRun, require_settings, split_header, unwritable


class KiminaClient:
    """Sends ``{"snippets": [{"id", "code"}], "timeout", "debug": false, "reuse"}`` and reads
    ``{"results": [{"id", "time", "error"?, "response"?}]}``; ``response`` is the REPL response.

    ``url`` defaults to ``$KIMINA_URL`` and ``api_key`` to ``$KIMINA_API_KEY`` (sent as a Bearer token).
    ``positions``: ``source`` when the server reports lines of the whole snippet (Kimina Lean Server with its
    header-offset fix), ``body`` when it reports lines after the import header (older servers); the client
    then adds the header's lines, so the axiom report is matched to the checker's own command line.
    ``timeout`` is each snippet's limit on the server; the HTTP request waits ``http_timeout`` (default
    ``2 * timeout + 30`` s: a batch queued behind another one on the server, plus the transfer).
    """

    name = "kimina"

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = 300.0,
        reuse: bool = True,
        batch_size: int = 64,
        http_timeout: float | None = None,
        positions: str = "source",
    ):
        if positions not in ("source", "body"):
            raise ValueError(f"KiminaClient: positions={positions!r}: expected 'source' or 'body'")
        require_settings("KiminaClient", "count", batch_size=batch_size)
        require_settings("KiminaClient", "number", timeout=timeout, http_timeout=http_timeout)
        self.positions = positions
        url = url or os.environ.get("KIMINA_URL")
        if not url:
            raise ValueError("no Kimina Lean Server URL: pass url=... or set KIMINA_URL")
        self.url = url.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("KIMINA_API_KEY")
        self.timeout, self.reuse, self.batch_size = timeout, reuse, batch_size
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self.client = httpx.Client(headers=headers, timeout=http_timeout or timeout * 2 + 30)

    def health(self) -> bool:
        try:
            return self.client.get(f"{self.url}/health").status_code == 200
        except httpx.HTTPError:
            return False

    def run_many(self, sources: Sequence[str]) -> list[LeanRun]:
        out: list[LeanRun] = []
        for k in range(0, len(sources), self.batch_size):
            out += self._batch(list(sources[k:k + self.batch_size]))
        return out

    def _batch(self, sources: list[str]) -> list[LeanRun]:
        out: list[LeanRun | None] = [unwritable(s) for s in sources]  # one broken source must not fail the request
        send = [i for i, run in enumerate(out) if run is None]
        if not send:
            return out  # type: ignore[return-value]
        body = {"snippets": [{"id": str(i), "code": sources[i]} for i in send],
                "timeout": self.timeout, "debug": False, "reuse": self.reuse}
        where = f"Kimina server {redact(self.url)}"
        try:
            r = self.client.post(f"{self.url}/api/check", json=body)
            r.raise_for_status()
            reply = r.json()
        except (httpx.HTTPError, ValueError) as e:
            failed = LeanRun(status="error", error=f"{where}: {redact(str(e))}")
        else:
            results = reply.get("results") if isinstance(reply, dict) else None
            failed = None if isinstance(results, list) else LeanRun(
                status="error", error=f"{where}: the reply has no 'results' list ({redact(r.text[:200])!r})")
        if failed is not None:
            for i in send:
                out[i] = failed
            return out  # type: ignore[return-value]
        by_id: dict[str, list[dict]] = {}
        for res in results:
            if isinstance(res, dict):
                by_id.setdefault(str(res.get("id")), []).append(res)
        for i in send:
            got = by_id.get(str(i), [])
            if len(got) != 1:  # two answers for one snippet: which is Lean's cannot be told
                out[i] = LeanRun(status="error", error=f"{where} returned {len(got) or 'no'} result"
                                                       f"{'s' if len(got) > 1 else ''} for snippet {i}")
                continue
            res = got[0]
            try:
                out[i] = self._run(res, sources[i])
            except (TypeError, ValueError, AttributeError, KeyError) as e:  # a field of the wrong shape
                out[i] = LeanRun(status="error", error=f"{where}: malformed result for snippet {i} "
                                                       f"({type(e).__name__}: {e}): {redact(str(res)[:200])!r}")
        return out  # type: ignore[return-value]

    def _run(self, res: dict, source: str) -> LeanRun:
        """One snippet's result (``{"id", "time", "error"?, "response"?}``) as a LeanRun."""
        t = float(res.get("time") or 0.0)
        if res.get("error"):
            err = str(res["error"])
            status = "timeout" if "time" in err.lower() and "out" in err.lower() else "error"
            return LeanRun(status=status, error=f"Kimina: {err}", seconds=t)
        resp = res.get("response")
        if resp is None:  # neither error nor response: not a check Lean ran (read as {}, it was a rejection)
            raise ValueError("a result with neither 'error' nor 'response'")
        if not isinstance(resp, dict):
            raise TypeError(f"'response' is a {type(resp).__name__}, not an object")
        offset = split_header(source)[0].count("\n") if self.positions == "body" else 0
        return LeanRun.from_repl(resp, offset, t, "Kimina REPL")

    def close(self) -> None:
        self.client.close()
