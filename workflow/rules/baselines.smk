"""One job per cell: a baseline policy on one (ruleset, scenario, seed)."""


wildcard_constraints:
    ruleset="[a-z0-9_]+",
    policy="[A-Za-z0-9_]+",
    scenario="[A-Za-z0-9_]+",
    seed="[0-9]+",


rule baseline:
    output:
        episodes=f"{RESULTS}/cells/{{ruleset}}/{{policy}}/{{scenario}}/seed-{{seed}}/episodes.parquet",
        drifts=f"{RESULTS}/cells/{{ruleset}}/{{policy}}/{{scenario}}/seed-{{seed}}/drifts.parquet",
        trajectories=f"{RESULTS}/cells/{{ruleset}}/{{policy}}/{{scenario}}/seed-{{seed}}/trajectories.jsonl.gz",
    log:
        f"{RESULTS}/logs/cells/{{ruleset}}/{{policy}}/{{scenario}}/seed-{{seed}}.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        APPTAINER_IMAGE
    params:
        code=CODE["cells"],
        samples=config["samples"],
        out=lambda w: PLAN.cell_dir(w.ruleset, w.policy, w.scenario, w.seed),
    shell:
        "python -m schemashift.cli run --ruleset {wildcards.ruleset} --policy {wildcards.policy} "
        "--scenarios {wildcards.scenario} --seeds {wildcards.seed} --samples {params.samples} "
        "--out {params.out} > {log} 2>&1"
