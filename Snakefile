"""SchemaShift Bench: baselines -> aggregation -> tables, figures and report (see docs/workflow.md)."""

from snakemake.utils import min_version

min_version("9.0")


# What `snakemake --report` says about the workflow; each reported output has its own caption.
report: "workflow/report/workflow.rst"


# A --configfile given on the command line is the whole configuration (the schema's defaults fill
# in what it leaves out), so a test or study config never inherits the default's runs and models;
# without one, config.yaml is. --config KEY=VALUE overrides either.
if not workflow.config_settings.configfiles:

    configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/images.smk"
include: "workflow/rules/container.smk"
include: "workflow/rules/baselines.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        PLAN.default_targets(),
        PLAN.evaluation_targets(),
