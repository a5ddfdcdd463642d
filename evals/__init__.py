"""rewardkit.evals: the evaluation harness behind ``rewardkit eval``.

``metrics`` (pure metric functions, re-exported here), ``loaders`` (benchmarks), ``generate`` (sampling
rollouts), ``harness`` (grading, scoring, reports), ``headline``, ``judge_quality``, ``tables`` (the
committed results and README tables), ``lm_eval`` (lm-eval 0.4 task configs), ``processbench``, ``data``;
for judges trained on held-out data: ``splits`` (train / validation / held-out by problem), ``slice_labels``
(ProcessBench slice labels, GAR SFT targets, discriminator metrics), ``critic_pairs`` (RARO expert/policy
pairs, warm-start targets, critic metrics).
"""

from rewardkit.evals.metrics import *  # noqa: F401,F403
from rewardkit.evals.metrics import __all__  # noqa: F401
