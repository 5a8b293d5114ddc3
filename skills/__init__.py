"""Chorus skills: one folder per service, each a small FastAPI app built with agent.sdk."""
