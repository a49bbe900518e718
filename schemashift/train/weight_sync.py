"""The vLLM weight sync, with the LoRA merge computed out of place.

TRL (1.16, `VLLMGeneration._iter_named_params`) syncs a PEFT model into vLLM by calling
`merge_adapter()`, reading every weight, then `unmerge_adapter()`, at every step. In bf16 that
does not round-trip: `W + s·BA` rounds, and subtracting `s·BA` again rounds once more, so each
sync leaves the base weights a little off, and with the adapter moving between syncs the errors
accumulate (issue 29 measured on a Qwen2.5-1.5B-shaped projection, r 16, alpha 32: after 100
syncs 6-29 % of the base weights had changed, by 29-43 % of the norm of the LoRA update; the
tests here measure their own figures, docs/training.md). The run then trains
"drifted base + adapter", TRL's KL reference is the drifted base, and evaluation loads the
pristine base with the adapter. Upstream: https://github.com/huggingface/trl/issues/6688.

`install_out_of_place_sync` replaces only that merge/unmerge: each LoRA-wrapped weight is sent as
`base + scaling · B @ A` (summed over the active adapters, computed in float32 and cast to the
base's dtype) in a fresh tensor, every other weight as it is, under the names TRL sends; TRL's
`sync_weights` still does the rest (waking the engine, `load_weights`, resetting the prefix
cache). The trained model's parameters are only read. LoRA variants whose merge is not
`base + s·BA` (DoRA and the other `lora_variant`s, `lora_bias`) and non-Linear LoRA layers are
refused rather than sent wrong. torch and peft are imported inside the functions, so that
`import schemashift` stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

PEFT_PREFIX = "base_model.model."
BASE_LAYER = ".base_layer"
MODULES_TO_SAVE = "modules_to_save.default."


class UnsupportedAdapter(NotImplementedError):
    """A PEFT layer whose merged weight this sync does not compute."""


def lora_layers(model: Any) -> dict[str, Any]:
    """The model's PEFT tuner layers by module name, after checking each merges as
    `base + scaling · B @ A` (refusing the others, and layers merged already)."""
    from peft.tuners.lora import Linear as LoraLinear
    from peft.tuners.tuners_utils import BaseTunerLayer

    layers = {}
    for name, module in model.named_modules():
        if not isinstance(module, BaseTunerLayer):
            continue
        if not isinstance(module, LoraLinear) or not hasattr(module.get_base_layer(), "weight"):
            raise UnsupportedAdapter(
                f"{name}: out-of-place sync implements LoRA on linear layers only, "
                f"not {type(module).__name__}"
            )
        if module.merged:
            raise UnsupportedAdapter(
                f"{name}: adapters {module.merged_adapters} are merged into the base already"
            )
        for adapter in _merged_adapters(module):
            if adapter in module.lora_variant or module.use_dora.get(adapter):
                variant = type(module.lora_variant.get(adapter)).__name__
                raise UnsupportedAdapter(
                    f"{name}: adapter {adapter!r} is a LoRA variant ({variant}), not plain LoRA"
                )
            if module.lora_bias.get(adapter):
                raise UnsupportedAdapter(
                    f"{name}: adapter {adapter!r} has lora_bias, which this sync does not merge"
                )
        layers[name] = module
    return layers


def _merged_adapters(layer: Any) -> list[str]:
    """The adapters `merge_adapter()` would merge into `layer`: its active ones that it holds."""
    return [adapter for adapter in layer.active_adapters if adapter in layer.lora_A]


def merged_weight(layer: Any) -> Any:
    """`base + scaling · B @ A` of one LoRA linear layer, in a new tensor of the base's dtype."""
    import torch

    base = layer.get_base_layer().weight
    with torch.no_grad():
        merged = base.detach().float()
        for adapter in _merged_adapters(layer):
            delta = layer.lora_B[adapter].weight.float() @ layer.lora_A[adapter].weight.float()
            if layer.fan_in_fan_out:
                delta = delta.T
            merged = merged + layer.scaling[adapter] * delta
        return merged.to(base.dtype)


def merged_named_weights(
    model: Any, rename: Callable[[str], str] = lambda name: name
) -> Iterator[tuple[str, Any]]:
    """(name, tensor) for every weight vLLM loads from a PEFT LoRA model, named as TRL names them
    (`base_model.model.` and `.base_layer` dropped, LoRA and `original_module` weights skipped,
    then `rename`): LoRA-wrapped weights merged out of place, every other weight as it is."""
    layers = lora_layers(model)
    for name, param in model.named_parameters():
        vllm_name = name.removeprefix(PEFT_PREFIX).replace(BASE_LAYER, "")
        if model.prefix in vllm_name or "original_module" in vllm_name:
            continue
        owner, _, leaf = name.rpartition(f"{BASE_LAYER}.")
        if owner in layers and leaf == "weight":
            yield rename(vllm_name), merged_weight(layers[owner])
        else:
            yield rename(vllm_name), param.data


def install_out_of_place_sync(generation: Any) -> None:
    """Make TRL's `VLLMGeneration` (a trainer's `vllm_generation`) read a PEFT model's weights
    with `merged_named_weights` instead of merging the adapter in place and unmerging it; a model
    without an adapter keeps TRL's own path. `sync_weights` is TRL's, unchanged."""
    from accelerate.utils import is_peft_model

    trl_named_params = generation._iter_named_params

    def named_params() -> Iterator[tuple[str, Any]]:
        model = generation.model
        if not is_peft_model(model):
            yield from trl_named_params()
            return
        if generation._dist.is_fsdp:
            raise UnsupportedAdapter("out-of-place sync does not gather FSDP-sharded weights")
        with generation._dist.gather_params(list(model.parameters())):
            yield from merged_named_weights(
                model, lambda name: generation._fix_param_name_to_vllm(name, extra_prefixes=[MODULES_TO_SAVE])
            )

    generation._iter_named_params = named_params
