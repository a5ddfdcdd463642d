"""rewardkit.integrations."""
