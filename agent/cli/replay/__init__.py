"""``chorus replay``: a candidate pipeline run over the stored turns, and compared with
what the stored pipeline did (docs/experiments.md)."""
