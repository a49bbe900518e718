"""The live contract against the documented one: what drift changed on an endpoint (renamed
parameters paired by position and type, required additions recognised by their notes, retyped
parameters, parameters silently ignored or given a new vocabulary, as their notes say),
documented values converted as the notes say, and records read back from whatever envelope and
field names a response uses."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

#: an enumerated value list in a parameter's note
ENUM = re.compile(r"one of \[([^\]]*)\]")
#: the status an error label stands for when no drift remapped it
LABEL_STATUS = {
    "bad_request": 400,
    "not_found": 404,
    "gone": 410,
    "validation_error": 422,
    "rate_limited": 429,
    "service_unavailable": 503,
    "gateway_timeout": 504,
    "endpoint_retired": 410,
    "endpoint_removed": 404,
    "unknown_endpoint": 404,
}
#: the codes of a transient fault: the call was not applied and may be made again after the wait
TRANSIENT_CODES = frozenset({"service_unavailable", "gateway_timeout"})
#: a note that says a parameter is ignored, naming its successor
SUCCESSOR = re.compile(r"ignored since step \d+: use '([^']+)'")
#: the documented fields of a CRM contact record
CONTACT_FIELDS = ("contact_id", "name", "email", "company", "status")


def note_of(entry: dict[str, Any], param: str) -> str:
    return (entry.get("notes") or {}).get(param, "")


def _is_addition(param: str, entry: dict[str, Any]) -> bool:
    """A required parameter whose note asks for a value (not one describing a conversion)."""
    note = note_of(entry, param)
    return param in entry.get("required", ()) and ("non-empty" in note or "one of [" in note)


def rename_pairs(doc: dict[str, Any], entry: dict[str, Any]) -> dict[str, str]:
    """Documented parameter -> its live name, for the documented parameters the live contract
    no longer has. A rename keeps the parameter's place; additions come after the documented
    ones and carry a note asking for a value; what is left pairs by type, then in order."""
    dp, lp = doc["params"], entry["params"]
    live_names = list(lp)
    pairs: dict[str, str] = {}
    taken: set[str] = set()
    for i, name in enumerate(dp):
        if name in lp:
            continue
        if i < len(live_names):
            cand = live_names[i]
            if cand not in dp and not _is_addition(cand, entry):
                pairs[name], _ = cand, taken.add(cand)
    gone = [p for p in dp if p not in lp and p not in pairs]
    new = [p for p in live_names if p not in dp and p not in taken and not _is_addition(p, entry)]
    for name in gone:
        match = next((n for n in new if lp[n] == dp[name]), None) or (new[0] if new else None)
        if match is not None:
            pairs[name] = match
            new.remove(match)
    return pairs


def additions(doc: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """Live required parameters that are neither documented nor renamed documented ones."""
    renamed = set(rename_pairs(doc, entry).values())
    return [p for p in entry.get("required", ()) if p not in doc["params"] and p not in renamed]


def successors(entry: dict[str, Any]) -> dict[str, str]:
    """Parameter -> the successor its note says now carries its meaning (it is ignored)."""
    found = {}
    for param, note in (entry.get("notes") or {}).items():
        match = SUCCESSOR.search(note)
        if match:
            found[param] = match[1]
    return found


def in_vocabulary(value: Any, note: str) -> Any:
    """A documented value as a new vocabulary its note describes spells it (unchanged when the
    note describes none)."""
    if not isinstance(value, str) or "any other value is ignored" not in note:
        return value
    prefix = re.search(r"carry the prefix '([^']*)'", note)
    if prefix:
        return prefix[1] + value
    if "upper-case" in note:
        return value.upper()
    renamed = re.search(r"'([^']*)' is now '([^']*)'", note)
    return renamed[2] if renamed and value == renamed[1] else value


def contract_changes(doc: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """The drift kinds that turn one documented endpoint contract into the live one."""
    kinds = []
    dp, lp = doc["params"], entry["params"]
    pairs = rename_pairs(doc, entry)
    if any(p not in lp for p in dp):
        kinds.append("field_rename")
    if additions(doc, entry):
        kinds.append("new_required_param")
    if any(pairs.get(p, p) in lp and lp[pairs.get(p, p)] != dp[p] for p in dp):
        kinds.append("type_change")
    shape, doc_shape = entry.get("response_shape") or {}, doc.get("response_shape") or {}
    if "meta" in shape and "meta" not in doc_shape:
        kinds.append("response_restructure")
    notes = (entry.get("notes") or {}).values()
    if any(SUCCESSOR.search(note) or "any other value is ignored" in note for note in notes):
        kinds.append("silent_change")
    return kinds


def _epoch(value: str) -> int:
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())


def convert(value: Any, doc_type: str | None, live_type: str, note: str) -> Any:
    """A documented value in the live type, as the parameter's note describes it."""
    if doc_type is None or doc_type == live_type:
        return in_vocabulary(value, note)
    if live_type == "int" and isinstance(value, str):
        if re.match(r"\d{4}-\d{2}-\d{2}T", value):
            seconds = _epoch(value)
            return seconds * 1000 if "milli" in note else seconds
        digits = re.search(r"(\d+)$", value)
        return int(digits[1]) if digits else value
    if live_type == "list[object]":
        key = re.search(r"\{'(\w+)'", note)
        key = key[1] if key else "email"
        items = value if isinstance(value, list) else [value]
        return [{key: item} for item in items]
    if live_type == "object":
        key = re.search(r"\{'(\w+)'", note)
        return {key[1] if key else "value": value}
    if live_type == "list[str]" and isinstance(value, str):
        return [value]
    if live_type == "str" and isinstance(value, list) and len(value) == 1:
        return value[0]
    return value


def records(body: Any) -> list[dict[str, Any]]:
    """The records of a list response, whatever envelope holds them."""
    queue = [body]
    while queue:
        item = queue.pop(0)
        if isinstance(item, list) and all(isinstance(x, dict) for x in item):
            return item
        if isinstance(item, dict):
            queue.extend(v for k, v in item.items() if k != "meta")
    return []


def documented_records(doc: dict[str, Any], body: Any) -> list[dict[str, Any]]:
    """The records of a list response read as the documentation shows it: the objects under the
    key `doc`'s response shape types as a list (none where the body has no such list)."""
    key = next((k for k, kind in (doc.get("response_shape") or {}).items() if kind == "list"), None)
    found = body.get(key) if isinstance(body, dict) and key is not None else None
    return [row for row in found if isinstance(row, dict)] if isinstance(found, list) else []


def requested_value(note: str) -> str | None:
    """A value for a parameter the live contract added, as its note asks: the first enumerated
    value, or an address where it asks for one (None: the note names no value)."""
    match = ENUM.search(note)
    if match:
        values = [v.strip().strip("'\"") for v in match[1].split(",") if v.strip()]
        if values:
            return values[0]
    if "e-mail" in note or "email" in note:
        return "me@company.com"
    return None


def documented_contacts(
    found: list[dict[str, Any]], inverse: dict[str, str]
) -> tuple[list[dict[str, Any]], bool]:
    """Contact records with their documented field names (`inverse`: live name -> documented,
    from the contract; fields it does not pair are recognised by their values), and whether any
    field had another name."""
    out = []
    renamed = False
    for record in found:
        canon = {inverse.get(k, k): v for k, v in record.items()}
        unknown = [k for k in canon if k not in CONTACT_FIELDS]
        if unknown:
            renamed = True
            for key in unknown:
                value = canon[key]
                if "email" not in canon and isinstance(value, str) and "@" in value:
                    canon["email"] = canon.pop(key)
            for key in [k for k in canon if k not in CONTACT_FIELDS]:
                if "name" not in canon and isinstance(canon[key], str):
                    canon["name"] = canon.pop(key)
        if isinstance(canon.get("contact_id"), int):
            canon["contact_id"] = f"c_{canon['contact_id']}"
        out.append(canon)
    return out, renamed
