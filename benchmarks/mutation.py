"""Mutation testing of the modules where a wrong number trains a wrong model (issue 39), with mutmut 3.

Each module is mutated in a scratch copy of this checkout with ONLY its own tests as the test command, so a
mutant counts as killed only when the tests of its area catch it. mutmut maps each mutant to the tests that
call its function and runs just those, forked from a process that has already imported everything.

    pip install -e ".[mutation]"                        # mutmut 3
    python benchmarks/mutation.py                       # every module: about 5 hours for the recorded ones (16,940 s)
                                                        # on this 2-core machine, 16-19 min each for code/execution.py
                                                        # (its tests wait on sandboxed programs' wall-clock limits,
                                                        # so 4 of its mutants run at once) and GAR's slicing
    python benchmarks/mutation.py --only gar/rewards.py # one module (a suffix of its path)
    python benchmarks/mutation.py --planted             # the issue's twelve planted bugs, one at a time
    python benchmarks/mutation.py --only grpo/modes.py --resume  # go on where a cut-short run stopped
    python benchmarks/mutation.py --only answers.py --record-cut  # record a stopped run's verdicts, marked partial

Writes benchmarks/results/mutation.json (mutants) or mutation_planted.json (planted bugs) and renders both into
benchmarks/results/mutation.md. A surviving mutant listed in benchmarks/mutation_equivalent.json (matched by
module and its changed lines) is reported as equivalent, with the reason written there. Not mutated: ``raise``
statements and log calls (error wording, not numbers) and, in answers.py and code/execution.py, the functions
outside the equivalence/clustering and grading parts; in grpo/modes.py, the functions that compute no number
(option resolution, the CLI's build_mode, checkpoint state, calls passed through to the learner). A survivor in a
function that runs while the tests are imported (mutmut's fork cannot reach it), or with no recorded reason to be
equivalent, is re-tested with the mutant written into the source, in a fresh process: mutmut's switch between
mutants is an environment variable holding a name with a non-ASCII character, which a test's subprocess started
under a C locale does not read back, so such a subprocess ran the original code.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, ROOT, machine  # noqa: E402

EQUIVALENT = ROOT / "benchmarks" / "mutation_equivalent.json"
# Appended to the scratch copy's tests/conftest.py: a failing example is reported as found, not shrunk (a mutant only
# has to fail; shrinking under a loaded CPU ran past mutmut's time limit), and the examples are the same every run;
# no answer verdict cached before mutmut's fork; each mutant's tests run fastest first.
HYPOTHESIS_PROFILE = """

import pytest  # noqa: E402  (benchmarks/mutation.py)
from hypothesis import Phase, settings  # noqa: E402

settings.register_profile("mutation", phases=[Phase.explicit, Phase.generate], deadline=None, database=None,
                          derandomize=True)


@pytest.fixture(autouse=True)
def _no_verdict_cached_before_the_fork():  # benchmarks/mutation.py
    # a fresh process-wide answer checker for every test: mutmut forks each mutant from a process that already ran
    # the tests, and a verdict cached there by the unmutated code would answer for the mutant
    import rewardkit.answers

    rewardkit.answers._default = None


def pytest_collection_modifyitems(items):  # benchmarks/mutation.py
    # a mutant's tests fastest first: mutmut runs them with -x, so a mutant is killed by its quickest failing test and
    # does not wait on a slow one first (mutmut gives them in set order); the durations are mutmut's own, measured on
    # the unmutated code before the fork
    try:
        from mutmut.state import state
    except ImportError:  # a plain pytest run
        return
    took = state().duration_by_test
    if took:
        items.sort(key=lambda item: took.get(item.nodeid, 0.0))
"""
NOT_MUTATED = [r"^\s*raise\b", r"^\s*(log|logger|_log)\.\w+\(", r"^\s*warnings\.warn\("]


MAPPED = ("evals/", "cli/")  # folders pyproject.toml installs as rewardkit.evals and rewardkit.cli


@dataclass(frozen=True)
class Target:
    """One module to mutate, the tests of its area, and (optionally) the only functions to mutate."""

    source: str
    tests: tuple[str, ...]  # pytest arguments: the test files
    functions: tuple[str, ...] = ()
    children: int | None = None  # mutants tested at once, where not --children (tests that mostly wait)

    @property
    def scratch(self) -> str:
        """The module's path in the scratch copy: ``evals/`` and ``cli/`` moved under ``rewardkit/``, where the
        install puts them, so that mutmut's name for a function (from the file's path) is the one tests import."""
        return "rewardkit/" + self.source if self.source.startswith(MAPPED) else self.source


# The issue's table first (the planted bugs' modules), then the rest of its list.
TARGETS = [
    Target("rewardkit/grpo/losses.py", ("tests/grpo/test_losses.py",)),
    # its tests mostly wait on sandboxed programs' wall-clock limits (the CPU was 70% idle at 2 mutants at once)
    Target("rewardkit/code/execution.py", ("tests/code/test_execution.py",),
           ("grade", "_verdict", "_memory_overrun", "_find_record", "_judge", "passed", "passed_fraction", "code",
            "runner_error", "n_tests"), children=4),
    Target("rewardkit/gar/rewards.py", ("tests/gar/test_rewards.py", "tests/gar/test_slices.py")),
    Target("rewardkit/raro/critic.py", ("tests/raro/test_critic.py",)),
    Target("rewardkit/answers.py", ("tests/test_answers.py",),
           ("normalize_answer", "_exactly_comparable", "plain_number", "_long_int", "math_verify_equivalent",
            "_as_latex", "check", "check_many", "_check_inline", "_check_chunk", "equivalent", "cluster_answers",
            "unique_in_order")),
    Target("rewardkit/arena/ranking.py", ("tests/arena/test_ranking.py",)),
    Target("rewardkit/jury/reszero.py", ("tests/jury/test_reszero.py", "tests/jury/test_proof_gate.py")),
    Target("rewardkit/jury/vote.py", ("tests/jury/test_vote.py", "tests/jury/test_proof_gate.py")),
    # the reward, advantage and objective paths of the modes; not mutated: option resolution (__init__), the CLI's
    # build_mode, checkpoint state_dict/load_state_dict and calls passed through to the learner (_judge,
    # SampledJudge.verdict_probs/count_tokens/take): no number is computed there
    Target("rewardkit/grpo/modes.py", ("tests/grpo/test_modes.py",),
           ("critic_items", "critic_rollouts", "critic_step", "attach", "extra_rollouts", "after_step", "generate",
            "_verdict_p_yes", "_expected_update", "expected_r_dis", "_generated", "_reference", "__post_init__")),
    Target("rewardkit/raro/tts.py", ("tests/raro/test_tts.py",)),
    # the verdict parsers (verdicts.py) and the per-prompt forms they read with (verdict_forms.py, issue 34)
    Target("rewardkit/verdicts.py", ("tests/test_verdicts.py",)),
    Target("rewardkit/verdict_forms.py", ("tests/test_verdicts.py",)),
    # beyond the list: the group-relative advantages every trainer and scorer takes (GRPO, Dr. GRPO, RLOO)
    # and the reward-diversity counts the Arena's routing rests on
    Target("rewardkit/scoring.py", ("tests/test_scoring.py",),
           ("_masked", "grpo_advantages", "dr_grpo_advantages", "rloo_advantages", "reward_diversity",
            "diversity_stats", "non_diverse_fraction")),
    # the rest of the reward path: the answer reward R_v every scorer starts from (and the reference verifier), JURY-RL's
    # gate (eq. 4) with its scorers and the App. D judge's verdict counting, the Arena's opponent schedules (live
    # anchors, uncertainty), GAR's slicing and the self-certainty / entropy rewards
    Target("rewardkit/verifier.py", ("tests/test_verifier.py", "tests/jury/test_proof_gate.py")),
    Target("rewardkit/jury/proof_gate.py", ("tests/jury/test_proof_gate.py",),
           ("proof_gate_rewards", "vote_groups", "_score", "verify_many")),
    Target("rewardkit/arena/tournaments.py", ("tests/arena/test_tournaments.py",)),
    Target("rewardkit/gar/slicing.py", ("tests/gar/test_slices.py",)),
    Target("rewardkit/jury/self_certainty.py", ("tests/jury/test_self_certainty.py",),
           ("self_certainty", "entropy_reward", "cumulative_log_probability", "answer_token_mask", "_reward",
            "_score")),
    # JURY-RL's Lean gate: the acceptance rule (DESIGN.md section 4) and the lexer its allow-list reads a proof with
    Target("rewardkit/jury/lean/check.py", ("tests/jury/lean/test_check.py",)),
    Target("rewardkit/jury/lean/lexer.py", ("tests/jury/lean/test_lexer.py", "tests/jury/lean/test_check.py")),
    # the secrets of a backend spec (API keys, passwords and tokens in URLs and queries) masked in everything
    # rewardkit writes or prints
    Target("rewardkit/backends/spec.py", ("tests/backends/test_spec.py",)),
    # the rest of the scorers' reward paths: RARO's Countdown verifier (its reward and solver), the Arena's routing and
    # reward assembly, GAR's slice judging and discriminator objective, JURY-RL's rollout judge (App. D)
    Target("rewardkit/raro/countdown.py", ("tests/raro/test_countdown.py",)),
    Target("rewardkit/arena/scorers.py", ("tests/arena/test_scorers.py",)),
    Target("rewardkit/gar/slices.py", ("tests/gar/test_slices.py", "tests/gar/test_holistic.py")),  # both subclasses
    Target("rewardkit/jury/rollout_judge.py", ("tests/jury/test_rollout_judge.py",)),
    # a saved rollout file's reading: every malformed line a typed InputError naming the file, line and field
    Target("rewardkit/runtime/inputs.py", ("tests/runtime/test_inputs.py",)),
    # the numbers of the benchmark tables (pass@k, maj@k, best-of-n, verifier precision/recall, AUC); JURY-RL's Lean
    # prover pipeline (formalise, type-check, select, prove); the row grouping every external trainer's rewards go
    # through; RARO's binary critic and the critic's replay buffer; a job's output file (finished work kept)
    Target("evals/metrics.py", ("tests/evals/test_metrics.py",)),
    Target("rewardkit/jury/lean/pipeline.py", ("tests/jury/lean/test_pipeline.py",)),
    # its tests mostly wait: a mutant that stalls the gatherer's thread runs to mutmut's time limit
    Target("rewardkit/integrations/common.py", ("tests/integrations/test_common.py",), children=4),
    Target("rewardkit/raro/binary_critic.py", ("tests/raro/test_binary_critic.py",)),
    Target("rewardkit/raro/replay.py", ("tests/raro/test_critic.py",)),
    Target("rewardkit/runtime/output.py", ("tests/runtime/test_output.py",)),
    # the core types every scorer returns (a group, its score, the reference's normal form, the one-result-per-item
    # check); the judge backends' shared batching and the OpenAI-compatible client (retries, pacing, typed failures);
    # the verdict caches (the judges' and the Lean pipeline's) and their sealed SQLite store; the Lean REPL and
    # subprocess checkers (the gate's protocol)
    Target("rewardkit/types.py", ("tests/test_types.py",)),
    Target("rewardkit/backends/base.py", ("tests/backends/test_base.py",)),
    # its tests mostly wait on a local HTTP server's replies and retry delays
    Target("rewardkit/backends/http.py", ("tests/backends/test_http.py",), children=4),
    Target("rewardkit/backends/cache.py", ("tests/backends/test_cache.py",)),
    Target("rewardkit/sqlite_store.py", ("tests/test_sqlite_store.py", "tests/backends/test_cache.py")),
    Target("rewardkit/jury/lean/cache.py", ("tests/jury/lean/test_cache.py",)),
    Target("rewardkit/jury/lean/repl.py", ("tests/jury/lean/test_backends.py",), children=4),
    Target("rewardkit/jury/lean/subprocess.py", ("tests/jury/lean/test_backends.py",), children=4),
    # the Kimina Lean Server client (one request per batch, one result per snippet, a broken source sent alone)
    Target("rewardkit/jury/lean/kimina.py", ("tests/jury/lean/test_backends.py",), children=4),
    # where a local model runs and how its work is packed: the token budgets, the decode rows and widths a compiled
    # decode step sees (issue 36's like-with-like widths), the batches a generation is split into
    Target("rewardkit/backends/hardware.py", ("tests/backends/test_hardware.py",)),
    # finished work kept: a scoring job's resume, retries and groups (the offline runner), and the trainer's
    # crash-safe checkpoints and metrics log
    Target("rewardkit/runtime/jobs.py", ("tests/runtime/test_jobs.py",)),
    Target("rewardkit/grpo/checkpoint.py", ("tests/grpo/test_checkpoint.py",)),
    # options declared once: the one reader of every -o key=value and judge-spec query (a wrong type or a choice
    # let through configures a run silently wrong); the paced executor's sub-batch sizes (progress every few seconds)
    Target("rewardkit/options.py", ("tests/test_options.py",)),
    Target("rewardkit/runtime/pacing.py", ("tests/runtime/test_pacing.py",)),
    # the sandbox every generated program runs in (limits, deadline, output cap, isolation); its tests mostly wait on
    # the programs they run. Not run: the test that loads sandbox.py by path as user nobody under the system Python
    # (a mutated copy imports mutmut, which that interpreter has not got)
    Target("rewardkit/code/sandbox.py", ("tests/code/test_sandbox.py", "--deselect",
                                         "tests/code/test_sandbox.py::test_unprivileged_caller_gets_user_namespaces_"
                                         "without_capabilities"), children=4),
]


@dataclass
class Outcome:
    """What mutmut found for one module."""

    source: str
    tests: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    survivors: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    children: int = 2  # mutants tested at once
    partial: bool = False  # the run was stopped: only the mutants with a verdict are counted ("not checked": the rest)


def _env() -> dict[str, str]:
    """The environment of a run in a scratch copy: the shared data found from here (a copy in /tmp cannot find
    it beside itself, and tests that need it would skip or fail to collect)."""
    from rewardkit.evals.data import shared_dir

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["REWARDKIT_SHARED"] = str(shared_dir().resolve())
    # one thread per test process: torch's thread pool does not survive mutmut's fork() (with it a surviving mutant
    # hung to its time limit and read as a timeout), and the 2 cores are shared
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _copy_checkout(dest: Path) -> None:
    """This checkout's tracked and untracked (not ignored) files, as they are now, into ``dest``."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)


def _fence_other_functions(path: Path, keep: tuple[str, ...]) -> None:
    """Put every function and method not named in ``keep`` between mutmut's ``no mutate start/end`` pragmas
    (in the scratch copy only): the module's other parts are not what this target measures."""
    lines = path.read_text().splitlines()
    spans = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in keep:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans.append((first, node.end_lineno, node.col_offset))
    outer = [sp for sp in spans if not any(o != sp and o[0] <= sp[0] and sp[1] <= o[1] for o in spans)]
    for first, last, col in sorted(outer, reverse=True):
        lines.insert(last, " " * col + "# pragma: no mutate end")
        lines.insert(first - 1, " " * col + "# pragma: no mutate start")
    if lines and lines[-1] == "# pragma: no mutate end":  # a module's trailing comments are read after its blocks'
        lines.append("pass")  # pragmas, where a fence still open at the module level is an error: end on a statement
    path.write_text("\n".join(lines) + "\n")


def _config(t: Target) -> str:
    """mutmut's setup.cfg section for one target (pyproject.toml has no [tool.mutmut], so this one is read)."""
    patterns = list(NOT_MUTATED)
    # docs: tests that check the docs say what the code does; benchmarks: tests that share a benchmark's cases
    # (test_spec.py: the reliability probe's URL forms); a folder moved under rewardkit/ (Target.scratch) is not copied
    copied = [p for p in ("conftest.py", "cli", "evals", "README.md", "docs", "benchmarks")
              if not t.scratch.startswith(f"rewardkit/{p}/")]
    lines = ["[mutmut]", "source_paths=rewardkit", f"only_mutate={t.scratch}",
             "also_copy=\n" + "\n".join(f"    {p}" for p in copied),
             "pytest_add_cli_args_test_selection=\n" + "\n".join(f"    {x}" for x in t.tests),
             "pytest_add_cli_args=\n    -p\n    no:cacheprovider\n    --hypothesis-profile=mutation",
             "timeout_constant=3.0",  # seconds added to each mutant's estimated test time: the machine is shared
             "do_not_mutate_patterns=\n" + "\n".join(f"    {p}" for p in patterns)]
    return "\n".join(lines) + "\n"


_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import find_mutant, get_diff_for_mutant
print(json.dumps({k: get_diff_for_mutant(k, path=find_mutant(k).path) for k in json.load(sys.stdin)}))
"""


def _diffs(work: Path, keys: list[str]) -> dict[str, list[str]]:
    """The changed lines ('-' then '+') of each mutant, from one mutmut process (``mutmut show`` is one per mutant)."""
    if not keys:
        return {}
    res = subprocess.run([sys.executable, "-c", _DIFFS], cwd=work, input=json.dumps(keys), capture_output=True,
                         text=True, check=True)
    return {k: [ln for ln in d.splitlines() if ln[:1] in "+-" and not ln.startswith(("---", "+++"))]
            for k, d in json.loads(res.stdout).items()}


# A module-level object built at import (a verdict form from its factory, a compiled table) is built once, in the
# process mutmut forks every mutant from: a mutant in the function that built it never reaches the tests there.
_IMPORT_CALLS = """
import json, sys
import pytest
target, called = sys.argv[1], set()
def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_filename == target:
        called.add(frame.f_code.co_qualname)
sys.setprofile(profile)
pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[2:]])
sys.setprofile(None)
print("\\n" + json.dumps(sorted(called)))
"""
_APPLY = "import sys\nfrom mutmut.mutation.diff_apply import apply_mutant\napply_mutant(sys.argv[1])\n"


def _import_time_functions(t: Target, work: Path, env: dict[str, str]) -> set[str]:
    """The module's functions that run while its tests are imported and collected (mutmut's names, ``x_f`` and
    ``xǁClassǁmethod``): their mutants are re-tested in a fresh process (``_fresh_kill``)."""
    res = subprocess.run([sys.executable, "-c", _IMPORT_CALLS, str((work / t.scratch).resolve()), *t.tests], cwd=work,
                         env={**env, "PYTHONPATH": str(work)}, capture_output=True, text=True, check=True)
    names = set()
    for q in json.loads(res.stdout.strip().splitlines()[-1]):
        if "<" not in q:  # closures belong to the function that made them
            names.add("x" + "ǁ" + "ǁ".join(q.split(".")) if "." in q else "x_" + q)
    return names


def _function_of(key: str) -> str:
    return key.split(".")[-1].rsplit("__mutmut_", 1)[0]


def _fresh_kill(t: Target, work: Path, env: dict[str, str], key: str, limit: float) -> str:
    """Re-test one survivor whose function ran at import: the mutant written into the scratch copy's source (mutmut's
    ``apply``), the module's tests run in a new process that imports it, the source restored. Returns "killed",
    "timeout" (past ``limit`` seconds: counted as killed, as mutmut counts its timeouts) or "survived"."""
    src = work / t.scratch
    clean = src.read_text()
    try:
        subprocess.run([sys.executable, "-c", _APPLY, key], cwd=work, env=env, check=True, capture_output=True)
        res = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                              "--hypothesis-profile=mutation", *t.tests], cwd=work,
                             env={**env, "PYTHONPATH": str(work)}, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return "timeout"
    finally:
        src.write_text(clean)
    return "killed" if res.returncode == 1 else "survived"


def _equivalents() -> list[dict]:
    return json.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else []


def _stale(known: list[dict]) -> list[dict]:
    """Recorded equivalents whose removed lines are no longer in their module (the code changed since): each must
    be re-examined or dropped, not matched to a new mutant by chance."""
    lines: dict[str, set[str]] = {}  # each module's stripped lines, read once
    for e in known:
        if e["module"] not in lines:
            lines[e["module"]] = {ln.strip() for ln in (ROOT / e["module"]).read_text().splitlines()}
    return [e for e in known
            if not all(ln[1:].strip() in lines[e["module"]] for ln in e["diff"] if ln.startswith("-"))]


def _reason(source: str, diff: list[str], known: list[dict]) -> str | None:
    norm = [ln[0] + ln[1:].strip() for ln in diff]
    for e in known:
        if e["module"] == source and [ln[0] + ln[1:].strip() for ln in e["diff"]] == norm:
            return e["reason"]
    return None


def run_target(t: Target, workdir: Path, children: int, resume: bool = False, cut: bool = False) -> Outcome:
    """Mutate one module in a scratch copy and collect mutmut's verdicts. ``resume``: go on in a scratch copy that a
    cut-short run left (mutmut keeps each mutant's verdict and tests only those without one). ``cut``: run nothing,
    record the verdicts a stopped run left there (a partial result)."""
    from mutmut.stats import status_by_exit_code

    work = workdir / t.source.replace("/", "_").removesuffix(".py")
    spent = work / "seconds_spent"  # wall seconds of the earlier, cut-short runs in this copy
    if cut:
        out = _record_cut(t, work)
        out.children = children  # the run being recorded was started with this target's children
        return out
    if not (resume and (work / "mutants" / (t.scratch + ".meta")).exists()):
        _copy_checkout(work)
        if t.scratch != t.source:
            top = t.source.split("/")[0]
            (work / top).rename(work / "rewardkit" / top)
        (work / "setup.cfg").write_text(_config(t))
        if t.functions:
            _fence_other_functions(work / t.scratch, t.functions)
        with open(work / "tests" / "conftest.py", "a") as f:
            f.write(HYPOTHESIS_PROFILE)
    # no PYTHONPATH: mutants/ does not exist yet when mutmut starts, and an import path cached as missing would
    # make the tests import the unmutated package; mutmut runs them from mutants/, whose conftest.py puts it first
    env = _env()
    t0 = time.monotonic() - (float(spent.read_text()) if spent.exists() else 0.0)
    try:
        res = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "mutmut", "run", "--max-children",
                              str(children)], cwd=work, env=env, capture_output=True, text=True)
    finally:
        seconds = time.monotonic() - t0
        spent.write_text(f"{seconds:.1f}")
    (work / "mutmut.log").write_text(res.stdout[-20000:] + res.stderr[-20000:])
    meta = work / "mutants" / (t.scratch + ".meta")
    if res.returncode != 0 or not meta.exists():
        raise RuntimeError(f"mutmut failed on {t.source} (status {res.returncode}); see {work / 'mutmut.log'}:\n"
                           f"{res.stderr[-3000:]}")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    survived = [k for k, c in codes.items() if status_by_exit_code[c] == "survived"]
    known, diffs = _equivalents(), _diffs(work, survived)
    fresh = _fresh_kills(t, work, env, survived, {k for k in survived if _reason(t.source, diffs[k], known) is None})
    seconds = time.monotonic() - t0
    spent.write_text(f"{seconds:.1f}")
    out = _outcome(t, work, codes, fresh, seconds)
    out.children = children
    return out


def _outcome(t: Target, work: Path, codes: dict[str, int | None], fresh: set[str], seconds: float,
             partial: bool = False) -> Outcome:
    """Counts per status and the mutants not killed (with their diffs and, for equivalents, the reason)."""
    from mutmut.stats import status_by_exit_code

    out = Outcome(t.source, list(t.tests), seconds=round(seconds, 1), partial=partial)
    known = _equivalents()
    live = ("survived", "no tests", "suspicious", "skipped")
    diffs = _diffs(work, [k for k, c in codes.items() if status_by_exit_code[c] in live and k not in fresh])
    for key, code in sorted(codes.items(), key=lambda kv: _natural(kv[0])):
        status = FRESH if key in fresh else status_by_exit_code[code]
        if status in live:
            diff = diffs[key]
            reason = _reason(t.source, diff, known)
            status = "equivalent" if reason and status == "survived" else status
            out.survivors.append({"mutant": key.split(".")[-1], "status": status, "diff": diff, "reason": reason})
        out.counts[status] = out.counts.get(status, 0) + 1
    return out


FRESH = "killed in a fresh process"


def _record_cut(t: Target, work: Path) -> Outcome:
    """The verdicts a stopped run left in ``work``: mutmut writes each one as it comes, so those are final; the
    mutants without one count as "not checked" and the module is marked partial; survivors that a fresh-process
    re-test killed (the copy's ``fresh.json``) count as such. Its seconds: from the scratch copy's set-up to
    mutmut's last verdict."""
    meta = work / "mutants" / (t.scratch + ".meta")
    if not meta.exists():
        raise RuntimeError(f"no mutmut run of {t.source} in {work}")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    seconds = meta.stat().st_mtime - (work / "setup.cfg").stat().st_mtime
    done = json.loads((work / "fresh.json").read_text()) if (work / "fresh.json").exists() else {}
    fresh = {k for k, c in codes.items() if c == 0 and done.get(k) in ("killed", "timeout")}
    return _outcome(t, work, codes, fresh, seconds, partial=any(c is None for c in codes.values()))


def _fresh_kills(t: Target, work: Path, env: dict[str, str], survivors: list[str], unexplained: set[str]) -> set[str]:
    """The survivors in functions that ran at import, or ``unexplained`` (no recorded reason to be equivalent), that
    the module's tests kill in a fresh process (verdicts kept in the scratch copy's ``fresh.json``, so ``--resume``
    does not redo them)."""
    done_path = work / "fresh.json"
    done = json.loads(done_path.read_text()) if done_path.exists() else {}
    at_import = _import_time_functions(t, work, env)
    todo = [k for k in survivors if (_function_of(k) in at_import or k in unexplained) and k not in done]
    if todo:
        t0 = time.monotonic()  # the unmutated tests must pass in a fresh process, and set the time limit
        clean = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                "--hypothesis-profile=mutation", *t.tests], cwd=work,
                               env={**env, "PYTHONPATH": str(work)}, capture_output=True, text=True)
        if clean.returncode != 0:
            raise RuntimeError(f"{t.source}: the unmutated tests fail in a fresh process:\n{clean.stdout[-3000:]}")
        limit = 3 * (time.monotonic() - t0) + 30
        for k in todo:
            done[k] = _fresh_kill(t, work, env, k, limit)
            done_path.write_text(json.dumps(done, indent=1))
    return {k for k in survivors if done.get(k) in ("killed", "timeout")}


def _natural(key: str) -> tuple:
    m = re.match(r"(.*?)(\d+)$", key)
    return (m.group(1), int(m.group(2))) if m else (key, 0)


def kill_rate(counts: dict[str, int]) -> tuple[float, float]:
    """(killed / all mutants, killed / non-equivalent mutants) over the mutants with a verdict; a timeout and a crash
    of the tests' process (mutmut's "segfault": the mutant recursed or corrupted its way out) count as killed."""
    total = sum(counts.values()) - counts.get("not checked", 0)
    killed = counts.get("killed", 0) + counts.get("timeout", 0) + counts.get("segfault", 0) + counts.get(FRESH, 0)
    live = total - counts.get("equivalent", 0)
    return (killed / total if total else float("nan"), killed / live if live else float("nan"))


# ------------------------------------------------------------------------------------------- planted bugs


@dataclass(frozen=True)
class Planted:
    """One of the issue's planted bugs: a one-line textual patch and the tests of its area."""

    name: str
    source: str
    old: str
    new: str
    tests: tuple[str, ...]


PLANTED = [
    Planted("eps_low and eps_high swapped in the clip", "rewardkit/grpo/losses.py",
            "torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a", "torch.clamp(ratio, 1 - eps_high, 1 + eps_low) * a",
            ("tests/grpo/test_losses.py",)),
    Planted("the per-objective weights ignored", "rewardkit/grpo/losses.py",
            "total = total + w * lk", "total = total + lk", ("tests/grpo/test_losses.py",)),
    Planted("run budget = timeout, not timeout x n_tests", "rewardkit/code/execution.py",
            "budget = config.timeout * problem.n_tests", "budget = config.timeout",
            ("tests/code/test_execution.py",)),
    Planted("R^a added when correctness is unknown", "rewardkit/gar/rewards.py",
            "if not ref and c is not None and not math.isnan(out[i]):", "if not ref and not math.isnan(out[i]):",
            ("tests/gar/test_rewards.py", "tests/gar/test_slices.py")),
    Planted("the probability range check | changed to &", "rewardkit/gar/rewards.py",
            "np.any((a < 0) | (a > 1))", "np.any((a < 0) & (a > 1))",
            ("tests/gar/test_rewards.py", "tests/gar/test_slices.py")),
    Planted("E[R_crit] computed with tau_pol", "rewardkit/raro/critic.py",
            "return p_pol + tau_pol * pt, p_exp + tau_crit * pt", "return p_pol + tau_pol * pt, p_exp + tau_pol * pt",
            ("tests/raro/test_critic.py",)),
    Planted("answer clusters checked one way only", "rewardkit/answers.py",
            "if checks[j].equivalent or checks[k + j].equivalent:", "if checks[j].equivalent:",
            ("tests/test_answers.py",)),
    Planted("the sign of bt_log_likelihood flipped", "rewardkit/arena/ranking.py",
            "return -_loss_grad(np.asarray(beta, float), i, j, o, 0.0)[0]",
            "return _loss_grad(np.asarray(beta, float), i, j, o, 0.0)[0]", ("tests/arena/test_ranking.py",)),
    Planted("a mirrored BT match scored as the original", "rewardkit/arena/ranking.py",
            "1.0 - arr[:, 2]], axis=1)", "arr[:, 2]], axis=1)", ("tests/arena/test_ranking.py",)),
    Planted("ResZero counts None answers", "rewardkit/jury/reszero.py",
            "labels = [a if a is not None else _NoAnswer() for a in answers]", "labels = list(answers)", ("tests/jury/test_reszero.py", "tests/jury/test_proof_gate.py")),
    Planted("a verdict tag read last, not first", "rewardkit/verdict_forms.py",
            'hits[-1] if self.place == "end" else hits[0]', "hits[-1]", ("tests/test_verdicts.py",)),
    Planted("the sign of -\\frac{a}{b} dropped", "rewardkit/answers.py",
            "return -v if sign == \"-\" else v", "return v", ("tests/test_answers.py",)),
]

_FAILED = re.compile(r"^FAILED (tests/.+?::.*?)(?: - .*)?$", re.M)  # test ids may hold spaces


def run_planted(p: Planted, workdir: Path) -> dict:
    """Apply one planted bug to a scratch copy, run its area's tests, report the tests that caught it."""
    work = workdir / "planted"
    if not work.exists():
        _copy_checkout(work)
    path = work / p.source
    clean = (ROOT / p.source).read_text()
    if clean.count(p.old) != 1:
        raise RuntimeError(f"planted bug {p.name!r}: {p.old!r} occurs {clean.count(p.old)} times in {p.source}")
    path.write_text(clean.replace(p.old, p.new))
    try:
        env = {**_env(), "PYTHONPATH": str(work)}
        res = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "-rf", *p.tests], cwd=work, env=env, capture_output=True, text=True)
    finally:
        path.write_text(clean)
    failed = _FAILED.findall(res.stdout)
    return {"name": p.name, "source": p.source, "patch": [f"-{p.old}", f"+{p.new}"], "tests": list(p.tests),
            "status": res.returncode, "caught": res.returncode == 1 and bool(failed), "caught_by": failed,
            "summary": res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr[-500:]}


# ------------------------------------------------------------------------------------------- report


def render() -> str:
    """mutation.md from the two JSON results (either may be missing)."""
    lines = ["# Mutation testing (issue 39)", "",
             "`python benchmarks/mutation.py` (mutmut 3, each module with only its own tests; "
             "`--planted` for the planted bugs). Generated: do not edit by hand.", "",
             "Each module is mutated in a scratch copy with only the tests listed beside it. Not mutated: `raise` "
             "statements and log calls (wording, not numbers); in `answers.py` only its equivalence and clustering "
             "functions, in `code/execution.py` only its grading functions and in `grpo/modes.py` only its reward, "
             "advantage and objective paths (not its option resolution, CLI builder, checkpoint state or calls "
             "passed through to the learner) are mutated (the script's `TARGETS`). "
             "A timeout (the mutant's tests ran past mutmut's limit) and a crash of the tests' process (mutmut's "
             "segfault) count as killed. mutmut tests every mutant in a "
             "process forked after the tests were imported, so a mutant in a function that runs at import (a verdict "
             "form's factory) never reaches them, and a test's subprocess under a C locale does not read back mutmut's "
             "switch (an environment variable holding a non-ASCII name): each such survivor, and each survivor with no "
             "recorded reason, is written into the source and the module's tests "
             "run again in a fresh process, and those they fail on count as killed in a fresh process. A survivor listed in "
             "`benchmarks/mutation_equivalent.json` is shown as equivalent with its reason; the second kill rate "
             "leaves those out. A module missing from the table was not run in the time available.", ""]
    mj, pj = RESULTS / "mutation.json", RESULTS / "mutation_planted.json"
    if mj.exists():
        data = json.loads(mj.read_text())
        lines += [f"mutmut {data['mutmut']}, {data['machine']['cpus']} CPUs, {data['seconds']:.0f} s in all (at once: mutants tested at the same time, mutmut's --max-children).", "",
                  "| module | tests | mutants | killed | killed in a fresh process | timeout | crash | equivalent | "
                  "survived | no tests | kill rate | kill rate (non-equivalent) | seconds | at once |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        known = _equivalents()
        for m in data["modules"]:  # reasons recorded after the run apply too
            for sv in m["survivors"]:
                reason = _reason(m["source"], sv["diff"], known) if sv["status"] == "survived" else None
                if reason:
                    sv.update(status="equivalent", reason=reason)
                    m["counts"]["survived"] -= 1
                    m["counts"]["equivalent"] = m["counts"].get("equivalent", 0) + 1
        for m in data["modules"]:
            c = m["counts"]
            raw, live = kill_rate(c)
            part = (f" (partial: {sum(c.values()) - c.get('not checked', 0)} of {sum(c.values())} mutants checked "
                    "when the run was stopped)") if m.get("partial") else ""
            lines.append(f"| `{m['source']}`{part} | {', '.join('`' + t + '`' for t in m['tests'])} | {sum(c.values())} | "
                         f"{c.get('killed', 0)} | {c.get(FRESH, 0)} | {c.get('timeout', 0)} | {c.get('segfault', 0)} | "
                         f"{c.get('equivalent', 0)} | "
                         f"{c.get('survived', 0)} | {c.get('no tests', 0)} | {raw:.1%} | {live:.1%} | {m['seconds']:.0f} | "
                         f"{m.get('children', 2)} |")
        stale = _stale(known)
        if stale:
            lines += ["", "Recorded equivalents whose lines are gone from their module (re-examine or drop): "
                      + "; ".join(f"`{e['module']}`: `{e['diff'][0][1:].strip()}`" for e in stale)]
        missing = [t.source for t in TARGETS if t.source not in {m["source"] for m in data["modules"]}]
        if missing:
            lines += ["", "Not run yet: " + ", ".join(f"`{x}`" for x in missing) + "."]
        for m in data["modules"]:
            if not m["survivors"]:
                continue
            lines += ["", f"## `{m['source']}`: mutants not killed", ""]
            for s in m["survivors"]:
                why = f": {s['reason']}" if s["reason"] else ""
                lines.append(f"- `{s['mutant']}` **{s['status']}**{why}")
                lines += ["  ```diff"] + [f"  {d}" for d in s["diff"]] + ["  ```"]
    if pj.exists():
        data = json.loads(pj.read_text())
        lines += ["", "## The issue's twelve planted bugs", "",
                  "Each applied alone to a scratch copy, then the tests of its area run (`--planted`).", "",
                  "| planted bug | where | caught | by |", "|---|---|---|---|"]
        for p in data["bugs"]:
            by = "<br>".join(f"`{t}`" for t in p["caught_by"]) or "-"
            lines.append(f"| {p['name'].replace('|', chr(92) + '|')} | `{p['source']}` | {'yes' if p['caught'] else '**no**'} | {by} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help="modules to run (suffixes of their paths)")
    ap.add_argument("--planted", action="store_true", help="run the twelve planted bugs instead of mutmut")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/rk-mutation"), help="scratch copies go here")
    ap.add_argument("--children", type=int, default=2, help="mutants tested at once (the machine is shared)")
    ap.add_argument("--resume", action="store_true",
                    help="go on in the scratch copies a cut-short run left in --workdir (mutmut keeps each verdict)")
    ap.add_argument("--record-cut", action="store_true",
                    help="run nothing: record the verdicts a stopped run left in --workdir, the module marked partial")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.planted:
        shutil.rmtree(args.workdir / "planted", ignore_errors=True)
        path = RESULTS / "mutation_planted.json"
        bugs = json.loads(path.read_text())["bugs"] if path.exists() and args.only else []
        for p in PLANTED:
            if args.only is None or any(p.source.endswith(o) for o in args.only):
                b = run_planted(p, args.workdir)
                bugs = [x for x in bugs if x["name"] != b["name"]] + [b]
                print(f"{'caught' if b['caught'] else 'MISSED'}: {b['name']} by {b['caught_by']}", flush=True)
        order = [p.name for p in PLANTED]
        bugs.sort(key=lambda b: order.index(b["name"]))
        path.write_text(json.dumps({"bugs": bugs}, indent=1) + "\n")
    else:
        import mutmut

        targets = [t for t in TARGETS if args.only is None or any(t.source.endswith(o) for o in args.only)]
        path = RESULTS / "mutation.json"
        order = [t.source for t in TARGETS]
        for t in targets:
            o = run_target(t, args.workdir, t.children or args.children, args.resume, args.record_cut)
            # read again now: modules not run here keep their last result, also one that a run beside this wrote
            old = json.loads(path.read_text()) if path.exists() else {"modules": []}
            done = {m["source"]: m for m in old["modules"]}
            done[o.source] = o.__dict__
            print(f"{t.source}: {o.counts} kill rate {kill_rate(o.counts)[0]:.1%} in {o.seconds:.0f} s", flush=True)
            modules = sorted(done.values(), key=lambda m: order.index(m["source"]))
            data = {"mutmut": mutmut.__version__, "machine": machine(),
                    "seconds": round(sum(m["seconds"] for m in modules), 1), "modules": modules}
            path.write_text(json.dumps(data, indent=1) + "\n")  # after each module: a cut-short run keeps its part
            (RESULTS / "mutation.md").write_text(render())
    (RESULTS / "mutation.md").write_text(render())


if __name__ == "__main__":
    main()
