"""A minimal GRPO trainer over any rewardkit scorer (losses, the loop, checkpoints, training modes, GAR's SFT stage)."""

from rewardkit.grpo.data import read_prompts
from rewardkit.grpo.losses import aggregate, cispo_loss, grpo_loss, k3_kl, mixed_loss, policy_loss
from rewardkit.grpo.modes import GarJoint, RaroShared, critic_step
from rewardkit.grpo.trainer import GRPOTrainer, Learner, Rollouts, TrainConfig, TrainingMode

__all__ = ["GarJoint", "GRPOTrainer", "Learner", "RaroShared", "Rollouts", "TrainConfig", "TrainingMode", "aggregate",
           "cispo_loss", "critic_step", "grpo_loss", "k3_kl", "mixed_loss", "policy_loss", "read_prompts"]
