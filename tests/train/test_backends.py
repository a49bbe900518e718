"""Training backend choice: GPU stacks fail fast without CUDA, auto falls back."""

from __future__ import annotations

import pytest

from schemashift.train.backends import BackendUnavailable, cuda_available, select_backend


@pytest.mark.skipif(cuda_available(), reason="checks the behaviour on a machine without CUDA")
@pytest.mark.parametrize("backend", ["unsloth", "vllm"])
def test_gpu_backends_fail_at_once_without_cuda(backend):
    with pytest.raises(BackendUnavailable, match="needs a CUDA GPU"):
        select_backend(backend)


@pytest.mark.skipif(cuda_available(), reason="checks the behaviour on a machine without CUDA")
def test_auto_falls_back_to_transformers_without_cuda():
    assert select_backend("auto") == "transformers"
    assert select_backend("transformers") == "transformers"


def test_auto_prefers_the_fastest_installed_gpu_stack():
    def only(*modules):
        return lambda module: module in modules

    assert select_backend("auto", has_cuda=lambda: True, is_installed=only("vllm", "unsloth")) == "unsloth"
    assert select_backend("auto", has_cuda=lambda: True, is_installed=only("vllm")) == "vllm"
    assert select_backend("auto", has_cuda=lambda: True, is_installed=only()) == "transformers"


def test_a_missing_gpu_stack_names_its_environment_file():
    with pytest.raises(BackendUnavailable, match="envs/train-vllm.yaml"):
        select_backend("vllm", has_cuda=lambda: True, is_installed=lambda module: False)


def test_unknown_backend():
    with pytest.raises(BackendUnavailable, match="unknown training backend"):
        select_backend("tpu")
