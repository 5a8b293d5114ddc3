# chorus-agent-dream: the Chorus agent image plus what a DeepPavlov Dream distribution's
# state formatters import at start-up (docs/dream.md). Dream's checkout is not in the image:
# mount it at /dp-agent, where Dream's own agent image keeps it (formatters and python
# connectors are imported from there, and Dream's `common` opens data files relative to it).
# Build the agent image first, then this one (the context is deploy/; nothing is copied):
#   docker build -f deploy/agent.Dockerfile -t chorus-agent .
#   docker build -f deploy/agent-dream.Dockerfile -t chorus-agent-dream deploy/
# The command is the agent image's own (python -m agent.api.serve on 0.0.0.0:4242, with the
# HTTP server's limits); CHORUS_PIPELINE names the distribution's pipeline_conf.json.
ARG AGENT_IMAGE=chorus-agent
FROM ${AGENT_IMAGE}

# Dream's state_formatters import common.custom_requests, which imports these two (Dream's
# agent image pins sentry-sdk 0.16 and requests 2.24 for Python 3.7; these import on 3.11).
USER root
RUN pip install --no-cache-dir "requests>=2.31,<3" "sentry-sdk>=2,<3"

# The checkout's root on the Python path and as the working directory, as in Dream's image.
# SQLite, when CHORUS_DB_URL does not name MongoDB, stays in the image's writable data/
# folder rather than in the mounted checkout.
ENV PYTHONPATH=/dp-agent \
    CHORUS_DB_URL=sqlite:////app/data/chorus.db
WORKDIR /dp-agent

USER chorus
