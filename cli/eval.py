"""``rewardkit eval``: accuracy (pass@k / avg@k / maj@k), a scorer as a verifier, best-of-N selection,
judge quality, response generation, the headline table and the regeneration of every committed table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rewardkit.cli.common import (
    BatchTokens,
    Device,
    DType,
    FieldMap,
    JobProgress,
    Threads,
    check_judge_spec,
    csv,
    fail,
    judge_spec,
    option_judge,
    parse_pairs,
    print_table,
)
from rich.console import Console

from rewardkit.backends.spec import redact

app = typer.Typer(help="Evaluation harness: pass@k, verifier precision/recall, best-of-N, judge quality, tables.",
                  no_args_is_help=True)
console = Console(stderr=True)
#: where the eval commands write by default: under the run folder (git-ignored), never the checkout's top level
EVAL_OUT = Path("runs/eval")


def _show(md: str) -> None:
    print_table(Console(), md)


Rollouts = Annotated[Path, typer.Argument(help="Rollouts file (grouped JSONL with responses, as `rewardkit score` reads).")]
OutDir = Annotated[Path, typer.Option("--out", help="Folder for the Markdown + JSON (+ PNG) reports and scores.")]
Limit = Annotated[Optional[int], typer.Option(help="Only the first N groups.")]


@app.command()
def accuracy(
    rollouts: Rollouts,
    out: OutDir = EVAL_OUT,
    grade: Annotated[str, typer.Option(help="auto (labels when present), labels or verifier.")] = "auto",
    k: Annotated[Optional[list[int]], typer.Option("--k", help="k values (default: every power of 2 up to n).")] = None,
    limit: Limit = None,
    field: FieldMap = None,
) -> None:
    """pass@k / avg@k / maj@k for every k <= n that is a power of 2; writes accuracy.md and accuracy.json."""
    from rewardkit.evals.harness import (
        EvalError,
        accuracy_markdown,
        accuracy_report,
        load_rollouts,
        write_report,
    )

    try:
        groups = load_rollouts(rollouts, limit=limit, fields=parse_pairs(field, "--field"))
        rep = accuracy_report(groups, by=grade, ks=k)  # type: ignore[arg-type]
    except (EvalError, FileNotFoundError, ValueError) as e:
        raise fail(str(e)) from None
    rep["input"] = rollouts.name
    md = accuracy_markdown(rep, f"Accuracy on {rollouts.name}")
    write_report(out, "accuracy", rep, md)
    _show(md)
    console.print(f"written: {out / 'accuracy.md'}, {out / 'accuracy.json'}")


def _score_all(rollouts: Path, scorers: list[str], out: Path, options: list[str] | None, judge: str | None,
               limit: int | None, batch_size: int, restart: bool = False, field: list[str] | None = None):
    from rewardkit.evals.harness import EvalError, labels_of, load_rollouts, score_groups

    from rewardkit.scoring import scorer_options

    try:
        groups = load_rollouts(rollouts, limit=limit, fields=parse_pairs(field, "--field"))
        correct = labels_of(groups, "this evaluation")
    except (EvalError, FileNotFoundError, ValueError) as e:
        raise fail(str(e)) from None
    given: dict = parse_pairs(options, "--option")
    try:
        names = {s: {o.name for o in scorer_options(s)} for s in scorers}
    except KeyError as e:
        raise fail(str(e).strip("'\"")) from None
    unknown = sorted(set(given) - set().union(*names.values()))
    if unknown:  # an option no scorer has (a typo) was dropped without a word
        raise fail(f"no scorer given ({', '.join(scorers)}) has option(s) {unknown}; options: "
                   + "; ".join(f"{s}: {', '.join(sorted(n)) or 'none'}" for s, n in names.items()))
    runs = []
    for s in scorers:
        opts = {k: v for k, v in given.items() if k in names[s]}
        if judge is not None and "judge" in names[s]:
            opts["judge"] = judge
            check_judge_spec(judge)  # before the first group: one error line, not a status per group
        with JobProgress(f"score {s}", console) as prog:
            try:
                runs.append(score_groups(groups, s, out, options=opts, batch_size=batch_size, restart=restart,
                                         on_start=prog.start, on_batch=prog.advance))
            except (EvalError, TypeError, ValueError) as e:
                raise fail(f"scorer {s!r}: {e}") from None
    return groups, correct, runs


ScorerOpt = Annotated[list[str], typer.Option("--scorer", "-s", help="Scorer name (repeatable).")]
OptionOpt = Annotated[Optional[list[str]], typer.Option("--option", "-o", help="Scorer option KEY=VALUE (repeatable; given to the scorers that have it).")]
JudgeOpt = Annotated[Optional[str], typer.Option(help="Judge backend spec for judge-based scorers.")]
BatchOpt = Annotated[int, typer.Option(help="Groups per scorer call.")]
RestartOpt = Annotated[bool, typer.Option("--restart", help="Discard the scores already in the folder (e.g. from another judge or options) and score again.")]


@app.command()
def verifier(rollouts: Rollouts, scorer: ScorerOpt, out: OutDir = EVAL_OUT, option: OptionOpt = None,
             judge: JudgeOpt = None, limit: Limit = None, batch_size: BatchOpt = 8, restart: RestartOpt = False,
             field: FieldMap = None,
             device: Device = None, dtype: DType = None, batch_tokens: BatchTokens = None, threads: Threads = None,
             n_boot: Annotated[int, typer.Option(min=0, help="Bootstrap resamples.")] = 1000,
             seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0) -> None:
    """Precision / recall / F1 / accuracy of each scorer as a verifier against the `correct` labels, with
    seeded bootstrap 95% intervals; writes verifier.md and verifier.json (scores are resumable)."""
    from rewardkit.evals.harness import scorer_report, verifier_markdown, write_report

    judge = judge_spec(option_judge(parse_pairs(option, "--option"), judge), device, dtype, batch_tokens, threads)
    groups, correct, runs = _score_all(rollouts, scorer, out, option, judge, limit, batch_size, restart, field)
    reps = [scorer_report(groups, r, correct=correct, n_boot=n_boot, seed=seed) for r in runs]
    md = verifier_markdown(reps, f"Scorers as verifiers on {rollouts.name}")
    write_report(out, "verifier", {"input": str(rollouts), "reports": reps}, md)
    _show(md)


@app.command()
def select(rollouts: Rollouts, scorer: ScorerOpt, out: OutDir = EVAL_OUT, option: OptionOpt = None,
           judge: JudgeOpt = None, limit: Limit = None, batch_size: BatchOpt = 8, restart: RestartOpt = False,
           field: FieldMap = None, device: Device = None,
           dtype: DType = None, batch_tokens: BatchTokens = None, threads: Threads = None) -> None:
    """Best-of-N with each scorer as the selector: curves (select.png), AUC, length bias; writes
    select.md and select.json."""
    from rewardkit.evals.harness import (
        plot_best_of_n,
        scorer_report,
        select_markdown,
        selection_baselines,
        selection_curves,
        write_report,
    )

    judge = judge_spec(option_judge(parse_pairs(option, "--option"), judge), device, dtype, batch_tokens, threads)
    groups, correct, runs = _score_all(rollouts, scorer, out, option, judge, limit, batch_size, restart, field)
    reps = [scorer_report(groups, r, correct=correct, n_boot=200) for r in runs]
    base = selection_baselines(correct)
    curves = selection_curves(reps, correct)  # what select.png draws, kept in select.json
    md = select_markdown(reps, f"Best-of-N selection on {rollouts.name}", base)
    write_report(out, "select", {"input": str(rollouts), "baselines": base, "reports": reps, "curves": curves}, md)
    plot_best_of_n(curves, out / "select.png", f"best-of-n on {rollouts.name}")
    _show(md)
    console.print(f"written: {out / 'select.md'}, {out / 'select.json'}, {out / 'select.png'}")


@app.command()
def generate(
    model: Annotated[str, typer.Argument(help="Backend spec: smollm2 (embedded), a model folder, http://HOST:PORT/v1, vllm:MODEL.")],
    bench: Annotated[str, typer.Argument(help="math500, aime24, aime25, amc23, gsm8k, humaneval, or a .jsonl/.parquet path.")],
    # text, not a Path: pathlib would drop the trailing '/' of a path that names a folder (refused)
    out: Annotated[str, typer.Option("--out", help="Rollouts JSONL (grouped); re-run to resume.")] = "rollouts.jsonl",
    n: Annotated[int, typer.Option("--n", min=1, help="Samples per problem.")] = 8,
    limit: Limit = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens per sample.")] = 1024,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.7,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling.")] = 0.95,
    seed: Annotated[int, typer.Option(help="Seed of the first problem (problem i uses seed + i).")] = 0,
    batch_size: Annotated[int, typer.Option(min=1, help="Problems per backend call (and per fsync'd write).")] = 4,
    grade: Annotated[bool, typer.Option(help="Label math responses with the answer verifier.")] = True,
    ray: Annotated[Optional[str], typer.Option("--ray", metavar="ADDRESS", help="Generate on a Ray cluster ('local', 'auto' or ray://HOST:PORT): one backend actor per GPU (vLLM replicas) or CPU slot.")] = None,
    ray_workers: Annotated[Optional[int], typer.Option(help="With --ray: backend actors (default: the cluster's GPUs, else CPUs).")] = None,
    restart: Annotated[bool, typer.Option("--restart", help="Discard OUT's rows (a rewardkit output of any job) and start over.")] = False,
) -> None:
    """Sample n responses per problem with any backend into the grouped rollouts file `rewardkit score` reads.
    Only a file a rewardkit job wrote (its manifest beside it) is resumed; any other file is left as it is."""
    from rewardkit.evals.generate import claim_output, generate_rollouts
    from rewardkit.evals.loaders import BenchmarkError, load_benchmark

    try:
        problems = load_benchmark(bench, limit=limit)
    except (BenchmarkError, FileNotFoundError) as e:
        raise fail(str(e)) from None
    try:  # the output first (a user's file, a folder), then the model: a refusal loads nothing
        output = claim_output(out, model, bench=bench, n=n, max_tokens=max_tokens, temperature=temperature,
                              top_p=top_p, seed=seed, grade=grade, restart=restart)
    except (ValueError, OSError, RuntimeError) as e:
        raise fail(str(e)) from None
    check_judge_spec(model, load=ray is None, label="model")  # before the first problem (on Ray the actors load it)
    with JobProgress(f"generate {bench}", console, unit="problems") as prog:
        prog.start(len(problems))

        def on_start(total: int, done: int) -> None:
            prog.start(total, done)
            if done:
                console.print(f"resuming: {done} of {total} problems already in {out}")

        try:
            ray_config = None
            if ray is not None:
                from rewardkit.runtime.ray_runner import RayConfig

                ray_config = RayConfig(address=ray, workers=ray_workers)
            s = generate_rollouts(problems, model, output, n=n, max_tokens=max_tokens, temperature=temperature,
                                  top_p=top_p, seed=seed, batch_size=batch_size, bench=bench, grade=grade,
                                  ray=ray_config, restart=restart, on_start=on_start, on_batch=prog.advance,
                                  on_mkdir=lambda d: console.print(f"created folder {d} for --out", soft_wrap=True,
                                                                   markup=False, highlight=False))
        except (ValueError, FileNotFoundError, OSError, RuntimeError, ImportError) as e:
            raise fail(str(e)) from None
    console.print(f"{out}: {s.generated_now} generated now, {s.skipped_done} already done, {len(s.failed)} failed")
    for f in s.failed[:5]:
        console.print(f"  failed (re-run to retry): {f}", soft_wrap=True)
    if s.failed:
        raise typer.Exit(1)


RESULTS = Path("benchmarks/results")
#: where `eval headline` writes its table and scores unless told otherwise (git-ignored)
HEADLINE_WORK = Path("runs/headline")


def _partial(rollouts: Path | None, scorers: list[str] | None, judge: str, local_judge: bool, all_groups: bool,
             mixed: bool, generate_mode: bool) -> list[str]:
    """How a headline run differs from the one the committed table comes from (empty: it is that run)."""
    from rewardkit.scoring import scorer_names

    why = []
    if rollouts is not None:
        why.append(f"other rollouts ({rollouts})")
    if scorers and set(scorers) != set(scorer_names()):
        why.append(f"only {len(set(scorers))} of {len(scorer_names())} scorers (-s {' -s '.join(scorers)})")
    if judge != "smollm2" or local_judge:
        why.append(f"another judge ({redact(judge)})")
    if all_groups or mixed:
        why.append("other judge groups (--all-groups)" if all_groups else "other judge groups (--mixed-groups)")
    if generate_mode:
        why.append("another verdict mode (--generate-mode)")
    return why


@app.command()
def headline(
    rollouts: Annotated[Optional[Path], typer.Argument(help="Rollouts (default: the shared 100 x 8 Qwen2.5-Math file).")] = None,
    scorer: Annotated[Optional[list[str]], typer.Option("--scorer", "-s", help="Only these scorers (default: all registered).")] = None,
    judge: Annotated[str, typer.Option(help="Judge backend spec for the judge scorers.")] = "smollm2",
    all_groups: Annotated[bool, typer.Option("--all-groups", help="Judge scorers on every group (GPU/HTTP judge).")] = False,
    mixed: Annotated[bool, typer.Option("--mixed-groups", help="Judge scorers on every mixed group (some but not all responses correct).")] = False,
    generate_mode: Annotated[bool, typer.Option("--generate-mode", help="Judge in generate mode, not verdict-logit.")] = False,
    work: Annotated[Path, typer.Option(help="Folder for the (resumable) scores files.")] = HEADLINE_WORK,
    out: Annotated[Optional[Path], typer.Option("--out", help="Folder for headline.md / headline.json (default: the --work folder).")] = None,
    update_results: Annotated[bool, typer.Option("--update-results", help=f"Write the repository's table ({RESULTS}/headline.*): only for the full default run (every scorer, the default judge, groups and rollouts).")] = False,
    restart: RestartOpt = False,
    device: Device = None,
    dtype: DType = None,
    batch_tokens: BatchTokens = None,
    threads: Threads = None,
) -> None:
    """The headline table: every registered scorer on the same shared rollouts (P/R/F1, best-of-8, AUC,
    length bias, non-zero-advantage groups, judge calls and seconds per group). Written under runs/ unless
    --update-results regenerates the committed table (refused for a partial run)."""
    from rewardkit.evals.data import rollouts_path
    from rewardkit.evals.harness import EvalError, write_report
    from rewardkit.evals.headline import calls_judge, headline_markdown, mixed_groups
    from rewardkit.evals.headline import headline as run

    from rewardkit.scoring import scorer_names

    if update_results:
        if out is not None:
            raise fail(f"--update-results writes {RESULTS}; leave out --out")
        why = _partial(rollouts, scorer, judge, any(x is not None for x in (device, dtype, batch_tokens, threads)),
                       all_groups, mixed, generate_mode)
        if why:
            raise fail(f"--update-results replaces the committed table, which comes from the full default run; "
                       f"this run has {'; '.join(why)}. Leave out --update-results: the table goes to {work}")
        out = RESULTS
    out = work if out is None else out
    src = rollouts or rollouts_path()
    judge = judge_spec(judge, device, dtype, batch_tokens, threads) or judge
    unknown = sorted(set(scorer or []) - set(scorer_names()))
    if unknown:
        raise fail(f"unknown scorer {unknown[0]!r}; known: {', '.join(scorer_names())}")

    def judged(name: str) -> bool:
        try:
            return calls_judge(name)
        except (ImportError, AttributeError):  # an unavailable scorer is skipped by the run, with its reason
            return False

    if any(judged(n) for n in scorer or scorer_names()):
        check_judge_spec(judge)  # before the first group: one error line, not rows of error statuses
    try:
        groups = None if all_groups else mixed_groups(src) if mixed else _groups()
        data = run(src, work, scorers=scorer, judge=judge, judge_groups=groups, logit=not generate_mode,
                   restart=restart, on_scorer=lambda s, n: console.print(f"scoring {s} on {n} groups"),
                   progress=lambda s: JobProgress(f"score {s}", console))
    except (EvalError, FileNotFoundError) as e:
        raise fail(str(e)) from None
    cmd = "rewardkit eval headline" + "".join(f" -s {s}" for s in scorer or []) + (
        f" --judge {redact(judge)}" if judge != "smollm2" else "") + (" --all-groups" if all_groups else "") + (
        " --mixed-groups" if mixed and not all_groups else "")
    md = headline_markdown(data, cmd)
    if rollouts is not None:
        data["rollouts"] = str(rollouts)
    else:
        data["rollouts"] = "math_rollouts_qwen25/math_cot_100.jsonl (in the shared data folder)"
    data["command"] = cmd
    for r in data["reports"]:
        r.pop("scores_file", None)  # machine-specific path
    write_report(out, "headline", data, md)
    _show(md)
    console.print(f"written: {out / 'headline.md'}, {out / 'headline.json'}", soft_wrap=True)


def _groups():
    from rewardkit.evals.headline import JUDGE_GROUPS

    return JUDGE_GROUPS


@app.command()
def judge(
    judge: Annotated[str, typer.Option("--judge", help="Judge backend spec (the model), as in `rewardkit score --judge`.")] = "smollm2",
    prompts: Annotated[str, typer.Option(help="Pairwise prompts, comma-separated: tournament (Reasoning Arena), critic (RARO).")] = "tournament,critic",
    modes: Annotated[str, typer.Option(help="Verdict modes, comma-separated: logit, generate.")] = "logit",
    # min=0: a negative count sliced pairs off the end of the list ([:-1])
    pairs: Annotated[int, typer.Option(min=0, help="(correct, incorrect) pairs from the rollouts (one per mixed group).")] = 10,
    pb_pairs: Annotated[int, typer.Option(min=0, help="ProcessBench same-problem pairs (up to 40).")] = 4,
    injection_pairs: Annotated[int, typer.Option(min=0, help="Pairs for the prompt-injection test.")] = 2,
    kinds: Annotated[Optional[str], typer.Option(help="Injection kinds, comma-separated (default: all).")] = None,
    injection_prompts: Annotated[str, typer.Option(help="Pairwise prompts for the injection test.")] = "tournament",
    max_tokens: Annotated[int, typer.Option(help="Tokens per verdict in generate mode.")] = 512,
    rollouts: Annotated[Optional[Path], typer.Option(help="Labelled rollouts (default: the shared file).")] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for judge_quality.md / .json.")] = EVAL_OUT,
    device: Device = None,
    dtype: DType = None,
    batch_tokens: BatchTokens = None,
    threads: Threads = None,
) -> None:
    """Pairwise judge prompts on real labels: accuracy in both orders, position bias, ProcessBench process-error
    pairs, and prompt-injection flip rates with and without order debiasing."""
    import time

    from rewardkit.evals.data import rollouts_path
    from rewardkit.evals.harness import EvalError, load_rollouts, write_report
    from rewardkit.evals.judge_quality import (
        INJECTIONS,
        PROMPTS,
        injection_flip_rates,
        judge_quality_markdown,
        pairwise_accuracy,
        processbench_pairs,
        rollout_pairs,
    )

    ps, ms, ip = csv(prompts), csv(modes), csv(injection_prompts)
    ks = csv(kinds) if kinds else list(INJECTIONS)
    for bad, known, what in ((set(ps + ip) - set(PROMPTS), PROMPTS, "prompt"), (set(ms) - {"logit", "generate"}, ("logit", "generate"), "mode"),
                             (set(ks) - set(INJECTIONS), tuple(INJECTIONS), "injection kind")):
        if bad:
            raise fail(f"unknown {what} {sorted(bad)[0]!r}; known: {', '.join(known)}")
    t0 = time.perf_counter()
    try:  # the data before the judge: a bad file is found before a model loads
        rp = rollout_pairs(load_rollouts(rollouts or rollouts_path()))
        pb = processbench_pairs(limit=pb_pairs)
    except (EvalError, FileNotFoundError, ValueError) as e:
        raise fail(str(e)) from None
    judge = judge_spec(judge, device, dtype, batch_tokens, threads) or judge
    be = check_judge_spec(judge)  # before any pair: one error line, not rows of invalid verdicts
    data: dict = {"backend": redact(getattr(be, "model_id", None) or judge), "rollout_pairs": [], "processbench_pairs": [], "injection": []}
    for p in ps:
        for m in ms:
            console.print(f"{p} / {m}: {min(pairs, len(rp))} rollout pairs, {len(pb)} ProcessBench pairs")
            data["rollout_pairs"].append(pairwise_accuracy(rp[:pairs], be, p, m, max_tokens=max_tokens))
            data["processbench_pairs"].append(pairwise_accuracy(pb, be, p, m, max_tokens=max_tokens))
    for p in ip:
        for m in ms:
            console.print(f"injection {p} / {m}: {injection_pairs} pairs x {len(ks)} kinds")
            data["injection"].append(injection_flip_rates(rp[:injection_pairs], be, p, m, ks, max_tokens=max_tokens))
    data["seconds"] = time.perf_counter() - t0
    data["command"] = (f"rewardkit eval judge --judge {redact(judge)} --prompts {prompts} --modes {modes} --pairs {pairs} "
                       f"--pb-pairs {pb_pairs} --injection-pairs {injection_pairs}"
                       + (f" --kinds {kinds}" if kinds else "") + f" --injection-prompts {injection_prompts}")
    md = judge_quality_markdown(data)
    write_report(out, "judge_quality", data, md)
    _show(md)


@app.command("lm-eval")
def lm_eval_cmd(
    model: Annotated[Optional[Path], typer.Argument(help="Local Hugging Face model folder (default: the embedded SmolLM2 copy).")] = None,
    tasks: Annotated[str, typer.Option(help="Comma-separated rewardkit tasks: rewardkit_math500, rewardkit_aime24, rewardkit_aime25, rewardkit_gsm8k.")] = "rewardkit_gsm8k",
    # min=1: lm-eval reads a limit below 1 as a fraction of the task, and a budget of 0 fell back to the task's 1024
    limit: Annotated[Optional[int], typer.Option(min=1, help="Problems per task.")] = None,
    max_gen_toks: Annotated[Optional[int], typer.Option(min=1, help="Generation budget per problem (default: the task's 1024).")] = None,
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    out: Annotated[Path, typer.Option("--out", help="Folder for lm_eval.json.")] = EVAL_OUT,
) -> None:
    """Run rewardkit's lm-eval 0.4 tasks (shared offline data, rewardkit's verifier) on a local model."""
    from rewardkit.evals.lm_eval import run_lm_eval

    if model is None:
        from rewardkit.backends.embedded import embedded_model_path

        model = embedded_model_path()
    try:
        res = run_lm_eval(model, csv(tasks), limit=limit, max_gen_toks=max_gen_toks, device=device)
    except (RuntimeError, ValueError) as e:
        raise fail(str(e)) from None
    out.mkdir(parents=True, exist_ok=True)
    keep = {"results": res["results"], "n-samples": res.get("n-samples"), "config": {"model": str(model), "limit": limit},
            "samples": {t: [{"doc_id": s["doc_id"], "target": s["target"], "response": s["resps"][0][0],
                             "exact_match": s["exact_match"]} for s in ss] for t, ss in res.get("samples", {}).items()}}
    (out / "lm_eval.json").write_text(json.dumps(keep, indent=2, default=str) + "\n")
    for t, r in res["results"].items():
        console.print(f"{t}: exact_match {r.get('exact_match,none')} (limit {limit})")


@app.command()
def tables(
    check: Annotated[bool, typer.Option("--check", help="Change nothing; exit 1 if the README or a results file is stale.")] = False,
    only: Annotated[Optional[list[str]], typer.Option("--only", help="Run only this producer (repeatable; see benchmarks/runs.json).")] = None,
    slow: Annotated[bool, typer.Option("--slow", help="Also run the slow (judge-heavy) producers.")] = False,
    render_only: Annotated[bool, typer.Option("--render-only", help="Run nothing; re-render reports and README tables from the JSON.")] = False,
) -> None:
    """Regenerate benchmarks/results/ from benchmarks/runs.json and rewrite the README's marked tables."""
    from rewardkit.evals.tables import check as find_stale
    from rewardkit.evals.tables import regenerate, unlisted

    orphans = unlisted()
    if orphans:  # one line, not one per file
        console.print(f"warning: {len(orphans)} file(s) in benchmarks/results have no producer or record in "
                      f"benchmarks/runs.json (not regenerated): {', '.join(orphans)}", soft_wrap=True, highlight=False)
    if check:
        problems = find_stale()
        for p in problems:
            console.print(f"stale: {p}", soft_wrap=True)
        if problems:
            raise typer.Exit(1)
        console.print("README tables and results files are up to date")
        return
    try:
        runs = regenerate(only=only, slow=slow, run=not render_only, on_run=lambda r: console.print(f"running {r.name}: {r.command}", soft_wrap=True))
    except KeyError as e:
        raise fail(str(e).strip("'\"")) from None
    failed = [r for r in runs if r["returncode"]]
    for r in runs:
        console.print(f"{r['name']}: {r['seconds']:.0f} s" + (f" FAILED ({r['returncode']})" if r["returncode"] else ""))
    for r in failed:
        console.print(r["stderr_tail"], soft_wrap=True)
    if failed:
        raise typer.Exit(1)
