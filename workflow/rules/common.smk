"""Config validation, the plan (schemashift.workflow) and each rule's code digest."""

import os
import sys
from pathlib import Path

from snakemake.utils import validate

REPO = Path(workflow.basedir)
sys.path.insert(0, str(REPO))
from schemashift.workflow import schema, stacks  # noqa: E402

# an old spelling is named as such, not only refused by the schema
stacks.check_renamed(config)
# an unknown key is named, with where it is, in one line (not followed by the whole schema)
schema.check_unknown_keys(config, REPO / "workflow" / "schemas" / "config.schema.yaml")
validate(config, schema="../schemas/config.schema.yaml")

# Jobs run the code of this checkout, whatever copy of the package is installed elsewhere: they
# inherit this PYTHONPATH (a cluster job re-reads this file and sets it again).
if os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] != str(REPO):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    )


envvars:
    "PYTHONPATH",


from schemashift.provenance import config_hash  # noqa: E402
from schemashift.workflow import Plan, split_harness  # noqa: E402
from schemashift.workflow import digests  # noqa: E402

PLAN = Plan(config)
RESULTS = PLAN.results
# The stack of the rules that load models (training, evaluation, the tiny model): their conda env
# and image (images.smk); a run whose backend names another GPU stack is refused here.
MODEL_STACK = stacks.model_stack(config["containers"])
if PLAN.train_enabled():
    stacks.check_backends(
        MODEL_STACK,
        {run: PLAN.train_run(run).settings["backend"] for run in PLAN.train_runs()},
    )
# Stamped on the aggregated tables and the manifest. Cells stamp a digest of their own
# arguments instead, so that adding a seed does not rerun the cells that exist.
CONFIG_HASH = config_hash(config)
# Each rule's code: the package modules its job imports (schemashift/workflow/digests.py).
GRAPH = digests.import_graph(REPO, REPO / ".snakemake" / "schemashift-imports.json")
CODE = {
    **digests.code_digests(GRAPH),
    # the in-process `run:` blocks of the small JSON rules
    "io": GRAPH.digest(GRAPH.closure(("schemashift.rollout.io",))),
    # the server image holds the whole package; its tag follows everything it copies or installs
    "server": digests.tree_digest(
        REPO, "schemashift", "pyproject.toml", "containers/env.Dockerfile"
    ),
}
# Remote executors hand these to the jobs; their values never appear in a command or a log.
workflow.register_envvars(*PLAN.api_key_variables())


# Captions of `snakemake --report` (workflow/report/, relative to the rule files; the workflow's description is
# workflow/report/workflow.rst, named in the Snakefile): what each output shows, how it was
# computed and how to read it.
CAPTIONS = "../report"


def figure_caption(stem: str) -> str:
    """A figure's caption: one per figure, the per-ruleset overviews one per metric."""
    from schemashift.report.figures import METRICS

    for ruleset in config["rulesets"]:
        metric = stem.removeprefix(f"{ruleset}_")
        if metric != stem and metric in METRICS:
            return f"{CAPTIONS}/figures/{metric}.rst"
    return f"{CAPTIONS}/figures/{stem}.rst"
