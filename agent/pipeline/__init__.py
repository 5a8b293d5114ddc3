"""The turn pipeline: its config, its service graph and the executor that runs a turn."""
