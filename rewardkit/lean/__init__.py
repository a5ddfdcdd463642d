"""rewardkit.lean."""
