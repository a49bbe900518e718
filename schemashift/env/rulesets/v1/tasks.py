"""v1 task instances: what (scenario, seed) draws, and the documentation an episode starts with.

`build_task` draws a family's (or a composition's) world from a generator seeded by the scenario
and seed (`families.py`, `builder.py`), then the drift plan from another (`draw_drifts`), drawing
again until the world is consistent and an honest agent can finish with steps to spare. Seeds up
to `TEST_SEEDS[1]` are the test split, the rest train; held-out kinds are drawn only in test.

A salt (`SALT_ENV`, given at run time and kept secret) moves the test split to streams the public
code cannot reproduce: a test seed's world and drift plan are drawn from generators keyed by the
salt's digest as well, so a run held out from everyone who lacks the salt plays tasks that the
seed and this module cannot rebuild. Training seeds ignore it (training stays reproducible from
the code). Records name the salt by `salt_id`, a digest that does not give the streams' key.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any

from schemashift.env.episode import DriftSpec, Task
from schemashift.env.frozen import freeze
from schemashift.env.rulesets.base import UnknownScenario
from schemashift.env.rulesets.v1 import families
from schemashift.env.rulesets.v1.api import build_view
from schemashift.env.rulesets.v1.builder import Builder, FamilySpec, Redraw
from schemashift.env.rulesets.v1.catalogue import (
    BREAKING_KINDS,
    CATALOGUE,
    DRIFT_KINDS,
    HELD_OUT_KINDS,
    HELD_OUT_PAIRS,
    TOOL_WIDE,
    TOOL_WIDE_KINDS,
)
from schemashift.env.rulesets.v1.draws import Draws
from schemashift.env.rulesets.v1.tools import API_CLASSES, WRITE_ENDPOINTS

TEST_SEEDS = (0, 9999)
TRAIN_FIRST_SEED = 10000
TOKENS_PER_STEP = 4000
#: kinds that exclude any other drift on the same endpoint
EXCLUSIVE_KINDS = frozenset({"endpoint_deprecation", "tool_removal"})
#: endpoints a write can reach another way (a cancellation is a delete or a status update), so a
#: drift on them cannot be the crux: an agent could step around it
ROUTED_ENDPOINTS = frozenset({("calendar", "delete_event"), ("calendar", "update_event")})
#: how many drifts a plan draws, keyed by whether the task is easy. Two-drift plans are rare: few
#: of them exist, so each would cover many seeds (customer_lookup's commonest plan) and share its
#: spellings with many others (its distinct schedules, guarantee 7)
_PLAN_SIZES = {True: (2,) + (3,) * 8 + (4,) * 7, False: (2, 3, 3, 3, 4, 4, 4, 5, 5)}


def salt_id(salt: str) -> str:
    """The name a salt is recorded under: a digest of its own, not the streams' key."""
    return hashlib.sha256(f"schemashift-v1-salt-id/{salt}".encode()).hexdigest()[:12]


def _salt_key(salt: str) -> str:
    return hashlib.sha256(f"schemashift-v1-salt-stream/{salt}".encode()).hexdigest()


def _derived_rng(*parts: Any) -> Draws:
    """A generator seeded from text: the same on every machine and Python build (never hash())."""
    return Draws("v1/" + "/".join(str(p) for p in parts))


def split_of(seed: int) -> str:
    return "test" if seed <= TEST_SEEDS[1] else "train"


@lru_cache(maxsize=64)
def build_task(scenario: str, seed: int, salt: str | None = None) -> Task:
    """The task of (scenario, seed), under `salt` where one is given and the seed is a test seed.

    The cache serves what is played again soon after (a group of samples of one seed, the oracle
    rebuilding the task it is shown, a training step's groups played side by side); it is kept
    small because every cached task is some 45 objects the cyclic garbage collector walks: at 4096
    tasks that walk cost a fresh-seed reset about a tenth of its time, and at 256 it was still
    about 6% of a fresh-seed step (1.3 of 22.1 us, `benchmarks/step_speed.py`), at 64 under 3%.

    A world whose criteria contradict each other is drawn again (`builder.Redraw`), and so is a
    drift plan that an honest agent (one that reads what it must) could not finish with two steps
    to spare (`_honest_steps_bound`), so every seed is solvable from what the agent is shown.
    """
    split = split_of(seed)
    salted = (f"salt-{_salt_key(salt)}",) if salt and split == "test" else ()
    world_rng = _derived_rng(*salted, scenario, seed, "world")
    if scenario in families.FAMILIES:
        tier, builder, max_steps, _ = families.FAMILIES[scenario]
        family = scenario

        def draw() -> FamilySpec:
            return builder(Builder(world_rng, split))
    elif scenario in families.COMPOSITIONS:
        tier, parts, max_steps = families.COMPOSITIONS[scenario]
        family = "composition"

        def draw() -> FamilySpec:
            return families.composition(Builder(world_rng, split), parts)
    else:
        known = list(families.FAMILIES) + list(families.COMPOSITIONS)
        raise UnknownScenario(f"Unknown scenario {scenario!r} for ruleset 'v1'. Available: {known}")
    for _ in range(20):
        try:
            spec = draw()
        except Redraw:
            continue
        break
    else:
        raise RuntimeError(f"no consistent world for {scenario} seed {seed}")
    drift_rng = _derived_rng(*salted, scenario, seed, "drift")
    calls: dict[str, int] = {}
    # The plan's shape, all that drawing its drifts reads: its calls and the parameters they pass.
    shape = []
    for op in spec.ops:
        tool = op["tool"]
        calls[tool] = calls.get(tool, 0) + 1
        shape.append((tool, op["endpoint"], tuple(sorted(op["params"]))))
    signature = tuple(shape)
    for _ in range(50):
        plan = draw_drifts(drift_rng, signature, tier, split)
        if _honest_steps_bound(plan, calls) <= max_steps - 2:
            task = _task(scenario, seed, tier, family, max_steps, spec, split, plan)
            if salted:
                task.salt_id = salt_id(salt)
            return task
    raise RuntimeError(f"no solvable drift plan for {scenario} seed {seed}")


def _honest_steps_bound(plan: tuple[DriftSpec, ...], calls: dict[str, int]) -> int:
    """An upper bound on the steps of an honest agent that reads what the task needs: every
    documented call; one failed call per drift that breaks calls (and per rate limit, a 429 before
    it is known; per transient fault, the faulted call; per silent change, the call made again once
    the response shows it did not take); an inspection and a report per drift; the completion;
    per transient fault, the steps its Retry-After asks beyond the first; and, per rate limit, the
    steps the calls from the one that fires it on may have to wait: k calls at c per w steps span
    at most (ceil(k / c) - 1) * w steps more than they take. The oracle (no reads, no failures
    it can avoid) needs fewer."""
    failures = dict.fromkeys(calls, 0)
    for spec in plan:
        if spec.kind in _FAILING_KINDS:
            failures[spec.tool] = failures.get(spec.tool, 0) + 1
    bound = sum(calls.values()) + sum(failures.values()) + 2 * len(plan) + 1
    for spec in plan:
        if spec.kind == "transient_fault":
            bound += spec.details["retry_after"] - 1
        if spec.kind == "rate_limit_tightening":
            limit, window = spec.details["calls"], spec.details["per_steps"]
            limited = calls.get(spec.tool, 0) + failures[spec.tool] - spec.on_call + 1
            bound += max(0, -(-limited // limit) - 1) * window
    return bound


#: kinds that cost an honest agent a call more when it meets them: a failed one, or a write made
#: again after a silent change (a deprecation announces itself in headers before its sunset; a
#: restructure or remap breaks no call)
_FAILING_KINDS = frozenset(
    {*BREAKING_KINDS, "tool_removal", "rate_limit_tightening", "transient_fault", "silent_change"}
)


def _task(scenario, seed, tier, family, max_steps, spec, split, plan) -> Task:
    # Positional: every fresh episode builds one, and keyword arguments cost a name match each.
    return Task(
        scenario,
        seed,
        tier,
        family,
        max_steps,
        TOKENS_PER_STEP * max_steps,
        spec.tools,
        spec.seed_data,
        spec.description,
        tuple(dict.fromkeys(c["text"] for c in spec.criteria)),
        plan,
        {
            "criteria": spec.criteria,
            "allowed": spec.allowed,
            "ops": spec.ops,
            "summary": spec.summary,
            "clauses": [clause.key for clause in spec.clauses],
        },
        split,
    )


def draw_drifts(
    rng: Draws, signature: tuple[tuple[str, str, tuple[str, ...]], ...], tier: str, split: str
) -> tuple[DriftSpec, ...]:
    """Which endpoints drift, how, and on which call: situations, not spellings.

    First the crux: a breaking kind (renamed or retyped parameter the call passes, a new required
    parameter) on one of the plan's writes that has no other route, firing on that write's own
    call (any of them, for a write the plan makes several times), so the documented plan fails
    unless the agent adapts. Every (write call, kind) is equally likely. Then 1-4 more drifts
    (1-3 on an easy task; `_PLAN_SIZES`): each drawn uniformly among the (kind, target) pairs that
    still fit the plan, a target being an endpoint the plan calls or a tool it uses, and firing
    on any of the plan's calls to it. No single (tool, endpoint, kind, call) plan is then common
    (tests/env/v1/test_v1_plans.py). Held-out kinds and pairs are drawn only in the test split.
    """
    tool, endpoint, kind, variants, nth, open_targets, on_target = rng.choice(
        _drift_options(signature, split)
    )
    plan = [_spec(tool, kind, endpoint, dict(rng.choice(variants)), nth)]
    taken: dict[tuple[str, str | None], frozenset[str]] = {(tool, endpoint): frozenset((kind,))}
    wanted = rng.choice(_PLAN_SIZES[tier == "easy"])
    open_targets = list(open_targets)  # the cached list stays as it is: this copy is narrowed
    while len(plan) < wanted and open_targets:
        kind, (tool, endpoint, variants, count) = rng.choice(open_targets)
        details = dict(rng.choice(variants))
        if kind == "endpoint_deprecation":
            details["sunset_after"] = rng.randint(1, 4)
        plan.append(_spec(tool, kind, endpoint, details, rng.randint(1, count)))
        key = (tool, endpoint)
        already = taken[key] = taken.get(key, frozenset()).union((kind,))
        # Only the pairs on the target just drawn can close, and a closed pair stays closed
        # (`_compatible` only narrows as a target takes kinds): removing those that close now
        # leaves the list a scan of every pair would give, in the same order, so the draws are
        # the same.
        closed = _closed_by(already)
        for pair in on_target.get(key, ()):
            if pair[0] in closed and pair in open_targets:
                open_targets.remove(pair)
    plan.sort(key=_plan_order)
    return tuple(plan)


def _plan_order(spec: DriftSpec) -> tuple[str, str, int, int]:
    return (spec.tool, spec.endpoint or "", spec.on_call, _ORDER[spec.kind])


_DRIFT_SPEC_NEW = object.__new__


def _spec(tool: str, kind: str, endpoint: str | None, details: dict[str, Any], on_call: int) -> DriftSpec:
    """`DriftSpec(tool, kind, None, endpoint, details, on_call=on_call)` without its `__init__`:
    a frozen dataclass sets each of its seven fields through `object.__setattr__`, which cost a
    fifth of drawing a plan. The instance gets the same fields, in the same order."""
    spec = _DRIFT_SPEC_NEW(DriftSpec)
    spec.__dict__.update(
        tool=tool,
        kind=kind,
        fires_at_step=None,
        endpoint=endpoint,
        details=details,
        duration=None,
        on_call=on_call,
    )
    return spec


@lru_cache(maxsize=256)
def _drift_options(signature: tuple[tuple[str, str, tuple[str, ...]], ...], split: str):
    """What a plan of this shape can draw: the crux candidates, each with the (kind, target) pairs
    an extra drift may take beside it, a target being (tool, endpoint or None for a tool-wide
    kind, variants, how many plan calls reach it); a plan's shape is its calls and the
    parameters they pass."""

    def allowed(tool: str, kind: str) -> bool:
        return split == "test" or (kind not in HELD_OUT_KINDS and (tool, kind) not in HELD_OUT_PAIRS)

    uses: dict[tuple[str, str | None], int] = {}
    passed: dict[tuple[str, str], set[str]] = {}
    cruxes = []
    for tool, endpoint, params in signature:
        passed.setdefault((tool, endpoint), set()).update(params)
        uses[(tool, None)] = uses.get((tool, None), 0) + 1
        uses[(tool, endpoint)] = nth = uses.get((tool, endpoint), 0) + 1
        if (tool, endpoint) not in WRITE_ENDPOINTS or (tool, endpoint) in ROUTED_ENDPOINTS:
            continue
        for kind in BREAKING_KINDS:
            if not allowed(tool, kind):
                continue
            variants = [
                v
                for v in CATALOGUE[(tool, endpoint)].get(kind, ())
                if kind == "new_required_param" or _param_of(kind, v) in params
            ]
            if variants:
                cruxes.append((tool, endpoint, kind, variants, nth))
    targets: dict[str, list[tuple[str, str | None, list[dict[str, Any]], int]]] = {}
    for (tool, endpoint), count in uses.items():
        if endpoint is None:
            for kind in sorted(TOOL_WIDE_KINDS):
                if allowed(tool, kind):
                    targets.setdefault(kind, []).append((tool, None, TOOL_WIDE[kind], count))
            continue
        for kind, variants in CATALOGUE.get((tool, endpoint), {}).items():
            if kind == "silent_change":
                # A silent change of a parameter no call passes would change nothing the task does.
                variants = [v for v in variants if v["param"] in passed[(tool, endpoint)]]
            if variants and allowed(tool, kind):
                targets.setdefault(kind, []).append((tool, endpoint, variants, count))
    pairs = [(kind, target) for kind in sorted(targets) for target in targets[kind]]
    # Per target, its pairs: the only ones a draw on that target can close.
    on_target: dict[tuple[str, str | None], list[tuple[str, Any]]] = {}
    for pair in pairs:
        on_target.setdefault(pair[1][:2], []).append(pair)
    return [
        (
            *crux,
            [(kind, t) for kind, t in pairs if t[:2] != crux[:2] or _compatible(kind, {crux[2]})],
            on_target,
        )
        for crux in cruxes
    ]


def _param_of(kind: str, variant: dict[str, Any]) -> str:
    """The documented parameter a rename or type change acts on."""
    return variant["from"] if kind == "field_rename" else variant["param"]


# Drifts met on the same call apply in this order, so a rename lands before a type change of it.
_ORDER = {kind: i for i, kind in enumerate(DRIFT_KINDS)}


#: kinds that change an endpoint's parameters: a silent change shares its endpoint with neither
_PARAM_KINDS = frozenset({"field_rename", "type_change"})


def _compatible(kind: str, already: frozenset[str] | set[str]) -> bool:
    """Whether a target that has taken the kinds `already` may take `kind` too."""
    if not already:
        return True
    if kind in EXCLUSIVE_KINDS or kind in TOOL_WIDE_KINDS or kind in already:
        return False
    if not already.isdisjoint(EXCLUSIVE_KINDS):
        return False
    if kind == "silent_change":
        return already.isdisjoint(_PARAM_KINDS)
    return kind not in _PARAM_KINDS or "silent_change" not in already


@lru_cache(maxsize=512)
def _closed_by(already: frozenset[str]) -> frozenset[str]:
    """The kinds a target that has taken `already` can no longer take. Cached: a target takes at
    most a handful of the catalogue's kinds, so few sets ever occur (the bound is a backstop)."""
    return frozenset(kind for kind in DRIFT_KINDS if not _compatible(kind, already))


@lru_cache(maxsize=16)
def start_docs(tools: tuple[str, ...]) -> dict[str, Any]:
    """The documentation every episode of a tool set starts with (shared, read-only)."""
    return freeze({name: build_view(API_CLASSES[name]({})) for name in tools})


FAMILY_BLURBS = {
    "onboard_new_hire": "welcome e-mail to a new hire found in HR's message, orientation with their manager",
    "meeting_invite_blast": "one invitation per team member on the inbox roster, none to anyone on leave",
    "customer_lookup": "find a customer by e-mail, set their CRM status, name their company",
    "customer_escalation": "CRM status, retention e-mail and a check-in call for an escalated customer",
    "weekly_report": "e-mail the active contacts of a company and schedule the review meeting",
    "event_cleanup": "cancel two named events among look-alikes, add a wrap-up, notify the team",
}
