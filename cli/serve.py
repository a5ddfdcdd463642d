"""``rewardkit serve``: an HTTP reward server over any scorer, speaking OpenRLHF's ``--reward.remote_url`` contract."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rewardkit.cli.common import Port


def _masked(text: str) -> float | None:
    """``--masked-reward``: a number, or ``null`` to send JSON null (clients that mask on their side)."""
    if text.strip().lower() in ("null", "none"):
        return None
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"expected a number or 'null', got {text!r}") from None


def _group_size(text: str | None) -> int | str | None:
    """``--group-size``: an integer >= 1, or ``request`` (each request carries whole groups); else one line, exit 2."""
    from rewardkit.cli.common import fail

    from rewardkit.integrations.openrlhf import PER_REQUEST

    if text is None or text.strip().lower() == PER_REQUEST:
        return None if text is None else PER_REQUEST
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise fail(f"serve: --group-size: expected an integer >= 1 (OpenRLHF's n_samples_per_prompt) or "
                   f"'{PER_REQUEST}', got {text!r}")
    return n


def _raise_open_files(need: int) -> int:
    """Each waiting OpenRLHF request is an open connection: lift the descriptor limit toward ``need``, and
    say so when the hard limit leaves fewer (the server then holds fewer requests than ``--max-pending``).
    Returns the connections the server may hold: past that a new one is a 503, which OpenRLHF retries. (A
    flood past the limit can still fail some accept() calls with "Too many open files": asyncio accepts up
    to the backlog at once before the cap closes any. Keeping the backlog free as well held 4,096 fewer
    rows and lost more of a 32,768-row batch, so the cap spends the descriptors on rows.)"""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if hard != resource.RLIM_INFINITY and hard < need:
        fit = hard - 256
        typer.echo(f"warning: --max-pending needs about {need} open files but this process may open {hard} "
                   f"(hard limit): at most {fit} requests are held at once; raise `ulimit -Hn` or lower "
                   "--max-pending", err=True)
        return fit
    return need - 192


def serve(
    scorer: Annotated[str, typer.Option("--scorer", "-s", help="Scorer name (see `rewardkit scorers`) or module:Class.")],
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", help="Scorer option KEY=VALUE (repeatable).")] = None,
    judge: Annotated[Optional[str], typer.Option(help="Judge backend spec for judge-based scorers.")] = None,
    host: Annotated[str, typer.Option(help="Interface to bind (0.0.0.0 to share on the network).")] = "127.0.0.1",
    port: Port = 5000,
    group_size: Annotated[Optional[str], typer.Option(help="Hold rows until N of one prompt arrived (OpenRLHF's n_samples_per_prompt), or 'request' when each request carries whole groups; required by group-relative scorers.")] = None,
    group_timeout: Annotated[float, typer.Option(help="Seconds after a group's first row to score it as it stands (below OpenRLHF's 180 s client timeout, so a short group is still answered).")] = 150.0,
    masked_reward: Annotated[str, typer.Option(help="Reward sent for a masked response (its mask: extra_logs.status_ok); 'null' sends null.")] = "0",
    max_items: Annotated[int, typer.Option(help="Most queries in one request.")] = 4096,
    max_pending: Annotated[int, typer.Option(min=1, help="Most requests held at once, waiting for their group or the scorer (503 above).")] = 32768,
    api_key: Annotated[Optional[str], typer.Option(envvar="REWARDKIT_REWARD_API_KEY", help="Require this key: 'Authorization: Bearer KEY' or '?api_key=KEY' in the URL.")] = None,
) -> None:
    """Serve POST /get_reward ({query, prompts, labels} -> {rewards, scores, extra_logs}) until interrupted."""
    from rewardkit.cli.common import check_scorer_judge, fail, option_judge, parse_pairs

    from rewardkit.http_server import require_key_off_loopback
    from rewardkit.http_server import serve as run
    from rewardkit.integrations.common import load_scorer
    from rewardkit.integrations.openrlhf import check_group_size, reward_app
    from rewardkit.scoring import scorer_class, scorer_names

    size = _group_size(group_size)
    try:  # before the scorer (and its judge) loads: a keyless reward server stays on this machine, and a
        # group-relative scorer gets its groups
        require_key_off_loopback(host, api_key, "serve")
        if scorer in scorer_names():
            check_group_size(scorer_class(scorer), size)
    except ValueError as e:
        raise fail(e) from None
    opts = parse_pairs(option, "--option")
    sc = load_scorer(scorer, opts, option_judge(opts, judge))  # -o judge=SPEC is the judge, never replaced
    check_scorer_judge(sc)  # loaded (or its server asked) before listening, not on the first request
    try:
        app = reward_app(sc, api_key=api_key, group_size=size, group_timeout=group_timeout,
                         masked_reward=_masked(masked_reward), max_items=max_items, max_pending=max_pending)
    except ValueError as e:
        raise fail(e) from None
    backlog = 4096  # a rollout batch connects all at once
    connections = _raise_open_files(max_pending + 256)
    # a rollout batch opens thousands of connections at once: their headers are read as the loop gets to
    # them, so the per-connection header deadline is a minute, not the default 10 s (which closed them)
    run(app, host, port, max_connections=connections, backlog=backlog, header_timeout=60.0,
        on_ready=lambda url: typer.echo(f"serving {scorer} rewards at {url}/get_reward", err=True))
