# The runtime of every CPU job of the workflow (baselines, aggregation, report, the tiny model,
# CPU training, evaluations of local models): dependencies only. Jobs run the checkout's code,
# mounted at its own path with PYTHONPATH pointing at it (workflow/scripts/job_shell.py), so a
# code change never needs a new image.
#
# Build context: the image's wheelhouse, containers/wheels/runtime/ (made by
# `python containers/wheelhouse.py --image runtime`); the build installs from it only, so it needs
# no registry. The workflow's runtime_image rule builds it (workflow/scripts/build_image.py) and
# tags it localhost/schemashift-runtime:<digest of this file, the wheels and the base image>:
#   podman build --format docker -f containers/runtime.Dockerfile \
#       --build-arg BASE_IMAGE=<base> --build-arg IMAGE_TAG=<tag> -t <tag> containers/wheels/runtime
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

# The tag the image is built under: jobs stamp it on their records (the `image` column).
ARG IMAGE_TAG
LABEL org.opencontainers.image.title="schemashift-runtime" \
      org.opencontainers.image.description="SchemaShift Bench workflow job runtime (CPU)" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SCHEMASHIFT_IMAGE=${IMAGE_TAG}

# torch first, then the rest under the constraint that holds it at its pin (scripts/bootstrap.sh).
COPY . /wheels/
RUN test -n "$IMAGE_TAG" \
    && python3 -m venv "$VIRTUAL_ENV" \
    && pip install --no-cache-dir --no-index --find-links /wheels -r /wheels/requirements-first.txt \
    && pip install --no-cache-dir --no-index --find-links /wheels -c /wheels/constraints.txt -r /wheels/requirements.txt \
    && pip install --no-cache-dir --no-index --find-links /wheels --no-deps -r /wheels/requirements-nodeps.txt \
    && rm -rf /wheels \
    && python -c "import torch, transformers, trl, peft, pandas, pyarrow, seaborn, fastmcp; print('runtime ok', torch.__version__)"
