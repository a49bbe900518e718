"""The model stacks' table (schemashift/runs/stacks.py) agrees with everything that names a
stack: the config schema's enums, the conda env files, pyproject's extras, the wheelhouse, the GPU
image's recipe, the training backends and the rules."""

from __future__ import annotations

import re
import sys
import tomllib

import pytest
import yaml
from workflow_support import REPO

from schemashift.runs.stacks import GPU_IMAGE, GPU_STACKS, STACKS, TORCH_VERSION
from schemashift.workflow import ConfigError
from schemashift.workflow.stacks import (
    MODEL_IMAGES,
    check_backends,
    check_renamed,
    gpu_stack,
    model_stack,
)

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
CONTAINERS = SCHEMA["properties"]["containers"]
EXTRAS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
RULES = REPO / "workflow" / "rules"


def pip_pins(env_file: str) -> dict[str, str]:
    """name -> version of the env file's exact pip pins."""
    env = yaml.safe_load((REPO / env_file).read_text())
    pip = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict) and "pip" in item)
    return dict(line.split("==", 1) for line in pip if "==" in line)


def test_the_schema_enums_are_the_tables():
    assert CONTAINERS["properties"]["train_stack"]["enum"] == list(GPU_STACKS)
    assert CONTAINERS["properties"]["model_image"]["enum"] == list(MODEL_IMAGES)
    assert CONTAINERS["default"]["train_stack"] in GPU_STACKS
    assert set(GPU_STACKS) | {"cpu"} == set(STACKS)


@pytest.mark.parametrize("name", sorted(STACKS))
def test_each_stacks_conda_env_pins_its_extra(name):
    stack = STACKS[name]
    pins = pip_pins(stack.conda_env)
    extra = dict(line.split("==", 1) for line in EXTRAS[stack.extra] if "==" in line)
    assert {package: pins.get(package) for package in extra} == extra, stack.conda_env
    assert pins["torch"] == TORCH_VERSION
    assert stack.pins_note


def test_every_env_file_is_a_stacks_or_the_runtimes():
    used = {stack.conda_env for stack in STACKS.values()} | {"envs/runtime.yaml"}
    assert {f"envs/{path.name}" for path in (REPO / "envs").glob("*.yaml")} == used


def test_the_stacks_pins_differ_only_where_the_table_says_why():
    """transformers is the one pin training and evaluation could disagree on: one per stack."""
    versions = {name: pip_pins(stack.conda_env)["transformers"] for name, stack in STACKS.items()}
    for name, stack in STACKS.items():
        assert f"transformers {versions[name][:4]}" in stack.pins_note, (name, versions[name])


def test_the_training_backends_are_the_gpu_stacks():
    """A run's backend names a GPU stack whose module it needs; `auto` tries them all."""
    from schemashift.runs.contract import BACKENDS
    from schemashift.train.backends import AUTO_ORDER

    assert [name for name in BACKENDS if name in STACKS] == [name for name in STACKS if STACKS[name].gpu]
    assert all(STACKS[name].module == name for name in GPU_STACKS)
    assert set(AUTO_ORDER[:-1]) == set(GPU_STACKS) and AUTO_ORDER[-1] == "transformers"


def test_the_wheelhouse_and_the_gpu_image_take_their_stacks_from_the_table():
    sys.path.insert(0, str(REPO / "containers"))
    import wheelhouse

    assert wheelhouse.TORCH == f"torch=={TORCH_VERSION}"
    assert STACKS["cpu"].extra in wheelhouse.EXTRAS[STACKS["cpu"].wheelhouse]
    assert set(wheelhouse.GPU_IMAGES) == {STACKS[name].wheelhouse for name in GPU_STACKS}
    for name in GPU_STACKS:
        assert wheelhouse.stack(STACKS[name].wheelhouse) == STACKS[name].extra == name
        assert STACKS[name].image == GPU_IMAGE
    dockerfile = (REPO / "containers" / "train.Dockerfile").read_text()
    assert f"== '{TORCH_VERSION}'" in dockerfile
    listed = re.search(r'case "\$STACK" in ([a-z|]+)\)', dockerfile)
    assert listed and set(listed[1].split("|")) == set(GPU_STACKS)


def test_model_image_and_train_stack_choose_the_stack():
    assert model_stack({"model_image": "runtime", "train_stack": "unsloth"}).name == "cpu"
    assert model_stack({"model_image": "gpu", "train_stack": "unsloth"}).name == "unsloth"
    assert gpu_stack({"model_image": "runtime", "train_stack": "vllm"}).name == "vllm"


def test_a_run_may_name_only_the_configured_gpu_stack():
    check_backends(STACKS["cpu"], {"a": "auto", "b": "transformers"})
    check_backends(STACKS["vllm"], {"a": "vllm", "b": "auto"})
    with pytest.raises(ConfigError, match="train.runs.b: backend 'unsloth' needs the unsloth stack"):
        check_backends(STACKS["vllm"], {"a": "vllm", "b": "unsloth"})
    with pytest.raises(ConfigError, match="model_image: gpu and containers.train_stack: vllm"):
        check_backends(STACKS["cpu"], {"a": "vllm"})


def test_the_old_name_of_the_gpu_image_is_named_as_such():
    check_renamed({"containers": {"model_image": "gpu"}})
    check_renamed({})
    with pytest.raises(ConfigError, match="model_image: train is now `gpu`"):
        check_renamed({"containers": {"model_image": "train"}})


def rule_blocks() -> dict[str, str]:
    blocks = {}
    for smk in RULES.glob("*.smk"):
        for block in re.split(r"(?m)^(?=rule )", smk.read_text())[1:]:
            blocks[re.match(r"rule (\w+):", block)[1]] = block
    return blocks


def test_each_rule_with_an_image_runs_its_jobs_in_it_and_in_its_stack():
    """A rule that declares `container: image(ROLE)` takes that role's job-shell input and
    resource and, for the model role, the model stack's conda env: all in its own definition."""
    declared = {}
    for rule, block in rule_blocks().items():
        roles = re.findall(r'^    container:\n        image\("(\w+)"\)', block, re.M)
        if not roles:
            assert "image_input(" not in block and "image_resources(" not in block, rule
            continue
        (role,) = roles
        declared[rule] = role
        assert f'**image_input("{role}")' in block, rule
        assert f'**image_resources("{role}")' in block, rule
        conda = re.search(r"^    conda:\n        (.+)$", block, re.M)
        expected = 'conda_env("model")' if role == "model" else '"../../envs/runtime.yaml"'
        assert conda and conda[1] == expected, (rule, conda and conda[1])
    assert {rule for rule, role in declared.items() if role == "model"} == {
        "train",
        "evaluate",
        "tiny_model",
        "pretrained_model",
    }
    assert {"baseline", "aggregate", "tables", "figures", "report_html"} <= set(declared)


def test_no_rule_file_writes_snakemakes_rule_objects():
    """Only Snakemake's public rule syntax: no private attributes of its Rule objects."""
    for path in [REPO / "Snakefile", *RULES.glob("*.smk")]:
        text = path.read_text()
        assert not re.search(r"workflow\.rules\b|\.set_input\(|\._input\b|input_modifier", text), path
