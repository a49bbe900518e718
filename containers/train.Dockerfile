# The GPU training image: the package with one pinned GPU stack (STACK=vllm or unsloth, the
# pyproject extras of the same names, which envs/train-*.yaml mirror) on a CUDA base image.
#
#   podman build -f containers/train.Dockerfile --build-arg STACK=vllm -t schemashift-train:vllm .
#   podman save schemashift-train:vllm -o schemashift-train.tar      # apptainer: docker-archive://
#
# The train rule runs in it with `--sdm apptainer --apptainer-args "--nv"` (see docs/training.md).
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04
FROM ${CUDA_IMAGE}

ARG STACK=vllm
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

# torch first, so that no extra pulls a different build; then the stack's pinned extra.
RUN case "$STACK" in unsloth|vllm) ;; *) echo "STACK must be unsloth or vllm, got '$STACK'" >&2; exit 1 ;; esac \
    && pip install --upgrade pip \
    && pip install "torch==2.13.0" \
    && pip install ".[${STACK}]" \
    && python -c "import schemashift, trl, peft, transformers; print('stack ok')"

RUN useradd --create-home --uid 1000 trainer
USER trainer
ENV HF_HOME=/home/trainer/.cache/huggingface
ENTRYPOINT ["schemashift"]
CMD ["train", "--help"]
