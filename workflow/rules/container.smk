"""The environment's container image (containers/env.Dockerfile), built with docker or podman.

`env_image` joins the default targets only where `containers.engine` names docker or podman;
under `auto` it builds with the first of them on PATH when asked for (`snakemake env_image`). `base_image` builds a local Debian base with debootstrap
for podman machines that cannot pull from a registry.
"""


rule env_image:
    input:
        dockerfile="containers/env.Dockerfile",
    output:
        f"{RESULTS}/containers/env.image.json",
    log:
        f"{RESULTS}/logs/env_image.log",
    conda:
        "../../envs/runtime.yaml"
    params:
        engine=lambda w: PLAN.image_engine() or config["containers"]["engine"],
        base_image=config["containers"]["base_image"],
        code=CODE["server"],
        script=workflow.source_path("../scripts/build_image.py"),
        context=workflow.basedir,
    shell:
        "python {params.script} --engine {params.engine} "
        "--dockerfile {input.dockerfile} --base-image {params.base_image} --context {params.context} --wheelhouse "
        "--tag schemashift-env:{params.code} --out {output} > {log} 2>&1"


rule base_image:
    output:
        f"{RESULTS}/containers/base.image.json",
    log:
        f"{RESULTS}/logs/base_image.log",
    conda:
        "../../envs/runtime.yaml"
    params:
        tag="localhost/debian-python:bookworm",
        script=workflow.source_path("../scripts/build_image.py"),
    shell:
        "python {params.script} --engine podman --debootstrap "
        "--tag {params.tag} --out {output} > {log} 2>&1"
