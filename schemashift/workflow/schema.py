"""The config's keys against the workflow's schema, before Snakemake validates it.

Snakemake's `validate` reports a key the schema does not know by printing the whole schema
(over a thousand lines) after jsonschema's message; `check_unknown_keys` names the unknown
key(s), where they are and the keys allowed there, in one line. jsonschema and yaml are
imported when it is called.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def unknown_keys(config: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """One line per object of `config` holding keys that `schema` does not allow there:
    `unknown key 'x' in evaluation.legacy (allowed: ...)`."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    problems = []
    for error in cls(schema).iter_errors(config):
        if error.validator != "additionalProperties" or error.validator_value is not False:
            continue
        if not isinstance(error.instance, Mapping):
            continue
        known = set(error.schema.get("properties", {}))
        patterns = [re.compile(p) for p in error.schema.get("patternProperties", {})]
        extra = sorted(
            str(key)
            for key in error.instance
            if key not in known and not any(p.search(str(key)) for p in patterns)
        )
        if not extra:
            continue
        path = ".".join(str(part) for part in error.absolute_path)
        where = f"in {path}" if path else "at the top level"
        keys = ", ".join(repr(key) for key in extra)
        allowed = f" (allowed: {', '.join(sorted(known))})" if known else ""
        problems.append(f"unknown key{'s' if len(extra) > 1 else ''} {keys} {where}{allowed}")
    return problems


def check_unknown_keys(config: Mapping[str, Any], schema_file: str | Path) -> None:
    """A ConfigError naming every unknown key of `config` and where it is, in one line."""
    import yaml

    from schemashift.workflow.plan import ConfigError

    with open(schema_file) as f:
        schema = yaml.safe_load(f)
    problems = unknown_keys(config, schema)
    if problems:
        raise ConfigError("; ".join(problems))
