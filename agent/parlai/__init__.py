"""ParlAI at Chorus's edges (seeds 000-003): observations in, acts out, datasets replayed."""
