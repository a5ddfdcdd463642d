"""rewardkit: reward modelling for LLM reinforcement learning behind one batched Scorer interface."""

from rewardkit.answers import AnswerChecker, cluster_answers, equivalent, extract_answer
from rewardkit.backends import load_backend
from rewardkit.critic import CriticScorer, ReplayBuffer, critic_reward, policy_reward
from rewardkit.ranking import bradley_terry, minmax_normalize, newton_soft_pairwise_batched, win_rate_pairwise
from rewardkit.scoring import (
    BaseScorer,
    Scorer,
    diversity_stats,
    dr_grpo_advantages,
    get_scorer,
    grpo_advantages,
    reward_diversity,
    rloo_advantages,
    scorer_names,
)
from rewardkit.types import Cost, Group, GroupScore, Status, to_tensors

__version__ = "0.1.0"

__all__ = [
    "bradley_terry",
    "minmax_normalize",
    "newton_soft_pairwise_batched",
    "win_rate_pairwise",
    "AnswerChecker",
    "BaseScorer",
    "Cost",
    "CriticScorer",
    "Group",
    "ReplayBuffer",
    "GroupScore",
    "Scorer",
    "Status",
    "cluster_answers",
    "critic_reward",
    "diversity_stats",
    "dr_grpo_advantages",
    "equivalent",
    "extract_answer",
    "get_scorer",
    "grpo_advantages",
    "load_backend",
    "reward_diversity",
    "policy_reward",
    "rloo_advantages",
    "scorer_names",
    "to_tensors",
]

# JURY-RL (proof gate): majority proposal, ResZero (eq. 5), proof-gated rewards (eq. 4), verifiers
from rewardkit.proof_gate import (  # noqa: E402
    Claim,
    ReferenceVerifier,
    VerifyResult,
    majority_vote,
    proof_gate_rewards,
    reszero_rewards,
    vote,
)

__all__ += ["Claim", "ReferenceVerifier", "VerifyResult", "majority_vote", "proof_gate_rewards", "reszero_rewards", "vote"]

# GAR (slice-level discriminator rewards)
from rewardkit.slices import SliceScorer, slice_text  # noqa: E402

__all__ += ["SliceScorer", "slice_text"]
