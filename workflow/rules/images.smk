"""The project's images, built by the DAG, and the image every job that runs project code runs in.

Each rule names its image in one line, `container` set to `image("runtime")` (the CPU jobs) or
`image("model")` (the rules that load models: the runtime image, or the GPU training
image where `containers.model_image` is train). Then:
- under podman or docker (`containers.engine`, schemashift/workflow/containers.py),
  `run_jobs_in_images()` (the Snakefile's last line) gives each such rule the image's job shell
  as Snakemake's `shell_exec` resource (workflow/scripts/job_shell.py) and the image's record as
  an input named `image` (ancient: rebuilding the same image reruns nothing), so the image is
  built before its first job;
- under `--sdm apptainer` (clusters), Snakemake runs the `container:` image itself: the SIF file
  of `containers.apptainer_image` or `containers.train_image`, given what the job shell gives a
  podman job (apptainer passes the host's environment in): the checkout bound at its own path
  (APPTAINER_BIND; apptainer binds the working directory itself) for PYTHONPATH (common.smk),
  and the checkout's commit for the records (the image has no git);
- otherwise the jobs run on the host.
Image-building rules and `run:` rules stay on the host. Rules refer to their inputs by name.
"""

import os

from snakemake.settings.types import DeploymentMethod

from schemashift.provenance import GIT_SHA_ENV, git_sha
from schemashift.workflow.containers import DEBOOTSTRAP

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


class DeclaredImage(str):
    """A rule's `container:` value: the SIF file Snakemake uses under --sdm apptainer, which
    also names the project image the rule's jobs run in under podman or docker."""

    def __new__(cls, name: str):
        declared = super().__new__(cls, APPTAINER_FILES[name] or f"schemashift-{name}")
        declared.image = name
        return declared


def image(role: str):
    """The `container:` value of a rule whose jobs run in the `runtime` or the `model` image."""
    if role not in ("runtime", "model"):
        raise ValueError(f"image({role!r}): a rule's image is runtime or model")
    name = CONTAINERS["model_image"] if role == "model" else role
    # Without a SIF file apptainer has nothing to run: the rule runs as it would on the host.
    if UNDER_APPTAINER and not APPTAINER_FILES[name]:
        return None
    return DeclaredImage(name)


def job_shell(name: str) -> str:
    return f"{IMAGES}/{name}.job-shell"


def run_jobs_in_images() -> None:
    """Every rule that declares an image runs its jobs in it under the job engine (see above)."""
    if JOB_ENGINE is None:
        return
    for declared in workflow.rules:
        name = getattr(declared.container_img, "image", None)
        if name is None:
            continue
        # Snakemake applies a rule's path modifier while it adds inputs; one without inputs has none.
        if declared.input_modifier is None:
            declared.input_modifier = workflow.modifier.path_modifier
        declared.set_input(image=ancient(job_shell(name)))
        if "shell_exec" not in declared.resources:
            declared.resources["shell_exec"] = os.path.abspath(job_shell(name))
