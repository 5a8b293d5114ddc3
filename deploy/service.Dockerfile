# One image for any pipeline service (annotator, skill selector, skill, response selector):
# the FastAPI app <SERVICE>.app:app on port 8000, where the build argument SERVICE names the
# service's folder. Build with the repository root as the context (docker-compose.yml does):
#   docker build -f deploy/service.Dockerfile --build-arg SERVICE=skills/faq -t chorus-faq .
# The image holds only the service SDK (agent/__init__.py, agent/sdk/), the code services
# share (shared/), the four group packages' __init__.py and the service's folder, plus
# deploy/service-requirements.txt and the folder's requirements.txt if it has one.
FROM python:3.11-slim

ARG SERVICE

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    SERVICE=${SERVICE}

RUN test -n "$SERVICE" || { echo "build with --build-arg SERVICE=<group>/<name>" >&2; exit 1; } \
    && useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin chorus

WORKDIR /app

# Dependencies first, so editing the code reuses this layer. The wildcard makes the service's
# own requirements.txt optional: a COPY succeeds when at least one of its sources matches.
COPY deploy/service-requirements.txt ${SERVICE}/requirements*.txt /tmp/requirements/
RUN set -- -r /tmp/requirements/service-requirements.txt \
    && if [ -f /tmp/requirements/requirements.txt ]; then \
           set -- "$@" -r /tmp/requirements/requirements.txt; \
       fi \
    && pip install --no-cache-dir "$@" \
    && rm -rf /tmp/requirements

COPY agent/__init__.py agent/
COPY agent/sdk/ agent/sdk/
COPY shared/ shared/
COPY annotators/__init__.py annotators/
COPY skill_selectors/__init__.py skill_selectors/
COPY skills/__init__.py skills/
COPY response_selectors/__init__.py response_selectors/
COPY ${SERVICE}/ ${SERVICE}/

# A service that reads spelling (shared/spelling.py) has its dictionary built here, once,
# into the image: each container then reads the built file (under XDG_CACHE_HOME;
# shared/compact_speller.py) instead of spending a second or two of CPU as it starts.
ENV XDG_CACHE_HOME=/app/.cache
RUN if python -c "import symspellpy" 2>/dev/null; then \
        python -c "from shared import spelling; spelling.warm()"; \
    fi

USER chorus
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"]
# skills/faq serves skills.faq.app:app; exec makes uvicorn PID 1, so it gets SIGTERM.
CMD ["sh", "-c", "exec uvicorn \"$(echo \"$SERVICE\" | tr / .).app:app\" --host 0.0.0.0 --port 8000"]
