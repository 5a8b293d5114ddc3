"""The agent's HTTP API (FastAPI): routes are thin, the work is in the message flow."""
