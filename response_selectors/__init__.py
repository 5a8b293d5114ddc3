"""Chorus response selectors: one folder per service, each built with agent.sdk."""
