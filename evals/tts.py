"""Test-time-scaling evaluation (``rewardkit tts``, benchmarks/tts_rollouts.py): RARO's selection methods
(``rewardkit.raro.tts``) against majority vote, random and pass@N on labelled rollouts, and the reports
(Markdown table, JSON, an accuracy-vs-N plot). Kept out of ``rewardkit.raro`` so selection code imports no
plotting or file reading."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from rewardkit.backends.base import JudgeBackend
from rewardkit.backends.spec import redact
from rewardkit.options import resolve_options
from rewardkit.raro.tts import (
    CachedJudge,
    PairwiseJudge,
    PromptJudge,
    TTSOptions,
    bt_select,
    single_elimination,
)
from rewardkit.types import Group

# ------------------------------------------------------------------------------------- evaluation


def majority_pick(answers: Sequence[str | None], cluster_ids: Sequence[int | None] | None = None) -> int:
    """Index of the first response with the JURY-RL majority answer (``proof_gate.vote``: most votes, ties to
    the answer seen first); 0 when no response has an answer."""
    from rewardkit.jury.vote import vote

    if cluster_ids is None:
        from rewardkit.answers import cluster_answers

        cluster_ids = cluster_answers(answers)
    v = vote(list(cluster_ids))
    return int(np.flatnonzero(v.mask(v.majority))[0]) if v.majority is not None else 0


def run_tts(problems: Sequence[Group], backend: JudgeBackend, ns: Sequence[int], options: TTSOptions | None = None,
            /, **fields: Any) -> dict[str, Any]:
    """Referee every problem's candidates with a ``PromptJudge`` on ``backend`` and evaluate each selection
    method at each N; the result carries the judge cost and the settings (for ``write_report``).

    ``options`` (or keyword fields) is the one ``TTSOptions``: its defaults are RARO's Algorithm 3 setting,
    rewardkit's additions are opt-in."""
    import time

    o = resolve_options(TTSOptions, options, fields, "run_tts")
    pj = PromptJudge(backend, [p.prompt for p in problems], [p.responses for p in problems], o)
    cached = CachedJudge(pj)
    t0 = time.perf_counter()
    res = evaluate_tts(problems, ns, cached, o)
    res["cost"] = {**pj.cost.to_dict(), "backend_rounds": pj.calls, "cached_matches": cached.hits,
                   "seconds": round(time.perf_counter() - t0, 1)}
    if pj.outputs:  # generate mode: the judge's texts and the votes read from them (candidate indices as shown)
        res["judge_outputs"] = pj.outputs
    res["settings"] = {"judge": redact(getattr(backend, "model_id", str(backend))), "n": list(ns),
                       **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(o).items()}}
    return res


def check_pool_sizes(problems: Sequence[Group], ns: Sequence[int]) -> None:
    """``ValueError`` for an N below 1 or above a problem's number of responses (its pool would be all of them:
    a column headed N that is not N), or no N at all (``--n ''``: a table without columns); ``rewardkit tts`` checks
    before its judge loads."""
    if not ns:
        raise ValueError("no pool size N given (e.g. 1,2,4,8)")
    for n in ns:
        if n < 1:
            raise ValueError(f"N must be >= 1, got {n}")
        short = next((p for p in problems if len(p.responses) < n), None)
        if short is not None:
            raise ValueError(f"N={n} is larger than the {len(short)} responses of problem {short.id!r}")


def evaluate_tts(problems: Sequence[Group], ns: Sequence[int], judge: PairwiseJudge | None = None,
                 options: TTSOptions | None = None, /, *, extract: Callable[[str], str | None] | None = None,
                 **fields: Any) -> dict[str, Any]:
    """Accuracy of each selection method (``options.methods``) at each N (candidates = the first N responses
    of each problem).

    Baselines: ``majority`` (largest answer cluster), ``random`` (its exact expectation: the mean label of
    the pool), ``oracle`` (pass@N: any correct), ``rm`` (best reward-model score, when given). With
    ``skip_uniform`` the judge is not asked about pools whose labels are all equal (any pick has the same
    correctness, so accuracy is unchanged); the number skipped is reported.
    """
    from rewardkit.answers import cluster_answers, extract_answer

    o = resolve_options(TTSOptions, options, fields, "evaluate_tts")
    extract = extract or extract_answer
    check_pool_sizes(problems, ns)
    rows: list[dict[str, Any]] = []
    clusters = [cluster_answers([extract(r) for r in p.responses]) for p in problems]
    details: dict[str, Any] = {"match_status": {}, "skipped_uniform": {}}
    for n in ns:
        pools = [list(range(n)) for _ in problems]
        lab = [[bool(p.labels[j]) for j in pool] for p, pool in zip(problems, pools, strict=True)]
        acc: dict[str, float] = {
            "oracle": float(np.mean([any(x) for x in lab])),
            "random": float(np.mean([np.mean(x) for x in lab])),
        }
        maj = [majority_pick([], clusters[i][: len(pools[i])]) for i in range(len(problems))]
        acc["majority"] = float(np.mean([problems[i].labels[maj[i]] for i in range(len(problems))]))
        if all(p.metadata.get("rm_scores") for p in problems):
            rm = [int(np.argmax(p.metadata["rm_scores"][: len(pool)])) for p, pool in zip(problems, pools, strict=True)]
            acc["rm"] = float(np.mean([problems[i].labels[rm[i]] for i in range(len(problems))]))
        if judge is not None:
            judged = [pool if not (o.skip_uniform and len(set(x)) == 1) else pool[:1]
                      for pool, x in zip(pools, lab, strict=True)]
            details["skipped_uniform"][n] = sum(len(j) == 1 < len(p) for j, p in zip(judged, pools, strict=True))
            status: dict[str, int] = {}
            if "tournament" in o.methods:
                sel = single_elimination(judged, judge, o.k, o.rule)
                acc["tournament"] = float(np.mean([problems[s.problem].labels[s.winner] for s in sel]))
                for s in sel:
                    for r in s.matches:
                        status[r.status] = status.get(r.status, 0) + 1
            if "bt" in o.methods:
                sel = bt_select(judged, judge, o.k, o.bt_schedule, o.rule)
                acc["bt"] = float(np.mean([problems[s.problem].labels[s.winner] for s in sel]))
            details["match_status"][n] = status
        for method, a in acc.items():
            rows.append({"n": n, "method": method, "accuracy": a})
    return {"rows": rows, "problems": len(problems), **details}


def load_rollouts(path: str, limit: int | None = None, fields: dict[str, str] | None = None) -> list[Group]:
    """Groups from a rollouts file through ``rewardkit.runtime.inputs`` (the one row parser), e.g. the shared
    math_cot_100.jsonl; every group needs correctness labels (``correct``) to score a selection. ``fields``: the
    file's own column names (``--field``)."""
    from rewardkit.runtime.inputs import read_groups
    from rewardkit.runtime.jobs import positive_int

    limit = None if limit is None else positive_int("--limit", limit)  # 0 or -1 read one problem
    out: list[Group] = []
    for g in read_groups(path, fmt="grouped", fields=fields):
        if g.labels is None:
            raise ValueError(f"{path}: group {g.id!r}: rollout row lacks field 'correct' (per-response labels)")
        out.append(g)
        if limit is not None and len(out) >= limit:
            break
    if not out:  # before the judge loads: an empty file gave a table of '-' and numpy's warnings
        raise ValueError(f"{path}: no groups")
    return out

# ---------------------------------------------------------------------------------------- reports


def accuracy_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown table: one row per method, one column per N (accuracy in %)."""
    ns = sorted({r["n"] for r in rows})
    order = ["tournament", "bt", "majority", "rm", "random", "oracle"]
    methods = [m for m in order if any(r["method"] == m for r in rows)]
    methods += sorted({r["method"] for r in rows} - set(methods))
    val = {(r["method"], r["n"]): r["accuracy"] for r in rows}
    lines = ["| method | " + " | ".join(f"N={n}" for n in ns) + " |", "|---|" + "---|" * len(ns)]
    for m in methods:
        cells = [f"{100 * val[(m, n)]:.1f}" if (m, n) in val and not math.isnan(val[(m, n)]) else "-" for n in ns]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_accuracy(rows: Sequence[dict[str, Any]], path: str, title: str = "Test-time scaling") -> None:
    """PNG plot of accuracy vs N per method (log2 x axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for m in sorted({r["method"] for r in rows}):
        pts = sorted((r["n"], 100 * r["accuracy"]) for r in rows if r["method"] == m)
        style = "--" if m in ("oracle", "random") else "-"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=m)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (candidates per problem)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(result: dict[str, Any], prefix: str, title: str, command: str) -> list[str]:
    """Write ``<prefix>.md`` (table + settings + command), ``<prefix>.json`` and ``<prefix>.png``."""
    import json
    from pathlib import Path

    p = Path(prefix)
    p.parent.mkdir(parents=True, exist_ok=True)
    table = accuracy_table(result["rows"])
    settings = "\n".join(f"- {k}: {v}" for k, v in result.get("settings", {}).items())
    md = (f"# {title}\n\nAccuracy (%) of the selected response, {result['problems']} problems.\n\n{table}\n\n"
          f"## Settings\n\n{settings}\n\n## Judge work\n\n- match statuses per N: {result.get('match_status')}\n"
          f"- pools not judged because all their labels are equal, per N: {result.get('skipped_uniform')}\n"
          f"- cost: {result.get('cost')}\n"
          + (f"- judge outputs: {len(result['judge_outputs'])} texts in the JSON (`judge_outputs`), each with the vote "
             f"read from it\n" if result.get("judge_outputs") else "")
          + f"\n## Command\n\n```\n{command}\n```\n")
    Path(f"{p}.md").write_text(md, encoding="utf-8")
    Path(f"{p}.json").write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    plot_accuracy(result["rows"], f"{p}.png", title)
    return [f"{p}.md", f"{p}.json", f"{p}.png"]
