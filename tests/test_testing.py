"""rewardkit.testing: the scripted judge refuses what every real backend refuses."""

import pytest

from rewardkit.backends import VerdictRequest
from rewardkit.testing import ScriptedJudge

MSG = [{"role": "user", "content": "Which is better?"}]


def test_the_scripted_judge_refuses_a_verdict_request_a_real_backend_refuses():
    # before: a scorer building a request with an empty choice passed its tests against ScriptedJudge and raised
    # only on a real backend
    judge = ScriptedJudge(probs=lambda prompt, choices: [1.0 / len(choices)] * len(choices))
    with pytest.raises(ValueError, match="^verdict request 1: every choice must be a non-empty string"):
        judge.verdict_probs([VerdictRequest(MSG, ("A", "B")), VerdictRequest(MSG, ("A", ""))])
    assert judge.batches == [] and judge.requests == []  # refused before the call is recorded
    [r] = judge.verdict_probs([VerdictRequest(MSG, ("A", "B"))])
    assert r.probs.tolist() == [0.5, 0.5] and judge.batches == [("verdict", 1)]
