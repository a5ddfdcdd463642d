"""Reports of a test-time-scaling run (``rewardkit tts``, benchmarks/tts_rollouts.py): Markdown table,
JSON and an accuracy-vs-N plot. Kept out of ``rewardkit.tts`` so selection code imports no plotting."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


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
          f"- cost: {result.get('cost')}\n\n## Command\n\n```\n{command}\n```\n")
    Path(f"{p}.md").write_text(md, encoding="utf-8")
    Path(f"{p}.json").write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    plot_accuracy(result["rows"], f"{p}.png", title)
    return [f"{p}.md", f"{p}.json", f"{p}.png"]
