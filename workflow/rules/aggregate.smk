"""Merge every cell into the aggregated tables and write the run's manifest."""


# Writing a small JSON file is not worth a cluster job.
localrules:
    expected_cells,


rule expected_cells:
    output:
        f"{RESULTS}/expected_cells.json",
    log:
        f"{RESULTS}/logs/expected_cells.log",
    params:
        code=code_digest("schemashift/rollout/io.py"),
        cells=lambda w: [
            {"ruleset": r, "policy": p, "scenario": s, "seed": seed, "sample_index": i}
            for r, p, s, seed in baseline_cells()
            for i in range(config["samples"])
        ],
    run:
        from schemashift.rollout.io import write_json

        write_json(output[0], params.cells)


rule aggregate:
    input:
        cells=lambda w: [
            f"{cell_dir(*cell)}/{name}"
            for cell in baseline_cells()
            for name in ("episodes.parquet", "drifts.parquet", "trajectories.jsonl.gz")
        ],
        expected=rules.expected_cells.output[0],
    output:
        episodes=f"{RESULTS}/episodes.parquet",
        drifts=f"{RESULTS}/drifts.parquet",
        manifest=f"{RESULTS}/manifest.json",
    log:
        f"{RESULTS}/logs/aggregate.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        APPTAINER_IMAGE
    params:
        code=CODE["aggregate"],
        config_hash=CONFIG_HASH,
        cells=lambda w, input: " ".join(
            sorted({str(Path(f).parent) for f in input.cells})
        ),
    shell:
        "python -m schemashift.cli aggregate --cells {params.cells} --out-episodes {output.episodes} "
        "--out-drifts {output.drifts} --manifest {output.manifest} --expected {input.expected} "
        "--config-hash {params.config_hash} > {log} 2>&1"
