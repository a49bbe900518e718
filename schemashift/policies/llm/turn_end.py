"""Where a model's turn ends: the one stop-token list that evaluation and training share.

Evaluation (`local.LocalModel`), the supervised warm start (`schemashift.train.sft`) and the GRPO
rollout (`schemashift.train.closed_loop`) all end a turn at the first of these ids, so that a
trained turn stops exactly where an evaluated one does, whatever the model family. The chat
template's own turn end is read off the template rather than looked up in a list of known
tokens (`<|im_end|>`, `<|eot_id|>`, `<end_of_turn>`, ...): a model family nobody listed works
the same way. Tokenizers and generation configs are duck-typed; nothing is imported here.
"""

from __future__ import annotations

from typing import Any

#: text that cannot merge with the template's tokens around it; found again after rendering
_MARKER = "SCHEMASHIFT-TURN-TEXT"
_EXCHANGES = (
    [{"role": "user", "content": "hello"}, {"role": "assistant", "content": _MARKER}],
    [
        {"role": "system", "content": "system"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": _MARKER},
    ],
)


def end_of_turn_ids(tokenizer: Any, generation_config: Any = None) -> list[int]:
    """The ids that end a model's turn, in this order: the tokenizer's eos, the special token its
    chat template writes after an assistant message, and the generation config's eos ids.

    The first is also the padding fallback of a tokenizer without a pad token.
    """
    ids: list[int] = []

    def add(token_id: Any) -> None:
        if (
            isinstance(token_id, int)
            and token_id >= 0
            and token_id != tokenizer.unk_token_id
            and token_id not in ids
        ):
            ids.append(token_id)

    add(tokenizer.eos_token_id)
    add(template_turn_end(tokenizer))
    eos = getattr(generation_config, "eos_token_id", None)
    for token_id in eos if isinstance(eos, (list, tuple)) else [eos]:
        add(token_id)
    if not ids:
        raise ValueError(
            "the model defines no end-of-turn token: no eos token, no special token after an "
            "assistant message in its chat template, no eos id in its generation config"
        )
    return ids


def template_turn_end(tokenizer: Any) -> int | None:
    """The special token the chat template writes right after an assistant message's text, or
    None (no template, a template that closes turns with plain text, or one that renders none
    of the probe exchanges)."""
    if getattr(tokenizer, "chat_template", None) is None:
        return None
    special = set(tokenizer.all_special_ids) | set(tokenizer.get_added_vocab().values())
    for messages in _EXCHANGES:
        try:
            text = tokenizer.apply_chat_template(messages, tokenize=False)
        except Exception:  # noqa: BLE001 - a template may raise anything (jinja's raise_exception)
            continue
        _, found, after = text.rpartition(_MARKER)
        if not found:
            continue
        ids = tokenizer(after, add_special_tokens=False)["input_ids"]
        return ids[0] if ids and ids[0] in special else None
    return None
