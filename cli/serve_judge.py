"""``rewardkit serve-judge``: share one judge model over an OpenAI-compatible HTTP endpoint."""

from __future__ import annotations

from typing import Annotated

import typer
from rewardkit.cli.common import BatchTokens, Device, DType, Port, Threads, judge_spec


def serve_judge(
    spec: Annotated[str, typer.Argument(help="backend spec: smollm2, a model dir/hub id, vllm:MODEL, llamacpp:X.gguf, http://...")] = "smollm2",
    host: Annotated[str, typer.Option(help="interface to bind (0.0.0.0 to share on the network: needs --api-key)")] = "127.0.0.1",
    port: Port = 8000,
    model_name: Annotated[str | None, typer.Option(help="model id reported by /v1/models (default: the backend's)")] = None,
    device: Device = None,
    dtype: DType = None,
    batch_tokens: BatchTokens = None,
    threads: Threads = None,
    batch_size: Annotated[int | None, typer.Option(help="transformers: cap on rows per forward pass")] = None,
    max_batch: Annotated[int, typer.Option(min=1, help="requests gathered into one backend call")] = 32,
    batch_wait: Annotated[float, typer.Option(min=0.0, help="seconds to wait for more requests before a batch runs")] = 0.01,
    cache: Annotated[str | None, typer.Option(help="judge cache: 'default' or a sqlite path (off when unset)")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="REWARDKIT_JUDGE_API_KEY", help="require this bearer token")] = None,
    max_body: Annotated[int, typer.Option(min=1, help="largest request body in bytes (413 above)")] = 2 << 20,
    max_concurrency: Annotated[int, typer.Option(min=1, help="requests in progress at once (503 above)")] = 256,
    request_timeout: Annotated[float, typer.Option(min=0.001, help="seconds of work per request once its body arrived, queueing included (504)")] = 600.0,
    body_timeout: Annotated[float, typer.Option(min=0.001, help="seconds for a request's body to arrive (408)")] = 30.0,
    max_n: Annotated[int, typer.Option(min=1, help="largest 'n' (samples per request)")] = 16,
    max_tokens: Annotated[int, typer.Option(min=1, help="largest 'max_tokens' per request")] = 4096,
    max_messages: Annotated[int, typer.Option(min=1, help="most messages per request")] = 64,
    max_chars: Annotated[int, typer.Option(min=1, help="most characters over all messages of a request")] = 200_000,
) -> None:
    """Serve a judge at /v1/chat/completions and /v1/models (OpenAI shapes) until interrupted."""
    from rewardkit.cli.common import fail

    from rewardkit.backends import check_judge
    from rewardkit.backends.server import JudgeLimits, JudgeServer
    from rewardkit.http_server import require_key_off_loopback

    try:  # before the model loads: a keyless judge stays on this machine
        require_key_off_loopback(host, api_key, "serve-judge")
    except ValueError as e:
        raise fail(e) from None

    spec = judge_spec(spec, device, dtype, batch_tokens, threads, flag="SPEC") or spec
    opts = {k: v for k, v in {"batch_size": batch_size}.items() if v is not None}
    if cache:
        opts["cache"] = True if cache == "default" else cache
    backend = check_judge(spec, **opts)  # loaded, or its server asked, before listening
    typer.echo(f"judge: {backend.describe()}", err=True)
    server = JudgeServer(backend, host, port, model_name=model_name, max_batch=max_batch,
                         batch_wait=batch_wait, api_key=api_key, max_body=max_body,
                         max_concurrency=max_concurrency, request_timeout=request_timeout, body_timeout=body_timeout,
                         limits=JudgeLimits(max_n, max_tokens, max_messages, max_chars))
    try:
        server.serve_forever(on_ready=lambda url: typer.echo(
            f"serving {server.model_name} at {url} (Ctrl-C to stop)"))
    except KeyboardInterrupt:
        pass
    typer.echo("stopped")
