"""The workflow's configuration: its JSON schema, the shipped configs, bad configs, conda envs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from workflow_support import REPO, TEST_CONFIG, snakemake, tool

jsonschema = pytest.importorskip("jsonschema")

SCHEMA_FILE = REPO / "workflow" / "schemas" / "config.schema.yaml"
CONFIGS = ["config.yaml", "config.gpu.yaml", TEST_CONFIG]


def load_yaml(path: Path):
    with open(path) as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def schema() -> dict:
    return load_yaml(SCHEMA_FILE)


def validator(schema: dict):
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def errors(schema: dict, config: dict) -> list[str]:
    return [error.message for error in validator(schema).iter_errors(config)]


def test_schema_is_a_valid_json_schema(schema):
    validator(schema)
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("name", CONFIGS)
def test_shipped_configs_validate(schema, name):
    assert errors(schema, load_yaml(REPO / name)) == []


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("run1", True),
        ("run1.v2", True),
        ("run1.rep", True),
        ("run1.rep2", False),
        ("base", False),
        ("api", False),
    ],
)
def test_run_names_leave_room_for_repeats_and_evaluation_folders(schema, name, valid):
    config = load_yaml(REPO / "config.yaml")
    config["train"]["runs"] = {name: config["train"]["runs"]["run1"]}
    assert (errors(schema, config) == []) is valid


def test_embedded_default_is_the_schema_defaults(schema):
    """config.yaml spells out every top-level key, each with the schema's documented default."""
    config = load_yaml(REPO / "config.yaml")
    assert set(config) == set(schema["properties"])
    for key, spec in schema["properties"].items():
        assert config[key] == spec["default"], key


@pytest.mark.parametrize(
    ("price", "valid"),
    [
        ({"input_per_mtok": 0.15, "output_per_mtok": 0.6}, True),
        ({"gpu_hour": 2.5}, True),
        ({"input_per_mtok": 0.15}, False),  # half a token price
        ({"input_per_mtok": 0.15, "output_per_mtok": 0.6, "gpu_hour": 2.5}, False),  # two bases
        ({"gpu_hour": -1}, False),
        ({"per_call": 0.01}, False),
    ],
)
def test_a_models_price_is_per_million_tokens_or_per_gpu_hour(schema, price, valid):
    config = load_yaml(REPO / "config.yaml")
    config["models"]["gpt-4o-mini"]["price"] = price
    assert (errors(schema, config) == []) is valid


def _bad(change):
    config = load_yaml(REPO / TEST_CONFIG)
    change(config)
    return config


def _set(path: str, value):
    def change(config):
        *parents, last = path.split(".")
        node = config
        for parent in parents:
            node = node[parent]
        node[last] = value

    return change


def _with_v1(cells):
    def change(config):
        config["rulesets"] = ["legacy", "v1"]
        config["evaluation"]["v1"] = cells

    return change


# (change to the test config, what `snakemake -n` must say, whether the schema alone catches it)
BAD_CONFIGS = {
    "unknown key": (
        _set("colour", "red"),
        r"config: unknown key 'colour' at the top level \(allowed: arms, baselines, containers, ",
        True,
    ),
    "unknown keys of a ruleset's cells": (
        _set("evaluation.legacy.sedes", "0-4"),
        r"config: unknown key 'sedes' in evaluation.legacy \(allowed: baseline_seeds, ",
        True,
    ),
    "bad seeds string": (
        _set("evaluation.legacy.seeds", "0-"),
        r"'0-' is not valid under any of the given schemas",
        True,
    ),
    "negative seed": (_set("evaluation.legacy.seeds", [-1]), r"seeds", True),
    "reversed seeds": (
        _set("evaluation.legacy.seeds", "4-2"),
        r"config: evaluation.legacy.seeds: range '4-2' is reversed",
        False,
    ),
    "bad baseline seeds": (
        _set("evaluation.legacy.baseline_seeds", "0-1,"),
        r"'0-1,' is not valid under any of the given schemas",
        True,
    ),
    "empty baseline seeds": (_set("evaluation.legacy.baseline_seeds", []), r"baseline_seeds", True),
    "baseline seeds without the models' seeds": (
        _set("evaluation.legacy.baseline_seeds", "1-3"),
        r"evaluation.legacy.baseline_seeds must hold the models' seeds; it lacks \[0\]",
        False,
    ),
    "unknown engine": (
        _set("containers.engine", "lxc"),
        r"'lxc' is not one of \['auto', 'docker', 'podman', 'none'\]",
        True,
    ),
    "the GPU image under its old name": (
        _set("containers.model_image", "train"),
        r"containers.model_image: train is now `gpu`",
        True,
    ),
    "a run's backend of another stack": (
        _set(
            "train",
            {
                "enabled": True,
                "defaults": {},
                "runs": {
                    "r": {
                        "base_model": "Qwen/Qwen2.5-0.5B-Instruct",
                        "ruleset": "legacy",
                        "reward": "legacy_cumulative",
                        "overrides": {"backend": "vllm"},
                    }
                },
            },
        ),
        r"train.runs.r: backend 'vllm' needs the vllm stack, but the model jobs run the cpu stack",
        False,
    ),
    "zero samples": (_set("samples", 0), r"0 is less than the minimum of 1", True),
    "unknown ruleset": (_set("rulesets", ["nope"]), r"unknown ruleset 'nope'", False),
    "unknown scenario": (
        _set("evaluation.legacy.scenarios", ["X9_nope"]),
        r"unknown scenario 'X9_nope'",
        False,
    ),
    "unknown baseline": (_set("baselines", ["oracle", "nope"]), r"nope", False),
    "unknown baseline of a ruleset": (
        _set("evaluation.legacy.baselines", ["oracle", "nope"]),
        r"unknown baseline policies \['nope'\]",
        False,
    ),
    "unknown split": (
        _set("evaluation.legacy", {"scenarios": "all", "seeds": "0", "split": "bogus"}),
        r"'bogus' is not one of \['train', 'test'\]",
        True,
    ),
    "v1 seeds outside the split": (
        _with_v1({"scenarios": "all", "seeds": "10000", "split": "test"}),
        r"are not in split 'test'",
        False,
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", [c for c, (_, _, by_schema) in BAD_CONFIGS.items() if by_schema])
def test_schema_rejects_bad_configs(schema, case):
    change, _, _ = BAD_CONFIGS[case]
    assert errors(schema, _bad(change))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_config_fails_the_dry_run_clearly(repo_copy, tmp_path, case):
    if tool("snakemake") is None:
        pytest.skip("snakemake is not installed")
    change, message, _ = BAD_CONFIGS[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_bad(change)))
    proc = snakemake(repo_copy, "--dry-run", configfile=path, check=False)
    assert proc.returncode != 0, f"snakemake -n accepted a config with {case}:\n{proc.stdout[-3000:]}"
    assert re.search(message, proc.stdout), proc.stdout[-3000:]
    assert "Traceback (most recent call last)" not in proc.stdout
    if case.startswith("unknown key"):  # named in one line, not followed by the whole schema
        assert "additionalProperties" not in proc.stdout and len(proc.stdout.splitlines()) < 40, proc.stdout


# --- conda environments -----------------------------------------------------------------------

_SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-\[\]]+)\s*(.*?)\s*$")
# Packages the jobs import; the rest of the `workflow` extra (snakemake, snakefmt, the SLURM
# plugin, jsonschema, pyyaml) runs the workflow, not its jobs.
RUNTIME_PACKAGES = {"pyarrow", "pandas", "seaborn", "matplotlib", "trackio", "altair", "vl-convert-python"}


def _normalise(spec: str) -> str:
    """conda `=1.2.3` and pip `==1.2.3` name the same pin; drop spaces."""
    spec = spec.replace(" ", "")
    return "==" + spec[1:] if re.fullmatch(r"=[^=].*", spec) else spec


def _split(requirement: str) -> tuple[str, str]:
    match = _SPEC.match(requirement)
    assert match, requirement
    name = re.sub(r"\[.*\]", "", match[1]).lower().replace("_", "-")
    return name, _normalise(match[2])


def conda_env_files() -> list[Path]:
    """envs/*.yaml plus every `conda:` file a rule names (relative to its .smk file)."""
    files = set((REPO / "envs").glob("*.yaml"))
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        for name in re.findall(r"^\s+conda:\s*\n\s+\"([^\"]+)\"", smk.read_text(), re.M):
            files.add((smk.parent / name).resolve())
    return sorted(files)


def conda_pins(path: Path) -> dict[str, str]:
    env = load_yaml(path)
    pins = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str):
            name, spec = _split(dep)
            pins[name] = spec
        else:
            for pip_dep in dep.get("pip", []):
                if not pip_dep.startswith("-"):
                    name, spec = _split(pip_dep)
                    pins[name] = spec
    return pins


def pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def project_pins(extra: str = "workflow") -> dict[str, str]:
    project = pyproject()
    return dict(_split(r) for r in [*project["dependencies"], *project["optional-dependencies"][extra]])


#: The extra whose pins an env follows (default: workflow).
ENV_EXTRAS = {"model.yaml": "train"}
# Envs of jobs that write Parquet but draw no plots: the training stacks and the model stack.
PARQUET_ONLY = ("train-", "model.yaml")


def test_rules_name_existing_conda_envs():
    files = conda_env_files()
    assert REPO / "envs" / "runtime.yaml" in files
    for path in files:
        assert path.is_file(), f"a rule names the conda env {path}, which does not exist"


@pytest.mark.parametrize("path", conda_env_files(), ids=lambda p: p.name)
def test_conda_env_parses_and_agrees_with_pyproject(path):
    env = load_yaml(path)
    assert env["channels"] and env["dependencies"]
    pins = conda_pins(path)
    extra = project_pins(ENV_EXTRAS.get(path.name, "workflow"))
    disagree = {
        name: (spec, extra[name]) for name, spec in pins.items() if name in extra and spec != extra[name]
    }
    assert not disagree, f"{path.name} pins differ from pyproject.toml (conda, pyproject): {disagree}"
    needed = {"pyarrow"} if path.name.startswith(PARQUET_ONLY) else RUNTIME_PACKAGES
    missing = needed - set(pins)
    assert not missing, f"{path.name} lacks {sorted(missing)}, which the jobs import"
    # python: the version the package requires
    python = pins.get("python", "")
    minimum = re.fullmatch(r">=(\d+)\.(\d+)", pyproject()["requires-python"])
    version = re.search(r"(\d+)\.(\d+)", python)
    assert minimum and version, (python, pyproject()["requires-python"])
    assert tuple(map(int, version.groups())) >= tuple(map(int, minimum.groups()))
    # the package itself, from this checkout
    editable = [
        item
        for dep in env["dependencies"]
        if isinstance(dep, dict)
        for item in dep.get("pip", [])
        if item.startswith("-e")
    ]
    assert editable, f"{path.name} does not install the package"
    for item in editable:
        assert (path.parent / item.removeprefix("-e").strip() / "pyproject.toml").is_file(), item


def test_workflow_extra_pins_the_workflow_tools():
    pins = project_pins()
    for name in ("snakemake", "snakefmt"):
        assert pins.get(name, "").startswith("=="), f"the workflow extra should pin {name} exactly"
    for name in RUNTIME_PACKAGES - {"pyarrow"}:
        assert name in pins, f"the workflow extra lacks {name}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("job", ["eval", "train", "tiny_model"])
def test_the_cpu_stack_env_provides_what_the_model_jobs_import(job):
    """Every non-stdlib module a model job (`schemashift eval` with an hf: policy, `train`,
    `tiny-model`) can import comes from a distribution the cpu stack's env lists (the conda env of
    the evaluate, train and tiny_model rules where containers.model_image is runtime), at the
    version installed here where it pins one, and imports here; the GPU stacks' own modules
    (unsloth, vllm) excepted."""
    import importlib
    import importlib.metadata
    import sys

    from schemashift.runs.stacks import STACKS
    from schemashift.workflow.digests import ImportGraph, closure, jobs

    path = REPO / STACKS["cpu"].conda_env
    pins = conda_pins(path)
    graph = ImportGraph(REPO)
    gpu_only = {name for name, stack in STACKS.items() if stack.gpu}
    imported = graph.third_party(closure(graph, jobs()[job])) - set(sys.stdlib_module_names) - gpu_only
    assert {"torch", "transformers", "peft"} <= imported
    providers = importlib.metadata.packages_distributions()
    for module in sorted(imported):
        distributions = {name.lower().replace("_", "-") for name in providers.get(module, [])}
        assert distributions, f"{module} is not installed here (pip install -e '.[all]')"
        assert distributions & set(pins), f"{path.name} lists none of {sorted(distributions)}, for {module}"
        importlib.import_module(module)
    for name, spec in pins.items():
        if spec.startswith("==") and name != "python":
            # a local label (torch's +cpu) names the build, not the release
            installed = importlib.metadata.version(name).partition("+")[0]
            assert installed == spec[2:], f"{path.name} pins {name}{spec}, {installed} is installed"
