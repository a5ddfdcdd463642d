"""``rewardkit serve``: an HTTP reward server over any scorer, speaking OpenRLHF's ``--remote_rm_url`` contract."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def serve(
    scorer: Annotated[str, typer.Option("--scorer", "-s", help="Scorer name (see `rewardkit scorers`) or module:Class.")],
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", help="Scorer option KEY=VALUE (repeatable).")] = None,
    judge: Annotated[Optional[str], typer.Option(help="Judge backend spec for judge-based scorers.")] = None,
    host: Annotated[str, typer.Option(help="Interface to bind (0.0.0.0 to share on the network).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0 picks a free one).")] = 5000,
    group_size: Annotated[Optional[int], typer.Option(help="Hold rows until N of one prompt arrived (OpenRLHF's n_samples_per_prompt).")] = None,
    group_timeout: Annotated[float, typer.Option(help="Seconds to wait for a group to fill before scoring it as is.")] = 60.0,
    masked_reward: Annotated[Optional[float], typer.Option(help="Reward sent for a masked response (default: null).")] = None,
    max_items: Annotated[int, typer.Option(help="Most queries in one request.")] = 4096,
    max_concurrency: Annotated[int, typer.Option(help="Most requests in flight (>= group size).")] = 256,
    api_key: Annotated[Optional[str], typer.Option(envvar="REWARDKIT_REWARD_API_KEY", help="Require this bearer token.")] = None,
) -> None:
    """Serve POST /get_reward ({query, prompts, labels} -> {rewards, scores, extra_logs}) until interrupted."""
    from rewardkit.cli.common import parse_pairs

    from rewardkit.http_server import serve as run
    from rewardkit.integrations.common import load_scorer
    from rewardkit.integrations.openrlhf import reward_app

    sc = load_scorer(scorer, parse_pairs(option, "--option"), judge)
    app = reward_app(sc, api_key=api_key, group_size=group_size, group_timeout=group_timeout,
                     masked_reward=masked_reward, max_items=max_items, max_concurrency=max_concurrency)
    run(app, host, port, on_ready=lambda url: typer.echo(f"serving {scorer} rewards at {url}/get_reward", err=True))
