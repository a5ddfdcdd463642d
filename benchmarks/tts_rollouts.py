"""Test-time scaling on the shared Qwen2.5-Math rollouts with the embedded judge (RARO Algorithm 3).

Selects one of the first N responses per problem with the judge options of ``TTSOptions`` (defaults: the
paper's setting, i.e. the critic reasons before its verdict in generate mode with a 2048-token budget, K = 4
votes in the printed order, single elimination), beside majority vote, random choice (exact expectation),
the reward-model best-of-N from the file, and the oracle (pass@N). Writes benchmarks/results/tts_rollouts.*.

    python benchmarks/tts_rollouts.py                                   # the paper's setting, N = 1, 2, 4, 8
    python benchmarks/tts_rollouts.py --mode logit --order alternate    # rewardkit's additions, opted into

Every ``TTSOptions`` field is a flag, as in ``rewardkit tts`` (``--mode``, ``--order``, ``--max-tokens``,
``--methods tournament,bt``, ``--no-skip-uniform``, ...), typed by ``rewardkit.options.coerce``.

Pools whose labels are all equal are not judged (every pick has the same correctness), so only the
mixed problems cost model calls; the accuracies are over all problems.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import fields
from pathlib import Path

from _common import rel_path, relativize  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from rewardkit.evals.data import rollouts_path  # noqa: E402

from rewardkit.options import coerce, coerce_options, option_hints
from rewardkit.raro.tts import TTSOptions

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", default=str(rollouts_path()))
    ap.add_argument("--n", default="1,2,4,8", help="pool sizes N")
    ap.add_argument("--limit", type=int, default=None, help="only the first LIMIT problems")
    ap.add_argument("--judge", default="smollm2", help="judge backend spec")
    for f in fields(TTSOptions):  # the judge and selection options, read from the one class
        flag = "--" + f.name.replace("_", "-")
        if option_hints(TTSOptions)[f.name] is bool:
            ap.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=f.metadata["help"])
        else:
            ap.add_argument(flag, default=None, help=f"{f.metadata['help']} (default: {f.default})")
    ap.add_argument("--note", default="", help="a line for the report (e.g. what a smaller run cut)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/tts_rollouts"))
    a = ap.parse_args()

    from rewardkit.evals.tts import accuracy_table, load_rollouts, run_tts, write_report

    from rewardkit.backends import load_backend

    given = {f.name: getattr(a, f.name) for f in fields(TTSOptions) if getattr(a, f.name) is not None}
    options = TTSOptions(**coerce_options(TTSOptions, given, "TTSOptions"))
    problems = load_rollouts(a.rollouts, a.limit)
    res = run_tts(problems, load_backend(a.judge), coerce(a.n, tuple[int, ...]), options)
    res["settings"].update(rollouts=rel_path(a.rollouts), limit=a.limit, note=a.note or None)
    cmd = relativize("python benchmarks/tts_rollouts.py " + shlex.join(sys.argv[1:]))
    print(accuracy_table(res["rows"]))
    print(res["cost"])
    title = f"TTS on math_cot_100: {options.prompt} prompt, SmolLM2-135M, {options.mode} mode"
    for f in write_report(res, a.out, title, cmd.strip()):
        print("wrote", f)


if __name__ == "__main__":
    main()
