"""The project's images, built by the DAG from a local base (workflow/rules/images.smk says which
image each rule runs in, and how). Every input is named from the checkout (REPO), so that a run
with another working directory (--directory) finds them."""


# Images are built into the machine's own image store: never on a cluster node.
localrules:
    base_image,
    runtime_image,
    train_image,
    env_image,


rule base_image:
    output:
        f"{IMAGES}/base.image.json",
    log:
        f"{RESULTS}/logs/containers/base_image.log",
    conda:
        "../../envs/runtime.yaml"
    params:
        engine=JOB_ENGINE or "podman",
        script=BUILD_IMAGE,
    shell:
        "python {params.script} --engine {params.engine} --debootstrap --out {output} > {log} 2>&1"


rule runtime_image:
    input:
        dockerfile=f"{REPO}/containers/runtime.Dockerfile",
        # the list of what each image installs, and the extras it lists
        wheelhouse=f"{REPO}/containers/wheelhouse.py",
        pyproject=f"{REPO}/pyproject.toml",
        base=[BASE] if BASE.endswith(".json") else [],
    output:
        record=f"{IMAGES}/runtime.image.json",
        shell=job_shell("runtime"),
    log:
        f"{RESULTS}/logs/containers/runtime_image.log",
    conda:
        "../../envs/runtime.yaml"
    params:
        engine=JOB_ENGINE or PLAN.image_engine(),
        # the debootstrap base's record (an input), or an image name
        base=lambda w, input: input.base[0] if input.base else BASE,
        script=BUILD_IMAGE,
    shell:
        "python {params.script} --engine {params.engine} --image runtime --dockerfile {input.dockerfile} "
        "--base-image {params.base} --out {output.record} --job-shell {output.shell} > {log} 2>&1"


# The GPU image (containers/train.Dockerfile): containers.train_stack's stack on the same base, from
# its wheelhouse (schemashift/runs/stacks.py); only where containers.model_image is gpu.
rule train_image:
    input:
        dockerfile=f"{REPO}/containers/train.Dockerfile",
        # the list of what each image installs, and the extras it lists
        wheelhouse=f"{REPO}/containers/wheelhouse.py",
        pyproject=f"{REPO}/pyproject.toml",
        base=[BASE] if BASE.endswith(".json") else [],
    output:
        record=f"{IMAGES}/train.image.json",
        shell=job_shell("train"),
    log:
        f"{RESULTS}/logs/containers/train_image.log",
    conda:
        "../../envs/runtime.yaml"
    params:
        engine=JOB_ENGINE or PLAN.image_engine(),
        # the debootstrap base's record (an input), or an image name
        base=lambda w, input: input.base[0] if input.base else BASE,
        image=GPU_STACK.wheelhouse,
        script=BUILD_IMAGE,
    shell:
        "python {params.script} --engine {params.engine} --image {params.image} --dockerfile {input.dockerfile} "
        "--base-image {params.base} --out {output.record} --job-shell {output.shell} > {log} 2>&1"


# The environment server's image (containers/env.Dockerfile, docs/server.md).
rule env_image:
    input:
        dockerfile=f"{REPO}/containers/env.Dockerfile",
        base=[BASE] if BASE.endswith(".json") else [],
    output:
        f"{IMAGES}/env.image.json",
    log:
        f"{RESULTS}/logs/containers/env_image.log",
    conda:
        "../../envs/runtime.yaml"
    params:
        engine=JOB_ENGINE or PLAN.image_engine(),
        # the debootstrap base's record (an input), or an image name
        base=lambda w, input: input.base[0] if input.base else BASE,
        code=CODE["server"],
        script=BUILD_IMAGE,
        context=lambda w, input: Path(input.dockerfile).parents[1],
    shell:
        "python {params.script} --engine {params.engine} "
        "--dockerfile {input.dockerfile} --base-image {params.base} --context {params.context} --wheelhouse "
        "--tag localhost/schemashift-env:{params.code} --out {output} > {log} 2>&1"
