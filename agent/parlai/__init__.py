"""ParlAI at Chorus's edges: observations in, acts out, datasets replayed."""
