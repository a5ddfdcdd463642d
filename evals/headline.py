"""The headline table: every registered scorer on the same shared rollouts (100 MATH problems x 8
Qwen2.5-Math samples, labelled), as a verifier (P/R/F1 where the rewards are 0/1), as a best-of-8 selector,
as a ranking (AUC), with its length bias, the share of groups it gives a non-zero advantage, and its cost.

Scorers without a judge run on all 100 groups. Judge scorers run the judge (embedded SmolLM2 on CPU by
default, verdict-logit mode) on a committed subset of mixed groups, since one CPU judge call takes
seconds; ``full=True`` runs them on every group (use a GPU or HTTP judge for that).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardkit.evals.harness import EvalError, cell, load_rollouts, score_groups, scorer_report

from rewardkit.backends.spec import redact

# Two balanced mixed groups (4 of 8 correct) with the shortest responses: every judge scorer ranks real
# correct against real incorrect responses at the lowest CPU cost.
JUDGE_GROUPS = ("math_cot_100-017", "math_cot_100-058")
# Fixed options per scorer, and the row label that says what they mean. proof-gate's reference verifier reads
# the dataset answer (an oracle standing in for Lean, which cannot run here).
FIXED_OPTIONS: dict[str, tuple[dict[str, str], str]] = {
    "proof-gate": ({"verifier": "reference"}, "proof-gate (reference oracle)"),
}
# Scorers that do not apply to math rollouts (they need other fields), with the reason shown under the table.
NOT_APPLICABLE: dict[str, str] = {
    "code": "grades programs against tests; the rollouts are math",
    "countdown": "needs a Countdown row's numbers and target",
}
# Scorers that must be told how to reach a model (the option is named `judge`, `backend` before issue 10).
_JUDGE_OPTIONS = ("judge", "backend")


def judge_option(name: str) -> str | None:
    """The option through which a scorer takes its judge backend (None: it calls no model)."""
    from rewardkit.scoring import scorer_options

    names = {o.name for o in scorer_options(name)}
    return next((o for o in _JUDGE_OPTIONS if o in names), None)


def _mode_option(name: str) -> str | None:
    """The scorer's verdict-mode option (``mode``), if it has one."""
    from rewardkit.scoring import scorer_options

    return next((o.name for o in scorer_options(name) if o.name == "mode"), None)


def calls_judge(name: str) -> bool:
    """Proof-gate takes a judge only for its optional Lean pipeline; with the default reference verifier
    it calls no model."""
    return judge_option(name) is not None and name != "proof-gate"


def mixed_groups(rollouts: str | Path) -> list[str]:
    """Ids of the groups whose labels are mixed (some but not all responses correct): where a judge must rank."""
    return [g.id for g in load_rollouts(rollouts) if g.labels is not None and 0 < sum(g.labels) < len(g.labels)]


def headline(rollouts: str | Path, work: Path, *, scorers: Sequence[str] | None = None, judge: str = "smollm2",
             judge_groups: Sequence[str] | None = JUDGE_GROUPS, logit: bool = True, n_boot: int = 1000,
             options: dict[str, dict[str, Any]] | None = None, restart: bool = False, on_scorer=None,
             progress=None) -> dict[str, Any]:
    """Reports for every scorer (``scorers`` default: all registered); judge scorers on ``judge_groups``
    (None: all groups). ``options`` adds per-scorer options (over the fixed ones and the logit mode). Scores
    are cached in ``work`` (resumable; ``restart`` discards them). ``progress(name)``: a context manager with
    ``start(total, done)`` and ``advance(n)`` (``rewardkit.cli.common.JobProgress``) per scorer."""
    from rewardkit.scoring import scorer_names

    names = list(scorers) if scorers else scorer_names()
    full = load_rollouts(rollouts)
    subset = load_rollouts(rollouts, ids=judge_groups) if judge_groups else full
    rows, skipped = [], {}
    for name in names:
        if name in NOT_APPLICABLE:
            skipped[name] = f"not applicable: {NOT_APPLICABLE[name]}"
            continue
        try:
            uses_judge = calls_judge(name)
        except (ImportError, AttributeError) as e:
            skipped[name] = f"unavailable: {e}"
            continue
        groups = subset if uses_judge else full
        fixed, label = FIXED_OPTIONS.get(name, ({}, name))
        opts: dict[str, Any] = dict(fixed)
        if uses_judge:
            opts[judge_option(name)] = judge
            if _mode_option(name):
                opts["mode"] = "logit" if logit else "generate"
        opts.update((options or {}).get(name, {}))
        if uses_judge and "mode" in opts:  # the row names the mode it ran in, "auto" resolved for this judge
            from rewardkit.scoring import resolve_mode

            opts["mode"] = resolve_mode(str(opts["mode"]), judge)
        if on_scorer:
            on_scorer(name, len(groups))
        t0 = time.perf_counter()
        try:
            with progress(name) if progress else contextlib.nullcontext() as prog:
                run = score_groups(groups, name, work, options=opts, batch_size=len(groups) if uses_judge else 16,
                                   restart=restart, on_start=prog.start if prog else None,
                                   on_batch=prog.advance if prog else None)
        except EvalError:  # the scores folder refused the run (another judge's leftovers): stop, say why
            raise
        except (TypeError, ValueError, NotImplementedError) as e:
            skipped[name] = f"{type(e).__name__}: {e}"
            continue
        rep = scorer_report(groups, run, n_boot=n_boot)
        rep.update({"label": label, "uses_judge": uses_judge, "options": {k: redact(str(v)) for k, v in opts.items()},
                    "wall_seconds_this_run": time.perf_counter() - t0})
        rows.append(rep)
    return {"rollouts": str(rollouts), "judge": judge if judge is None else redact(str(judge)), "judge_groups": list(judge_groups or []),
            "reports": rows, "skipped": skipped}


# the verdict mode as recorded in older results ("logits": logit mode's spelling before one scorer shape)
_MODE_SPELLING = {"logits": "logit"}


def row_label(r: dict[str, Any]) -> str:
    """A row's scorer, its fixed options' label, and for a judge scorer the verdict mode it ran in (logit mode
    reads the verdict from the judge's probabilities, with no reasoning before it; generate parses text)."""
    label = f"`{r['scorer']}`{r.get('label', r['scorer'])[len(r['scorer']):]}"
    if not r["uses_judge"]:
        return label
    mode = (r.get("options") or {}).get("mode")
    return f"{label} (judge, {_MODE_SPELLING.get(mode, mode)})" if mode else f"{label} (judge)"


def headline_table(data: dict[str, Any]) -> str:
    """The table itself (Markdown), as in headline.md and the README."""
    lines = ["| scorer | groups | P | R | F1 | best-of-8 (%) | AUC | length bias | non-zero adv. | judge calls | s / group |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["reports"]:
        v = r["verifier"]
        p, rec, f1 = (("-", "-", "-") if v is None else
                      tuple(cell(v[k]["value"]) for k in ("precision", "recall", "f1")))
        c = r["cost"]
        lines.append(
            f"| {row_label(r)} | {r['groups']} | {p} | {rec} | {f1} | "
            f"{100 * r['best_of_8']:.1f} | {cell(r['auc'])} | {cell(r['length_bias']['spearman'], '+.2f')} | "
            f"{100 * r['nonzero_advantage_groups']:.0f}% | {c['judge_calls_per_group']:.1f} | "
            f"{c['seconds_per_group']:.2f} |")
    return "\n".join(lines) + "\n"


def headline_markdown(data: dict[str, Any], command: str) -> str:
    """headline.md: the table and its notes."""
    lines = [
        "# Every scorer on the shared rollouts (100 MATH problems x 8 Qwen2.5-Math samples, labelled)", "",
        "P/R/F1: the scorer as a verifier (reward >= 0.5 predicts the upstream `correct` label; only for 0/1 "
        "rewards; 95% bootstrap intervals in the JSON). best-of-8: accuracy of the highest-reward response "
        "(ties: mean over the tied). AUC: pooled ranking of correct over incorrect responses. Length bias: "
        "Spearman of reward vs response characters. Non-zero adv.: share of groups whose rewards are not all "
        "equal (GRPO gets a signal). Calls and seconds are per group.", "",
        headline_table(data).rstrip(),
    ]
    js = ", ".join(f"`{g}`" for g in data["judge_groups"])
    default = tuple(data["judge_groups"]) == JUDGE_GROUPS
    which = (f"{len(data['judge_groups'])} mixed groups ({js}, 4 of 8 correct each)" if default else
             f"{len(data['judge_groups'])} groups ({js}; mixed: some but not all of their answers correct)")
    chance = ("On those groups random choice scores 50% and the oracle 100%." if default else
              "On those groups random choice scores their mean accuracy and the oracle 100%.")
    lines += ["", f"Judge scorers ran `{data['judge']}` in the verdict mode their row names, on "
              f"{which}, CPU: their rows measure the machinery on a 135M judge, not the papers' claims. "
              "In logit mode the verdict is read from the judge's probabilities of the verdict tokens with no "
              "reasoning before it: the JURY-RL judge's App. D prompt (`llm-judge`, `llm-judge-rollout`) asks for "
              "its reasoning first, and so do RARO's critic and GAR's discriminator. "
              f"{chance} `arena` and `adaptive-pointwise` route only non-diverse groups "
              "to the judge, so on mixed groups they equal the verifier (by design, eq. 5)."]
    if data.get("skipped"):
        lines += ["", "Not run: " + "; ".join(f"`{k}` ({v})" for k, v in data["skipped"].items())]
    lines += ["", f"Command: `{command}`",
              "Full run with a real judge on every group: `rewardkit eval headline --judge http://HOST:8000/v1 "
              "--all-groups` (or `--judge vllm:MODEL`)."]
    return "\n".join(lines) + "\n"
