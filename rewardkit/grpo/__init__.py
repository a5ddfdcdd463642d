"""rewardkit.grpo."""
