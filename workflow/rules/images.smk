"""The project's images, built by the DAG, and the image and stack every job that runs project code runs in.

Each rule that runs project code says where its jobs run with the helpers below, called in the
rule's own definition, each with the rule's role, `"runtime"` (the CPU jobs) or `"model"` (the
rules that load models: the model stack of schemashift/runs/stacks.py, chosen (schemashift/workflow/stacks.py) by
`containers.model_image` and `containers.train_stack`):

    input:
        ...,
        **image_input("model"),
    conda:
        conda_env("model")
    container:
        image("model")
    resources:
        ...,
        **image_resources("model"),

Then:
- under podman or docker (`containers.engine`, schemashift/workflow/containers.py), the rule's
  jobs get the image's job shell as the `shell_exec` resource (Snakemake's documented per-rule
  shell, workflow/scripts/job_shell.py) and the image's job shell file as an input named `image`
  (ancient: rebuilding the same image reruns nothing), so the image is built before its first job;
  elsewhere both helpers give nothing;
- under `--sdm apptainer` (clusters), Snakemake runs the `container:` image itself: the SIF file
  of `containers.apptainer_image` or `containers.train_image`, given what the job shell gives a
  podman job (apptainer passes the host's environment in): the checkout bound at its own path
  (APPTAINER_BIND; apptainer binds the working directory itself) for PYTHONPATH (common.smk),
  and the checkout's commit for the records (the image has no git);
- under `--sdm conda`, the `conda:` env: envs/runtime.yaml, or the model stack's env file;
- otherwise the jobs run on the host.
Image-building rules and `run:` rules stay on the host. Rules refer to their inputs by name.
"""

import os

from snakemake.settings.types import DeploymentMethod

from schemashift.provenance import GIT_SHA_ENV, git_sha
from schemashift.workflow.containers import DEBOOTSTRAP
from schemashift.workflow.stacks import gpu_stack

CONTAINERS = config["containers"]
IMAGES = f"{RESULTS}/containers"
UNDER_APPTAINER = (
    DeploymentMethod.APPTAINER in workflow.deployment_settings.deployment_method
)
if UNDER_APPTAINER:
    # Set here, inherited by every apptainer process (a cluster job parses this file again: the
    # values it inherits from the submission are kept, never added twice).
    BINDS = [spec for spec in os.environ.get("APPTAINER_BIND", "").split(",") if spec]
    if Path.cwd() != REPO and str(REPO) not in BINDS:
        os.environ.update(APPTAINER_BIND=",".join([*BINDS, str(REPO)]))
    # once per submission: a cluster job's parse finds it set and runs no git
    COMMIT = git_sha()
    if COMMIT:
        os.environ[GIT_SHA_ENV] = COMMIT
# The engine the jobs run under and the images are built with (None: the host, or apptainer).
JOB_ENGINE = None if UNDER_APPTAINER else PLAN.job_engine[0]
# The base each image is built on: the debootstrap base's record, or an image name.
BASE = (
    f"{IMAGES}/base.image.json"
    if CONTAINERS["base_image"] == DEBOOTSTRAP
    else CONTAINERS["base_image"]
)
# Run from the checkout (it finds containers/ and the job shell beside itself), not from a copy.
BUILD_IMAGE = f"{REPO}/workflow/scripts/build_image.py"
APPTAINER_FILES = {
    "runtime": CONTAINERS["apptainer_image"],
    "train": CONTAINERS["train_image"],
}
# The stack the GPU image holds (stacks.py; MODEL_STACK, common.smk: the model rules' stack).
GPU_STACK = gpu_stack(CONTAINERS)
ROLES = ("runtime", "model")


class DeclaredImage(str):
    """A rule's `container:` value: the SIF file Snakemake uses under --sdm apptainer, which
    also names the project image the rule's jobs run in under podman or docker."""

    def __new__(cls, name: str):
        declared = super().__new__(cls, APPTAINER_FILES[name] or f"schemashift-{name}")
        declared.image = name
        return declared


def _image_name(role: str) -> str:
    if role not in ROLES:
        raise ValueError(
            f"{role!r}: a rule's jobs run in the runtime or the model image"
        )
    return MODEL_STACK.image if role == "model" else "runtime"


def image(role: str):
    """The `container:` value of a rule whose jobs run in the `runtime` or the `model` image."""
    name = _image_name(role)
    # Without a SIF file apptainer has nothing to run: the rule runs as it would on the host.
    if UNDER_APPTAINER and not APPTAINER_FILES[name]:
        return None
    return DeclaredImage(name)


def job_shell(name: str) -> str:
    return f"{IMAGES}/{name}.job-shell"


def image_input(role: str) -> dict:
    """The `input:` entry for the jobs of a rule that run in an image under the job engine. It is
    the image's job shell, `ancient` (made with the image's record: rebuilding the same image
    reruns nothing).
    """
    if JOB_ENGINE is None:
        return {}
    return {"image": ancient(job_shell(_image_name(role)))}


def image_resources(role: str) -> dict:
    """The `resources:` entry of such a rule: Snakemake runs its shell command through the image's
    job shell (the `shell_exec` resource, Snakemake's per-rule shell executable)."""
    if JOB_ENGINE is None:
        return {}
    return {"shell_exec": os.path.abspath(job_shell(_image_name(role)))}


def conda_env(role: str) -> str:
    """The `conda:` env file (absolute) of a rule's role: the model stack's, or the runtime's."""
    return str(
        REPO / (MODEL_STACK.conda_env if role == "model" else "envs/runtime.yaml")
    )
