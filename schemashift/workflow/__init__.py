"""The Snakemake workflow's logic, as a tested module: the rule files call `Plan` for cells,
targets, model evaluations and expected cells, and `digests` for each rule's code digest.

Light to import (no pandas, pyarrow or torch): every parse of the Snakefile pays for it.
"""

from schemashift.rollout.subject import harness_folder, split_harness
from schemashift.workflow.machine import gpu_visible
from schemashift.workflow.plan import (
    CELL_FILES,
    ConfigError,
    Evaluation,
    Plan,
    model_slug,
)

__all__ = [
    "CELL_FILES",
    "ConfigError",
    "Evaluation",
    "Plan",
    "gpu_visible",
    "harness_folder",
    "model_slug",
    "split_harness",
]
