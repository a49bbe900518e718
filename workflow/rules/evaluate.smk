"""Model evaluations: API baselines, the untrained base models (step 0) and every checkpoint.

One job per (model or checkpoint, ruleset) plays that ruleset's evaluation cells in one
`schemashift eval` process (the local model is loaded once and its episodes batched):
  results/eval/api/<model>/<ruleset>/      an enabled API baseline of config `models`
  results/eval/base/<model>/<ruleset>/     a training run's untrained base model, shared by its runs
  results/eval/<run>/step-<n>/<ruleset>/   checkpoint n of training run <run>
each through the default (JSON-action) harness; another harness marks the subject's folder,
as results/eval/api/<model>+tools/<ruleset>/ (schemashift.rollout.subject.harness_folder): API
models play the harnesses of `models.<model>.harnesses`, base models and checkpoints both.
Each job starts its output folder afresh (the eval verb's resume state there could hold cells of
another configuration or code) and keeps a response cache apart from it (results/cache/eval/...),
so a rerun or a killed job replays what it already generated or paid for instead of asking the
model again. A base model and a checkpoint play with the prompt and turn budgets of their
training runs (`--max-prompt-tokens`, `--max-new-tokens`), the ones the rollout trained with.
Which models are enabled, their endpoints, the subjects' policies and budgets come from
schemashift.workflow.Plan.
"""


# API jobs wait on the network, not the CPU, and compute nodes may have no route out.
localrules:
    evaluate_api,


rule evaluate_api:
    input:
        **image_input("runtime"),
    output:
        episodes=f"{RESULTS}/eval/api/{{model}}/{{ruleset}}/episodes.parquet",
        drifts=f"{RESULTS}/eval/api/{{model}}/{{ruleset}}/drifts.parquet",
        trajectories=f"{RESULTS}/eval/api/{{model}}/{{ruleset}}/trajectories.jsonl.gz",
    log:
        f"{RESULTS}/logs/eval/api/{{model}}/{{ruleset}}.log",
    wildcard_constraints:
        model="(?!step-[0-9]+/)[A-Za-z0-9][A-Za-z0-9._-]*(\\+[a-z]+)?",
    conda:
        "../../envs/runtime.yaml"
    container:
        image("runtime")
    resources:
        **image_resources("runtime"),
    params:
        code=CODE["eval"],
        policy=lambda w: PLAN.evaluation(f"api/{w.model}").policy,
        harness=lambda w: PLAN.evaluation(f"api/{w.model}").subject.harness,
        client=lambda w: PLAN.api_options(split_harness(w.model)[0]),
        keyless=lambda w: PLAN.api_keyless_prefix(split_harness(w.model)[0]),
        cells=lambda w: PLAN.cells_args(w.ruleset),
        cache=lambda w: f"{RESULTS}/cache/eval/api/{w.model}/{w.ruleset}.sqlite",
        out=lambda w, output: Path(output.episodes).parent,
    shell:
        "rm -rf {params.out}/progress {params.out}/eval.json && {params.keyless}"
        "python -m schemashift.cli eval --policy '{params.policy}' --harness {params.harness} "
        "{params.client} --ruleset {wildcards.ruleset} {params.cells} --cache {params.cache} --out {params.out} "
        "> {log} 2>&1"


# It runs in the model stack (envs/model.yaml, or the training image under apptainer).
# resources: gpu=1 lets `--resources gpu=N` bound the GPU jobs here; profiles/slurm turns it
# into --gpus=1 and adds the cluster's CPUs, memory and wall time.
rule evaluate:
    input:
        **image_input("model"),
        waits_on=lambda w: PLAN.evaluation(w.subject).waits_on,
    output:
        episodes=f"{RESULTS}/eval/{{subject}}/{{ruleset}}/episodes.parquet",
        drifts=f"{RESULTS}/eval/{{subject}}/{{ruleset}}/drifts.parquet",
        trajectories=f"{RESULTS}/eval/{{subject}}/{{ruleset}}/trajectories.jsonl.gz",
    log:
        f"{RESULTS}/logs/eval/{{subject}}/{{ruleset}}.log",
    wildcard_constraints:
        subject="(base/[A-Za-z0-9._-]+|(?!api/)[A-Za-z0-9][A-Za-z0-9._-]*/step-[0-9]+)(\\+[a-z]+)?",
    conda:
        conda_env("model")
    container:
        image("model")
    resources:
        **image_resources("model"),
        gpu=1,
    params:
        code=CODE["eval"],
        policy=lambda w: PLAN.evaluation(w.subject).policy,
        harness=lambda w: PLAN.evaluation(w.subject).subject.harness,
        budget=lambda w: PLAN.evaluation(w.subject).budget_args(),
        cells=lambda w: PLAN.cells_args(w.ruleset),
        cache=lambda w: f"{RESULTS}/cache/eval/{w.subject}/{w.ruleset}.sqlite",
        out=lambda w, output: Path(output.episodes).parent,
    shell:
        "rm -rf {params.out}/progress {params.out}/eval.json && "
        "python -m schemashift.cli eval --policy '{params.policy}' --harness {params.harness} "
        "{params.budget} --ruleset {wildcards.ruleset} {params.cells} --cache {params.cache} "
        "--out {params.out} > {log} 2>&1"
