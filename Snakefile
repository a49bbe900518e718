"""SchemaShift Bench: baselines -> aggregation -> tables, figures and report (see docs/workflow.md)."""

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/container.smk"
include: "workflow/rules/baselines.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        default_targets(),
        evaluation_targets(),
