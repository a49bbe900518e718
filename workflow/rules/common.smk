"""Config validation, the plan (schemashift.workflow) and each rule's code digest."""

import os
import sys
from pathlib import Path

from snakemake.utils import validate

validate(config, schema="../schemas/config.schema.yaml")

REPO = Path(workflow.basedir)
# Jobs run the code of this checkout, whatever copy of the package is installed elsewhere: they
# inherit this PYTHONPATH (a cluster job re-reads this file and sets it again).
if os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] != str(REPO):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    )
sys.path.insert(0, str(REPO))


envvars:
    "PYTHONPATH",


from schemashift.provenance import config_hash  # noqa: E402
from schemashift.workflow import Plan, split_harness  # noqa: E402
from schemashift.workflow import digests  # noqa: E402

PLAN = Plan(config)
RESULTS = PLAN.results
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
