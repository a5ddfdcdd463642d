"""rewardkit.evals."""
