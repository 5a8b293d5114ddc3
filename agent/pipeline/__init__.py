"""Chorus's own pipeline kind: its file, its service graph and the executor that runs a turn
through it, on the machinery both kinds share (:mod:`agent.turn`)."""
