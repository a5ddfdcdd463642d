"""rewardkit.backends."""
