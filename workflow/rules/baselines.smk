"""Baseline shards: one job plays one policy on one scenario over a block of `shard_seeds` seed
values (results/cells/<ruleset>/<policy>/<scenario>/seeds-<first>-<last>/, holding the rows of
every evaluation cell in the block, in every arm its ruleset plays of config `arms`).
Schemashift.workflow.Plan says which shards there are.
"""


wildcard_constraints:
    ruleset="[a-z0-9_]+",
    policy="[A-Za-z0-9_]+",
    scenario="[A-Za-z0-9_]+",
    first="[0-9]+",
    last="[0-9]+",


rule baseline:
    input:
        **image_input("runtime"),
    output:
        episodes=f"{RESULTS}/cells/{{ruleset}}/{{policy}}/{{scenario}}/seeds-{{first}}-{{last}}/episodes.parquet",
        drifts=f"{RESULTS}/cells/{{ruleset}}/{{policy}}/{{scenario}}/seeds-{{first}}-{{last}}/drifts.parquet",
        trajectories=f"{RESULTS}/cells/{{ruleset}}/{{policy}}/{{scenario}}/seeds-{{first}}-{{last}}/trajectories.jsonl.gz",
    log:
        f"{RESULTS}/logs/cells/{{ruleset}}/{{policy}}/{{scenario}}/seeds-{{first}}-{{last}}.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        image("runtime")
    resources:
        **image_resources("runtime"),
    params:
        # the policy's own code: editing one policy reruns only its shards
        code=lambda w: CODE[f"cells/{w.policy}"],
        seeds=lambda w: PLAN.shard_seeds(w.ruleset, w.scenario, w.first, w.last),
        samples=config["samples"],
        # the arms, and the held-out salt the job must see (a change reruns the shard)
        play=lambda w: PLAN.play_args(w.ruleset),
        out=lambda w, output: Path(output.episodes).parent,
    shell:
        "python -m schemashift.cli run --ruleset {wildcards.ruleset} --policy {wildcards.policy} "
        "--scenarios {wildcards.scenario} --seeds {params.seeds} --samples {params.samples} "
        "{params.play} --out {params.out} > {log} 2>&1"
