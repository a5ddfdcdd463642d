"""``rewardkit serve-judge``: share one judge model over an OpenAI-compatible HTTP endpoint."""

from __future__ import annotations

from typing import Annotated

import typer


def serve_judge(
    spec: Annotated[str, typer.Argument(help="backend spec: smollm2, a model dir/hub id, vllm:MODEL, llamacpp:X.gguf, http://...")] = "smollm2",
    host: Annotated[str, typer.Option(help="interface to bind (0.0.0.0 to share on the network)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0 picks a free one)")] = 8000,
    model_name: Annotated[str | None, typer.Option(help="model id reported by /v1/models (default: the backend's)")] = None,
    dtype: Annotated[str | None, typer.Option(help="transformers dtype: float32, bfloat16, auto")] = None,
    batch_size: Annotated[int | None, typer.Option(help="transformers rows per forward pass")] = None,
    max_batch: Annotated[int, typer.Option(help="requests gathered into one backend call")] = 32,
    batch_wait: Annotated[float, typer.Option(help="seconds to wait for more requests before a batch runs")] = 0.01,
    cache: Annotated[str | None, typer.Option(help="judge cache: 'default' or a sqlite path (off when unset)")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="REWARDKIT_JUDGE_API_KEY", help="require this bearer token")] = None,
) -> None:
    """Serve a judge at /v1/chat/completions and /v1/models (OpenAI shapes) until interrupted."""
    from rewardkit.backends import load_backend
    from rewardkit.backends.server import JudgeServer

    opts = {k: v for k, v in {"dtype": dtype, "batch_size": batch_size}.items() if v is not None}
    if cache:
        opts["cache"] = True if cache == "default" else cache
    backend = load_backend(spec, **opts)
    server = JudgeServer(backend, host, port, model_name=model_name, max_batch=max_batch,
                         batch_wait=batch_wait, api_key=api_key)
    typer.echo(f"serving {server.model_name} at {server.url} (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        typer.echo("stopped")
