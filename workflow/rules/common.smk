"""Shared helpers: config validation, the cells to run, per-layer code digests, engine detection."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from snakemake.logging import logger
from snakemake.utils import validate

validate(config, schema="../schemas/config.schema.yaml")

REPO = Path(workflow.basedir)
RESULTS = "results"
# The image rules run in under `--sdm apptainer`, if configured (see containers/README.md).
APPTAINER_IMAGE = config["containers"].get("apptainer_image")
# Jobs run the code of this checkout, whatever copy of the package is installed elsewhere: they
# inherit this PYTHONPATH (a cluster job re-reads this file and sets it again).
if os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] != str(REPO):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    )
sys.path.insert(0, str(REPO))


envvars:
    "PYTHONPATH",


from schemashift.cli.options import parse_scenarios, parse_seeds  # noqa: E402
from schemashift.env.rulesets import available_rulesets, get_ruleset  # noqa: E402
from schemashift.policies import BUILTIN as BUILTIN_POLICIES  # noqa: E402
from schemashift.provenance import config_hash  # noqa: E402

# Stamped on the aggregated tables and the manifest. Cells stamp a digest of their own
# arguments instead, so that adding a seed does not rerun the cells that exist.
CONFIG_HASH = config_hash(config)


def _seed_list(seeds):
    return seeds if isinstance(seeds, list) else parse_seeds(str(seeds))


def evaluation_cells(ruleset):
    """(scenario, seed) pairs of a ruleset's evaluation set, in config order."""
    if ruleset not in available_rulesets():
        raise ValueError(
            f"config: unknown ruleset {ruleset!r}; available: {available_rulesets()}"
        )
    if ruleset not in config["evaluation"]:
        raise ValueError(f"config: ruleset {ruleset!r} has no entry under 'evaluation'")
    cells = config["evaluation"][ruleset]
    ruleset_spec = get_ruleset(ruleset)
    families = ruleset_spec.scenario_ids()
    composed = [info.id for info in ruleset_spec.compositions()]
    scenarios = cells["scenarios"]
    text = scenarios if isinstance(scenarios, str) else ",".join(scenarios)
    ids = parse_scenarios(text, families + composed)
    if scenarios == "all":
        ids = families + (composed if cells.get("compositions") else [])
    seeds = _seed_list(cells["seeds"])
    split = cells.get("split")
    if ruleset_spec.splits() and split is not None:
        outside = [seed for seed in seeds if ruleset_spec.split_of(seed) != split]
        if outside:
            raise ValueError(
                f"config: evaluation.{ruleset}.seeds {outside[:5]} are not in split {split!r} "
                f"({ruleset_spec.splits()[split]})"
            )
    return [(scenario, seed) for scenario in ids for seed in seeds]


def cell_dir(ruleset, policy, scenario, seed):
    return f"{RESULTS}/cells/{ruleset}/{policy}/{scenario}/seed-{seed}"


def ruleset_baselines(ruleset):
    """The baseline policies of a ruleset: its `evaluation` entry's own list, else `baselines`."""
    policies = (
        config["evaluation"].get(ruleset, {}).get("baselines", config["baselines"])
    )
    unknown = [policy for policy in policies if policy not in BUILTIN_POLICIES]
    if unknown:
        raise ValueError(
            f"config: unknown baseline policies {unknown}; available: {sorted(BUILTIN_POLICIES)}"
        )
    return policies


def baseline_cells():
    return [
        (ruleset, policy, scenario, seed)
        for ruleset in config["rulesets"]
        for policy in ruleset_baselines(ruleset)
        for scenario, seed in evaluation_cells(ruleset)
    ]


def code_digest(*paths):
    """Digest of the Python sources under `paths`: a rule's params carry the digest of the code
    it runs, so editing that code (and only that code) reruns it."""
    digest = hashlib.sha256()
    for path in paths:
        root = REPO / path
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for file in files:
            if file.exists():
                digest.update(str(file.relative_to(REPO)).encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


_CLI_CORE = (
    "schemashift/__init__.py",
    "schemashift/cli/__init__.py",
    "schemashift/cli/__main__.py",
    "schemashift/cli/options.py",
    "schemashift/cli/verbs/__init__.py",
    "schemashift/provenance.py",
)
_RECORDS = ("schemashift/rollout/records.py", "schemashift/rollout/io.py")
_REPORT = (
    "schemashift/report/__init__.py",
    "schemashift/report/load.py",
    "schemashift/report/stats.py",
    "schemashift/report/analysis.py",
    "schemashift/report/published.py",
    "schemashift/cli/verbs/report.py",
)
# What each rule's job runs (the modules it imports that shape its outputs).
CODE = {
    "cells": code_digest(
        *_CLI_CORE,
        *_RECORDS,
        "schemashift/env",
        "schemashift/policies",
        "schemashift/rollout",
        "schemashift/cli/verbs/run.py",
        "schemashift/cli/progress.py",
    ),
    "aggregate": code_digest(
        *_CLI_CORE,
        *_RECORDS,
        "schemashift/report/__init__.py",
        "schemashift/report/load.py",
        "schemashift/report/aggregate.py",
        "schemashift/cli/verbs/aggregate.py",
    ),
    # The server image holds the whole package; its tag follows everything it copies or installs.
    "server": code_digest("schemashift", "pyproject.toml", "containers/env.Dockerfile"),
    "tables": code_digest(*_CLI_CORE, *_REPORT, "schemashift/report/tables.py"),
    # the figures reuse the tables' ablation groups, drift and efficiency columns
    "figures": code_digest(
        *_CLI_CORE,
        *_REPORT,
        "schemashift/report/tables.py",
        "schemashift/report/figures.py",
    ),
    "html": code_digest(
        *_CLI_CORE,
        *_REPORT,
        "schemashift/report/tables.py",
        "schemashift/report/figures.py",
        "schemashift/report/html.py",
    ),
}


def figure_stems():
    """Every figure `schemashift report figures` writes (the same set whatever the data)."""
    from schemashift.report.figures import stems

    return stems(config["rulesets"])


def container_engine():
    """The engine that builds the image, or None (with one log line saying why)."""
    wanted = config["containers"]["engine"]
    if wanted == "none" or not workflow.is_main_process:
        # Jobs (a cluster job re-reads this file) never need the default targets.
        return None
    if not (REPO / "containers/env.Dockerfile").exists():
        logger.info(
            "env_image: not built (containers/env.Dockerfile does not exist yet)"
        )
        return None
    candidates = ["docker", "podman"] if wanted == "auto" else [wanted]
    base = config["containers"]["base_image"]
    for engine in candidates:
        if shutil.which(engine) is None:
            continue
        try:
            found = (
                subprocess.run(
                    [engine, "image", "inspect", base], capture_output=True, timeout=5
                ).returncode
                == 0
            )
        except (OSError, subprocess.SubprocessError):
            found = False
        if found:
            return engine
    if wanted == "auto":
        logger.info(
            f"env_image: not built (no working docker or podman with base image {base} here); "
            "build a base with `snakemake base_image` where podman is installed"
        )
        return None
    raise ValueError(
        f"config: containers.engine is {wanted!r} but it cannot use base image {base!r} here"
    )


def default_targets():
    targets = [
        f"{RESULTS}/episodes.parquet",
        f"{RESULTS}/drifts.parquet",
        f"{RESULTS}/manifest.json",
        f"{RESULTS}/summary.md",
        f"{RESULTS}/report.html",
    ]
    targets += [f"{RESULTS}/figures/{stem}.png" for stem in figure_stems()]
    # The cells are targets too, so that a deleted cell file is made again.
    targets += [
        f"{cell_dir(*cell)}/{name}"
        for cell in baseline_cells()
        for name in ("episodes.parquet", "drifts.parquet", "trajectories.jsonl.gz")
    ]
    if ENGINE is not None:
        targets.append(f"{RESULTS}/containers/env.image.json")
    return targets


ENGINE = container_engine()
