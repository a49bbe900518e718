"""The local engine's parts that make batched play fast: piecewise prompt tokenization (checked
against tokenizing the whole prompt) and the key/value cache that appends in place."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from schemashift.policies.llm.decoding import _reserved_cache  # noqa: E402
from schemashift.policies.llm.local import PromptTokens  # noqa: E402
from schemashift.train.sft import oracle_conversations  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def whole_prompt_ids(tokenizer, messages) -> list[int]:
    return list(
        tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    )


@pytest.mark.model
def test_piecewise_prompt_tokens_equal_the_whole_prompts_tokens(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokens = PromptTokens(tokenizer)
    conversations = oracle_conversations(["legacy", "v1"], {"legacy": [0], "v1": [0, 10000]})
    prefixes = [messages[:k] for messages in conversations for k in range(1, len(messages) + 1, 2)]
    assert len(prefixes) > PromptTokens.CHECKED_PROMPTS * 4
    for messages in prefixes:
        assert tokens.ids(messages) == whole_prompt_ids(tokenizer, messages)
    assert tokens.piecewise, "a byte-level BPE splits at its added tokens, so pieces add up"
    # a prompt seen before comes back from the prompt table, and is not aliased by the caller
    again = tokens.ids(prefixes[0])
    again.append(-1)
    assert tokens.ids(prefixes[0]) == whole_prompt_ids(tokenizer, prefixes[0])


@pytest.mark.model
def test_a_tokenizer_whose_pieces_do_not_add_up_is_tokenized_whole(tiny_model: Path) -> None:
    from tokenizers import AddedToken
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    # An added token that swallows the spaces around it: the text before it, tokenized alone,
    # keeps its trailing space, so piece-by-piece ids differ from the whole prompt's.
    tokenizer.add_tokens([AddedToken("<|ref|>", lstrip=True, rstrip=True)])
    tokens = PromptTokens(tokenizer)
    messages = [{"role": "user", "content": "look up the contact  <|ref|>  and report"}]
    assert tokens.ids(messages) == whole_prompt_ids(tokenizer, messages)
    assert not tokens.piecewise
    other = [{"role": "user", "content": "then mail them <|ref|> again"}]
    assert tokens.ids(other) == whole_prompt_ids(tokenizer, other)


def test_the_reserved_cache_appends_in_place_and_grows_past_its_room() -> None:
    import torch

    torch.manual_seed(0)
    keys, values = torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4)
    cache = _reserved_cache([(keys, values)], capacity=7)
    layer = cache.layers[0]
    expected_k, expected_v = keys, values
    for width in (1, 1, 4):  # the third append passes the room of 7 positions
        new_k, new_v = torch.randn(3, 2, width, 4), torch.randn(3, 2, width, 4)
        got_k, got_v = cache.update(new_k, new_v, 0)
        expected_k, expected_v = torch.cat([expected_k, new_k], -2), torch.cat([expected_v, new_v], -2)
        assert torch.equal(got_k, expected_k) and torch.equal(got_v, expected_v)
    assert cache.get_seq_length() == 11
    storage = layer._keys.data_ptr()
    cache.update(torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4), 0)
    assert layer._keys.data_ptr() == storage, "an append within the room writes in place"

    rows = torch.tensor([2, 0])
    kept = layer.keys[rows].clone()
    cache.batch_select_indices(rows)
    assert torch.equal(layer.keys, kept) and cache.get_seq_length() == 12
