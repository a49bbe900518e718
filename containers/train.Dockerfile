# The GPU training image: one pinned GPU stack (STACK=vllm or unsloth, the pyproject extras of the
# same names, which envs/train-*.yaml mirror), dependencies only: jobs run the checkout's code,
# mounted (workflow/scripts/job_shell.py), as in the runtime image.
#
# No CUDA base image: torch's CUDA build from the package index carries the CUDA libraries as
# nvidia-* wheels; the host's driver (libcuda) comes in at run time (`--gpus`/CDI under podman or
# docker, `--nv` under apptainer). The base is the project's own Debian base (the debootstrap one,
# whose gcc and Python headers triton's JIT needs to compile its launchers).
#
# Build context: the stack's wheelhouse, containers/wheels/train-<STACK>/ (made by
# `python containers/wheelhouse.py --image train-vllm`); the build installs from it only, so it
# needs no registry. The workflow's train_image rule builds it (workflow/scripts/build_image.py)
# and tags it localhost/schemashift-train-<STACK>:<digest of this file, the wheels and the base>:
#   podman build --format docker -f containers/train.Dockerfile --build-arg STACK=vllm \
#       --build-arg BASE_IMAGE=<base> --build-arg IMAGE_TAG=<tag> -t <tag> containers/wheels/train-vllm
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG STACK
# The tag the image is built under: jobs stamp it on their records (the `image` column).
ARG IMAGE_TAG
LABEL org.opencontainers.image.title="schemashift-train" \
      org.opencontainers.image.description="SchemaShift Bench GPU training job runtime" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SCHEMASHIFT_IMAGE=${IMAGE_TAG}

# torch's CUDA build first, then the stack under the constraint that holds torch at its pin: a
# stack whose own requirements want another torch (Unsloth's may) fails here instead of silently
# replacing it; the checks after the install confirm the torch and the stack that are there. The
# wheelhouse (about 4 GB) is bind-mounted, not copied: a COPY layer would keep it in the image.
RUN --mount=type=bind,target=/wheels \
    case "$STACK" in unsloth|vllm) ;; *) echo "STACK must be unsloth or vllm, got '$STACK'" >&2; exit 1 ;; esac \
    && test -n "$IMAGE_TAG" \
    && python3 -m venv "$VIRTUAL_ENV" \
    && pip install --no-cache-dir --no-index --find-links /wheels -r /wheels/requirements-first.txt \
    && pip install --no-cache-dir --no-index --find-links /wheels -c /wheels/constraints.txt -r /wheels/requirements.txt \
    && pip install --no-cache-dir --no-index --find-links /wheels --no-deps -r /wheels/requirements-nodeps.txt \
    && python -c "import torch; assert torch.__version__.split('+')[0] == '2.13.0' and torch.version.cuda, (torch.__version__, torch.version.cuda)" \
    && python -c "import importlib.metadata as m; m.version('$STACK')" \
    && python -c "import transformers, trl, peft, datasets, pyarrow; print('train ok', '$STACK')" \
    && { printf '#include <Python.h>\nint main(void) { return 0; }\n' \
         | gcc -x c -fsyntax-only -I "$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" - \
         || { echo "the base lacks gcc or the Python headers, which triton's JIT needs" >&2; exit 1; }; }

# Jobs run as the invoking user (`--user`); anyone else gets this non-root one.
RUN useradd --create-home --uid 1000 trainer
USER trainer
