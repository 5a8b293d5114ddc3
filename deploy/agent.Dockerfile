# The Chorus agent: python -m agent.api.serve (uvicorn serving agent.api.app:create_app, with
# the HTTP server's limits of docs/trust-boundary.md) on port 4242.
# Build with the repository root as the context (docker-compose.yml does):
#   docker build -f deploy/agent.Dockerfile -t chorus-agent .
# Configuration comes from CHORUS_* environment variables (agent/settings.py), e.g.
# CHORUS_DB_URL=mongodb://mongo:27017/chorus and CHORUS_PIPELINE=/app/deploy/pipeline.compose.json.
# Without compose, mount your pipeline at /app/pipeline.json, the default path
# (docs/deployment.md, "The agent image without compose").
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

RUN useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin chorus

WORKDIR /app

# The project and its dependencies (README.md is the package description pyproject.toml names).
# Only the agent package is installed; the services are images of their own. The agent
# depends on the service SDK's distribution (sdk/pyproject.toml, built from agent/sdk/).
COPY pyproject.toml README.md constraints.txt ./
COPY sdk/pyproject.toml sdk/
COPY agent/ agent/
# The versions `make test` passed with (constraints.txt, written by `make lock`).
RUN pip install --no-cache-dir -c constraints.txt ./sdk . \
    && rm -rf build sdk/build *.egg-info

# Pipeline configs for the deployment (compose uses deploy/pipeline.compose.json).
COPY deploy/ deploy/

# The default store is SQLite under data/; let the non-root user write there.
RUN mkdir -p /app/data && chown chorus:chorus /app/data

USER chorus
EXPOSE 4242
# /ready: unhealthy while MongoDB or a required service is unreachable (docs/observability.md).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4242/ready', timeout=3)"]
CMD ["python", "-m", "agent.api.serve", "--host", "0.0.0.0", "--port", "4242"]
