"""rewardkit: reward modelling for LLM reinforcement learning behind one batched Scorer interface."""

from rewardkit.answers import AnswerChecker, cluster_answers, equivalent, extract_answer
from rewardkit.api import score  # the front door: rows in, rows with rewards and statuses out

# Reasoning Arena: Bradley-Terry (eq. 9-10), win rate (eq. 8), normalisation
from rewardkit.arena.ranking import (
    bradley_terry,
    minmax_normalize,
    newton_soft_pairwise_batched,
    win_rate_pairwise,
)
from rewardkit.backends import load_backend

# GAR: slicing and the slice discriminator scorer
from rewardkit.gar.slices import SliceScorer
from rewardkit.gar.slicing import slice_text

# JURY-RL: majority proposal, proof gate (eq. 4), ResZero (eq. 5), verifiers
from rewardkit.jury.proof_gate import proof_gate_rewards
from rewardkit.jury.reszero import reszero_rewards
from rewardkit.jury.vote import majority_vote, vote

# RARO: relativistic critic rewards, replay buffer
from rewardkit.raro.critic import CriticScorer, critic_reward, policy_reward
from rewardkit.raro.replay import ReplayBuffer
from rewardkit.scoring import (
    BaseScorer,
    JudgeOptions,
    JudgeScorer,
    Options,
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
from rewardkit.verifier import Claim, ReferenceVerifier, Verifier, VerifyResult
from rewardkit.version import __version__ as __version__

__all__ = [
    "AnswerChecker", "BaseScorer", "Claim", "Cost", "CriticScorer", "Group", "GroupScore", "JudgeOptions",
    "JudgeScorer", "Options", "ReferenceVerifier", "Verifier",
    "ReplayBuffer", "Scorer", "SliceScorer", "Status", "VerifyResult", "bradley_terry", "cluster_answers",
    "critic_reward", "diversity_stats", "dr_grpo_advantages", "equivalent", "extract_answer", "get_scorer",
    "grpo_advantages", "load_backend", "majority_vote", "minmax_normalize", "newton_soft_pairwise_batched",
    "policy_reward", "proof_gate_rewards", "reszero_rewards", "reward_diversity", "rloo_advantages",
    "score", "scorer_names", "slice_text", "to_tensors", "vote", "win_rate_pairwise",
]
