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


def _version_file(tmp_path, text):
    path = tmp_path / "version"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, version",
    [
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
            "(dvs-builder@U22-I3-AF03-09-1)  Thu Oct 16 21:06:05 UTC 2025\nGCC version:  gcc 12.3.0\n",
            (580, 159, 4),
        ),
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n",
            (535, 104, 5),
        ),
        ("something else\n", None),
    ],
)
def test_the_driver_version_is_read_from_the_kernel_module(tmp_path, text, version):
    from schemashift.train.backends import driver_version

    assert driver_version(_version_file(tmp_path, text)) == version


def test_no_driver_file_is_no_driver(tmp_path):
    from schemashift.train.backends import driver_version

    assert driver_version(tmp_path / "absent") is None


@pytest.mark.parametrize(
    "cuda, driver, refused",
    [
        ("13.0", (575, 57, 8), True),
        ("13.0", (580, 65, 5), True),
        ("13.0", (580, 65, 6), False),
        ("13.0", (580, 159, 4), False),
        ("12.8", (520, 0), True),
        ("12.8", (570, 0), False),
        (None, (400, 0), False),
        ("13.0", None, False),
    ],
)
def test_a_driver_older_than_the_cuda_build_is_named(cuda, driver, refused):
    from schemashift.train.backends import driver_problem

    problem = driver_problem(cuda, driver)
    assert (problem is not None) == refused
    if refused:
        assert "580" in problem or "525" in problem
        assert ".".join(map(str, driver)) in problem


def test_a_gpu_stack_on_an_old_driver_says_so_before_loading(monkeypatch):
    from schemashift.train import backends

    monkeypatch.setattr(backends, "torch_cuda_build", lambda: "13.0")
    monkeypatch.setattr(backends, "driver_version", lambda: (570, 86, 10))
    for has_cuda in (True, False):
        with pytest.raises(BackendUnavailable, match="at least 580.65.6.*570.86.10"):
            select_backend("vllm", has_cuda=lambda has_cuda=has_cuda: has_cuda, is_installed=lambda m: True)
