"""Merge every cell into the aggregated tables and write the run's manifest."""

import json


# Writing a small JSON file is not worth a cluster job.
localrules:
    expected_cells,
    report_config,


rule expected_cells:
    output:
        f"{RESULTS}/expected_cells.json",
    log:
        f"{RESULTS}/logs/expected_cells.log",
    params:
        code=CODE["io"],
        census=lambda w: PLAN.expected_cells_digest(),
    run:
        from schemashift.rollout.io import write_json

        write_json(output[0], PLAN.expected_cells())


# What the report needs to know about the models and training runs (ablations, sizes, price), and
# whether training runs on this machine (to say why a run's checkpoints were not evaluated).
rule report_config:
    output:
        f"{RESULTS}/report_config.json",
    log:
        f"{RESULTS}/logs/report_config.log",
    params:
        code=CODE["io"],
        # sorted JSON text: the order of keys in a config file must not rerun the report
        config=lambda w: json.dumps(PLAN.report_config(), sort_keys=True),
    run:
        from schemashift.rollout.io import write_json

        write_json(output[0], json.loads(params.config))


rule aggregate:
    input:
        **image_input("runtime"),
        cells=lambda w: PLAN.baseline_files(),
        # model evaluations and training runs, whichever exist (their rules live elsewhere)
        evaluations=lambda w: PLAN.evaluation_inputs(),
        training=lambda w: PLAN.training_inputs(),
        expected=rules.expected_cells.output[0],
    output:
        episodes=f"{RESULTS}/episodes.parquet",
        drifts=f"{RESULTS}/drifts.parquet",
        manifest=f"{RESULTS}/manifest.json",
        training=f"{RESULTS}/training_metrics.parquet",
        examples=f"{RESULTS}/examples.json",
    log:
        f"{RESULTS}/logs/aggregate.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        image("runtime")
    resources:
        **image_resources("runtime"),
    params:
        code=CODE["aggregate"],
        config_hash=CONFIG_HASH,
        cells=lambda w, input: " ".join(
            sorted({str(Path(f).parent) for f in [*input.cells, *input.evaluations]})
        ),
        train=lambda w, input: " ".join(
            sorted({str(Path(f).parent) for f in input.training})
        ),
    shell:
        "python -m schemashift.cli aggregate --cells {params.cells} --train {params.train} "
        "--out-episodes {output.episodes} --out-drifts {output.drifts} "
        "--out-training {output.training} --out-examples {output.examples} "
        "--manifest {output.manifest} --expected {input.expected} "
        "--config-hash {params.config_hash} > {log} 2>&1"
