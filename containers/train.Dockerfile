# The GPU training image: the package with one pinned GPU stack (STACK=vllm or unsloth, the
# pyproject extras of the same names, which envs/train-*.yaml mirror) on a CUDA base image.
#
#   podman build -f containers/train.Dockerfile --build-arg STACK=vllm -t schemashift-train:vllm .
#   podman save schemashift-train:vllm -o schemashift-train.tar      # apptainer: docker-archive://
#
# The workflow's train_image rule builds it (tagged localhost/schemashift-train:<stack>-<digest>)
# where containers.model_image is train; the train and evaluate rules run in it under podman or
# docker (with the GPUs), or with `--sdm apptainer --apptainer-args "--nv"` (see docs/training.md).
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04
FROM ${CUDA_IMAGE}

ARG STACK=vllm
# The tag the image is built under: jobs stamp it on their records (the `image` column).
ARG IMAGE_TAG
ENV SCHEMASHIFT_IMAGE=${IMAGE_TAG}
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential git \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

WORKDIR /opt/schemashift
COPY pyproject.toml README.md ./
COPY schemashift ./schemashift

# torch first, then the stack's pinned extra under a constraint that holds torch at its pin: an
# extra whose own requirements want another torch (Unsloth's do) fails the build instead of
# silently replacing it; the check after the install confirms the torch that is there.
RUN case "$STACK" in unsloth|vllm) ;; *) echo "STACK must be unsloth or vllm, got '$STACK'" >&2; exit 1 ;; esac \
    && pip install --upgrade pip \
    && echo "torch==2.13.0" > /opt/torch-constraint.txt \
    && pip install "torch==2.13.0" \
    && pip install -c /opt/torch-constraint.txt ".[${STACK}]" \
    && python -c "import torch; assert torch.__version__.split('+')[0] == '2.13.0', torch.__version__" \
    && python -c "import schemashift, trl, peft, transformers; print('stack ok')"

# CUDA's Ubuntu bases already have a user with uid 1000 (ubuntu): it gives way to ours.
RUN if getent passwd 1000 > /dev/null; then userdel "$(getent passwd 1000 | cut -d: -f1)"; fi \
    && useradd --create-home --uid 1000 trainer
USER trainer
ENV HF_HOME=/home/trainer/.cache/huggingface
ENTRYPOINT ["schemashift"]
CMD ["train", "--help"]
