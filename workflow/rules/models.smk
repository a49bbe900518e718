"""Models the workflow builds itself (`models.<name>.build` in the config).

`tiny`: the offline tiny chat model, warm-started on oracle trajectories of the training split
(schemashift.train.tiny), the base model of the embedded default's CPU-scale runs. It needs no
network and no GPU; the folder appears complete or not at all.
"""


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
