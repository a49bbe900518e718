"""Tables, figures and the self-contained HTML report; each part reruns only when its code changes."""


rule tables:
    input:
        episodes=rules.aggregate.output.episodes,
        drifts=rules.aggregate.output.drifts,
        manifest=rules.aggregate.output.manifest,
    output:
        summary=report(f"{RESULTS}/tables/summary.md", category="Tables"),
        csv=[
            f"{RESULTS}/tables/{ruleset}_summary.csv" for ruleset in config["rulesets"]
        ],
    log:
        f"{RESULTS}/logs/tables.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        APPTAINER_IMAGE
    params:
        code=CODE["tables"],
        out=lambda w, output: Path(output.summary).parent,
        samples=config["report"]["bootstrap_samples"],
        seed=config["report"]["seed"],
    shell:
        "python -m schemashift.cli report tables --episodes {input.episodes} --drifts {input.drifts} --manifest {input.manifest} "
        "--bootstrap-samples {params.samples} "
        "--seed {params.seed} --out {params.out} > {log} 2>&1"


rule figures:
    input:
        episodes=rules.aggregate.output.episodes,
        manifest=rules.aggregate.output.manifest,
    output:
        png=[
            report(f"{RESULTS}/figures/{ruleset}_{metric}.png", category="Figures")
            for ruleset in config["rulesets"]
            for metric in ("score", "success")
        ],
        pdf=[
            f"{RESULTS}/figures/{ruleset}_{metric}.pdf"
            for ruleset in config["rulesets"]
            for metric in ("score", "success")
        ],
        captions=f"{RESULTS}/figures/figures.json",
    log:
        f"{RESULTS}/logs/figures.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        APPTAINER_IMAGE
    params:
        code=CODE["figures"],
        out=lambda w, output: Path(output.captions).parent,
        samples=config["report"]["bootstrap_samples"],
        seed=config["report"]["seed"],
    shell:
        "python -m schemashift.cli report figures --episodes {input.episodes} --manifest {input.manifest} "
        "--bootstrap-samples {params.samples} --seed {params.seed} "
        "--out {params.out} > {log} 2>&1"


rule report_html:
    input:
        episodes=rules.aggregate.output.episodes,
        manifest=rules.aggregate.output.manifest,
        tables=rules.tables.output.summary,
        figures=rules.figures.output.png,
        captions=rules.figures.output.captions,
    output:
        report(f"{RESULTS}/report.html", category="Report"),
    log:
        f"{RESULTS}/logs/report_html.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        APPTAINER_IMAGE
    params:
        code=CODE["html"],
        tables=lambda w, input: Path(input.tables).parent,
        figures=lambda w, input: Path(input.captions).parent,
        out=lambda w, output: Path(output[0]).parent,
    shell:
        "python -m schemashift.cli report html --episodes {input.episodes} --manifest {input.manifest} "
        "--tables {params.tables} --figures {params.figures} --out {params.out} > {log} 2>&1"
