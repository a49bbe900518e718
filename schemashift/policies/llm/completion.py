"""One model completion: what a local model, an API or the response cache hands a policy."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Completion:
    """Generated text with its token counts; `cached` marks a replay from the response cache,
    so records can tell a fresh generation from a replayed one."""

    text: str
    tokens_in: int
    tokens_out: int
    cached: bool = False
