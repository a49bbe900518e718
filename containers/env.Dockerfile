# The SchemaShift environment server: `schemashift serve` on port 8000 (WebSocket /ws, HTTP, MCP).
#
# Build context: the repository root, with the wheelhouse made by `python containers/wheelhouse.py --image server`
# (the build installs from it only, so it needs no registry):
#   podman build --format docker -f containers/env.Dockerfile \
#       --build-arg BASE_IMAGE=localhost/debian-python:bookworm -t schemashift-env .
#   docker build -f containers/env.Dockerfile -t schemashift-env .
# Run: podman run --rm -p 127.0.0.1:8000:8000 schemashift-env   (docker run alike)
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title="schemashift-env" \
      org.opencontainers.image.description="SchemaShift Bench environment server (OpenEnv)" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    HOME=/home/app \
    SCHEMASHIFT_MAX_SESSIONS=64 \
    SCHEMASHIFT_SESSION_TIMEOUT_S=600

# Both supported bases (python:3.11-slim, a debootstrap Debian with python3-venv) have python3.
COPY containers/wheels/server/ /wheels/
RUN python3 -m venv "$VIRTUAL_ENV" \
    && pip install --no-cache-dir --no-index --find-links /wheels -r /wheels/requirements.txt \
    && pip install --no-cache-dir --no-index --find-links /wheels --no-deps -r /wheels/requirements-nodeps.txt \
    && rm -rf /wheels \
    && mkdir -p /home/app && chown 10001:10001 /home/app

# The package runs from source (PYTHONPATH): no build step, and none of its non-server dependencies.
COPY schemashift/ /app/schemashift/
RUN python -m compileall -q /app/schemashift

USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"]
CMD ["python", "-m", "schemashift.cli", "serve", "--host", "0.0.0.0", "--port", "8000"]
