"""Chorus benchmarks: `make bench` runs them all (see bench/run.py)."""
