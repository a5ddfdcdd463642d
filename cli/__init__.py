"""rewardkit.cli."""
