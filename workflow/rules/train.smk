"""GRPO training: one job per run of `train.runs`, on a GPU where one is configured.

The job writes results/train/<run>/checkpoint-<step>/ (adapter + manifest.json) for every saved
step and results/train/<run>/metrics.parquet, then train.done.json. Only the completion record
and the metrics are declared outputs: Snakemake deletes the outputs of an interrupted job before
it reruns it, and the checkpoints must survive so that the rerun resumes from the last one.
"""


localrules:
    train_config,


# The run's own slice of the config, so that a change to another run retrains nothing.
rule train_config:
    output:
        f"{RESULTS}/train/{{run}}/run-config.json",
    log:
        f"{RESULTS}/logs/train/{{run}}.config.log",
    params:
        run=lambda w: PLAN.run_config(w.run),
    run:
        from schemashift.rollout.io import write_json

        write_json(output[0], params.run)


rule train:
    input:
        **image_input("model"),
        config=f"{RESULTS}/train/{{run}}/run-config.json",
        base_model=lambda w: PLAN.run_inputs(w.run),
    output:
        done=f"{RESULTS}/train/{{run}}/train.done.json",
        metrics=f"{RESULTS}/train/{{run}}/metrics.parquet",
    log:
        f"{RESULTS}/logs/train/{{run}}.log",
    conda:
        conda_env("model")
    container:
        image("model")
    # One thread (OMP_NUM_THREADS=1, as torchrun gives each process): a GPU job's work is on the
    # GPU, and at CPU scale single-threaded runs pack beside each other and the evaluations; with
    # more threads than a 2-core machine has, each run held every core while it trained.
    threads: 1
    resources:
        **image_resources("model"),
        gpu=1,
    params:
        code=CODE["train"],
        out=lambda w: f"{RESULTS}/train/{w.run}",
    shell:
        # a run with report_to: trackio logs live into results/train/trackio (docs/training.md)
        f"TRACKIO_DIR={RESULTS}/train/trackio "
        "python -m schemashift.cli train --config {input.config} --run {wildcards.run} "
        "--out {params.out} --resume > {log} 2>&1"
