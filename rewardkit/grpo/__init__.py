"""A minimal GRPO trainer over any rewardkit scorer (losses, the loop, checkpoints, training modes)."""

from rewardkit.grpo.data import read_prompts
from rewardkit.grpo.losses import aggregate, cispo_loss, grpo_loss, k3_kl
from rewardkit.grpo.modes import GarJoint, RaroShared
from rewardkit.grpo.trainer import GRPOTrainer, Rollouts, TrainConfig, TrainingMode

__all__ = ["GarJoint", "GRPOTrainer", "RaroShared", "TrainingMode", "Rollouts", "TrainConfig", "aggregate", "cispo_loss", "grpo_loss", "k3_kl",
           "read_prompts"]
