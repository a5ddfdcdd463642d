"""rewardkit.prompts."""
