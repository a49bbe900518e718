"""Tables, figures and the self-contained HTML report; each part reruns only when its code changes."""

from schemashift.report.figures import stems

# Every figure `schemashift report figures` writes (the same set whatever the data).
FIGURES = stems(config["rulesets"])
# The inputs every report part reads.
REPORT_INPUTS = dict(
    episodes=rules.aggregate.output.episodes,
    drifts=rules.aggregate.output.drifts,
    manifest=rules.aggregate.output.manifest,
    training=rules.aggregate.output.training,
    examples=rules.aggregate.output.examples,
    config=rules.report_config.output[0],
)
REPORT_ARGS = (
    "--episodes {input.episodes} --drifts {input.drifts} --manifest {input.manifest} "
    "--training-metrics {input.training} --examples {input.examples} --config {input.config} "
    "--bootstrap-samples {params.samples} --seed {params.seed}"
)


rule tables:
    input:
        **REPORT_INPUTS,
        **image_input("runtime"),
    output:
        summary=report(
            f"{RESULTS}/summary.md",
            caption=f"{CAPTIONS}/summary.rst",
            category="Tables",
        ),
        index=f"{RESULTS}/tables/tables.json",
        csv=[
            f"{RESULTS}/tables/{ruleset}_{metric}.csv"
            for ruleset in config["rulesets"]
            for metric in ("score", "success")
        ],
    log:
        f"{RESULTS}/logs/tables.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        image("runtime")
    resources:
        **image_resources("runtime"),
    params:
        code=CODE["tables"],
        out=lambda w, output: Path(output.index).parent,
        samples=config["report"]["bootstrap_samples"],
        seed=config["report"]["seed"],
    shell:
        f"python -m schemashift.cli report tables {REPORT_ARGS} "
        "--summary {output.summary} --out {params.out} > {log} 2>&1"


rule figures:
    input:
        **REPORT_INPUTS,
        **image_input("runtime"),
    output:
        png=[
            report(
                f"{RESULTS}/figures/{stem}.png",
                caption=figure_caption(stem),
                category="Figures",
                labels={"figure": stem},
            )
            for stem in FIGURES
        ],
        pdf=[f"{RESULTS}/figures/{stem}.pdf" for stem in FIGURES],
        captions=f"{RESULTS}/figures/figures.json",
    log:
        f"{RESULTS}/logs/figures.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        image("runtime")
    resources:
        **image_resources("runtime"),
    params:
        code=CODE["figures"],
        out=lambda w, output: Path(output.captions).parent,
        samples=config["report"]["bootstrap_samples"],
        seed=config["report"]["seed"],
    shell:
        f"python -m schemashift.cli report figures {REPORT_ARGS} --out {{params.out}} > {{log}} 2>&1"


rule report_html:
    input:
        **REPORT_INPUTS,
        **image_input("runtime"),
        tables=rules.tables.output.index,
        figures=rules.figures.output.png,
        captions=rules.figures.output.captions,
    output:
        report(
            f"{RESULTS}/report.html",
            caption=f"{CAPTIONS}/report_html.rst",
            category="Report",
        ),
    log:
        f"{RESULTS}/logs/report_html.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        image("runtime")
    resources:
        **image_resources("runtime"),
    params:
        code=CODE["html"],
        tables=lambda w, input: Path(input.tables).parent,
        figures=lambda w, input: Path(input.captions).parent,
        out=lambda w, output: Path(output[0]).parent,
        samples=config["report"]["bootstrap_samples"],
        seed=config["report"]["seed"],
    shell:
        f"python -m schemashift.cli report html {REPORT_ARGS} "
        "--tables {params.tables} --figures {params.figures} --out {params.out} > {log} 2>&1"


# The Trackio dashboard project of the benchmark (one run per training run), from results/, never
# from live training: `TRACKIO_DIR=results/trackio trackio show` serves it (docs/report.md).
rule trackio:
    input:
        **REPORT_INPUTS,
        **image_input("runtime"),
        figures=rules.figures.output.png,
        captions=rules.figures.output.captions,
    output:
        PLAN.trackio_db(),
    log:
        f"{RESULTS}/logs/trackio.log",
    conda:
        "../../envs/runtime.yaml"
    container:
        image("runtime")
    resources:
        **image_resources("runtime"),
    params:
        code=CODE["trackio"],
        figures=lambda w, input: Path(input.captions).parent,
        out=lambda w, output: Path(output[0]).parent,
        samples=config["report"]["bootstrap_samples"],
        seed=config["report"]["seed"],
        # the aggregated result folders: their trajectories, written with the episodes the
        # aggregate read, become the dashboard's traces
        cells=lambda w: " ".join(
            sorted(
                {
                    str(Path(f).parent)
                    for f in [*PLAN.baseline_files(), *PLAN.evaluation_inputs()]
                }
            )
        ),
    shell:
        f"python -m schemashift.cli report trackio {REPORT_ARGS} "
        "--figures {params.figures} --cells {params.cells} --out {params.out} > {log} 2>&1"


# What a reader sees, in headless Chromium (a host tool: no container image has it): report.html from
# file:// and the dashboard served on 127.0.0.1. A default target only where a browser is on PATH.
localrules:
    screenshots,


# On the host: it drives the host's browser (the rule is a target only where one is on PATH),
# which the runtime image does not hold.
rule screenshots:
    input:
        report=rules.report_html.output[0],
        trackio=rules.trackio.output[0],
    output:
        report=f"{RESULTS}/screenshots/report.png",
        trackio=f"{RESULTS}/screenshots/trackio.png",
        trace=f"{RESULTS}/screenshots/trace.png",
    log:
        f"{RESULTS}/logs/screenshots.log",
    conda:
        "../../envs/runtime.yaml"
    params:
        code=CODE["screenshots"],
        trackio=lambda w, input: Path(input.trackio).parent,
        out=lambda w, output: Path(output.report).parent,
    shell:
        "python -m schemashift.cli screenshots --report {input.report} --trackio {params.trackio} "
        "--trace --out {params.out} > {log} 2>&1"
