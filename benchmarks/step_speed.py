"""In-process step latency: policy_aware_heuristic episodes over the six legacy scenarios.

The figure covers the whole loop, the agent's decision included, as the original's 86 us/step
was measured. Target: at most 17 us per step (goal 9 us), i.e. at least 86/17 = 5.06x faster
than the original measured side by side (goal 10x); v1 with `--fresh-seeds` at most 1.5x
legacy. Prints the median of several repeats, wall-clock and CPU time (`time.process_time`).

What the profile showed (issue 35; cProfile and line_profiler over 3000 legacy episodes) once
observations became frozen snapshots: `freeze` and `frozen_view` took about 28% of the loop.
Every step handed the generic, recursive `freeze` dicts built plain a moment before (the
response and its body, the 14-key reward breakdown, the history entry, the known state with its
lists) and `frozen_view` rebuilt the top-level dict and the history window of every
observation; each reset rebuilt the documentation (55% of `observe` on those steps), the success
criteria and an empty drift list. 11 `freeze` calls per step, 128 function calls per step.
Now the rulesets build those parts frozen where they are made (`FrozenDict(...)` directly,
responses frozen in `ok()`/`error()`, drifted schema entries frozen as built), the Environment
skips `freeze` for a part that is frozen already and hands out a view whose parts are all
frozen as it is (one `issuperset` check), and the parts every episode starts with are built
once and shared between episodes (frozen, so sharing is safe): 3 `freeze` calls and 101
function calls per step. The guarantees are unchanged: tests/env/test_observation_snapshots.py.
What is left is the rules themselves (reward and completion about 20% of a step, the tool call
15%, parsing 8%) and, for v1 with fresh seeds, building the task (about a third of its loop:
random draws of the world and the drift plan that the published seeds fix).
Measured against the commit before, run alternately on the same loaded 2-core machine (three
rounds of 9 repeats of 1500 episodes): ratio original/ours 4.78-5.15 (CPU time 4.78-5.07),
before 3.47-3.67; on that load ours 22.7-26.3 us/step against 36.6-37.3. So legacy is at the
target's edge and far from the goal, and v1/legacy with fresh seeds went from 1.18-1.64 to
1.76-1.94 (docs/rulesets.md, Cost): v1 gained less because its task construction is untouched.

Second pass (issue 35, again; cProfile, line_profiler, py-spy sampling, and instruction counts
under valgrind, which a loaded machine cannot disturb): a fresh v1 reset was about 200 us, two
thirds of it building the task. `random.Random` spent three Python frames per draw (now `Draws`,
the same stream in one frame), a cache of 4096 tasks made the garbage collector's walk a tenth
of a reset (now 256), every seeded record was copied at load and again in every response (v1's
world is now read-only records written copy-on-write), frozen dataclasses cost a setattr per
field (people and slots are named tuples), and drift bookkeeping walked every drift at every
call. On legacy the documentation after a drift was rebuilt in every episode (now kept by the
specs applied). Instructions per step (valgrind, same episodes): legacy 143.2k -> 137.2k, v1
with fresh seeds 230.8k -> 200.0k; the original 736k (5.4x ours). Side by side on the quiet
2-core machine (5 repeats of 1500 episodes, before and after alternating): legacy 17.0-17.3 ->
16.5-16.7 us/step against the original's 75-77, ratio 4.45-4.49 -> 4.49-4.59 (target 5.06 not
met: the original runs faster per instruction, much of its time being in pydantic's compiled
core); v1 fresh 31.1-31.6 -> 26.2-26.4 us/step, ratio v1/legacy 1.76-1.77 -> 1.54-1.56 (target
1.5 not met). What is left is spread thin: no function of the legacy loop holds 7% of its time.

Third pass (issue 35; cProfile over 3000 legacy episodes, instruction counts under callgrind
with PYTHONHASHSEED=0 over 1500 episodes, both trees): about 100 function calls per step; the
reset was 12% of the loop, and applying an episode's drifts about 5%: every episode copied and
edited the same baseline schemas (the CRM e-mail rename copied four, about 9 us), and every
inspection after a drift rebuilt the tool's frozen schema view although the documentation of
those drifts was already shared. Now a schema held by many tools is marked shared and edited only
through `Tool.edit_schema`, which edits it once on a copy and shares the result; an inspection
answers with the tool's entry of the shared documentation; responses whose bodies a handler
builds frozen are not frozen again, nor are parameters already frozen; the snapshot check is
inline. On v1, `Draws.sample` runs `random.Random.sample`'s algorithms in one frame. Instructions
per step: legacy 137.9k -> 126.2k (the original about 736k), v1 with fresh seeds 202.0k ->
200.9k. Side by side on the 2-core machine under heavy load from other jobs (load average 5-6;
wall-clock per step two to four times CPU time, so the CPU-time ratios are the steadier figures;
1500 episodes, 3-5 repeats, before and after alternating): ratio original/ours in CPU time
3.90-4.54 before against 4.37-5.58 after (wall-clock 3.83-5.55 against 3.33-6.01). v1/legacy
with fresh seeds in CPU time 1.53-1.63 before against 1.63-1.75 after: legacy gained and v1
hardly did, so the ratio grew (by instruction counts 1.47 -> 1.59). What is left: about ten
frozen containers built per step (the snapshot guarantee), the ruleset hooks' calls, and for v1
building the task (`tasks.draw_drifts` scans every (kind, target) pair per extra drift).

Fourth pass (issue 35; cProfile and line_profiler over 1500 fresh-seed v1 episodes, instruction
counts under callgrind with PYTHONHASHSEED=0, 1500 episodes after 300 warm-up ones, less a run
of none, both trees): building the task was 937k instructions of a fresh v1 episode's 3.1M
(51k of it seeding its two generators, which no change may touch), and over half of the
heuristic's v1 steps meet the unknown-parameter error, whose text sorted and wrote two name lists
at every call. The rest of a step is spread over the hooks: the tool call about a quarter (mostly
building its error answer), firing drifts, parsing, effects and reward about a tenth each. Now
`draw_drifts` filters the open pairs after each draw instead of scanning every pair again (the same
list in the same order, so the same draws), the error's name lists are cached, and a message or
summary check lowers its text once instead of once per phrase. Task building 937k -> 845k
instructions; per step, v1 with fresh seeds 205.7k -> 195.7k, legacy unchanged at 126.3k (no
legacy code changed), so by instructions v1/legacy 1.63 -> 1.55. Side by side on the 2-core
machine (1500 episodes, 5 repeats, before and after alternating): while a model-training job held
one core (load average 2.8-3.1, two rounds) v1/legacy with fresh seeds in CPU time went from
1.56-1.57 to 1.48-1.52 and original/ours from 4.11-4.28 to 4.19-4.24; on the quiet machine
afterwards (load 0.7-0.8, three rounds and two) v1/legacy from 1.56-1.58 to 1.52-1.54 and
original/ours from 4.18-4.24 to 4.21-4.25. So v1/legacy is just above its target of 1.5, and
legacy is where the third pass left it, short of 5.06 (it would need a step about a sixth
cheaper): what is left there is the hooks' own Python, about 100 function calls a step, while the
original runs much of its work in compiled code. For v1 what is left is building the task (about
845k instructions, a quarter of its cost: the world's draws, drift specs built as frozen
dataclasses, the plan redrawn until an honest agent can finish) and the error answers.

Fifth pass (issue 35; cProfile, then instruction counts under callgrind with PYTHONHASHSEED=0,
1500 episodes after 300 warm-up ones less a run of none, and callgrind over replays of one part
at a time: the policy's decisions, parsing, resets and their pieces): the policy is about 12k
instructions of a legacy step and parsing about 9k, but the step paid 2.6k more for freezing the
policy's parameters, which it built plain at every call; and a legacy reset was about 85k
instructions (13% of a step), 10k of it building the `Task` with fifteen keyword arguments
(about 400 instructions each to match by name). A ground-truth check counted in C instead of a
loop saved nothing measurable and was dropped: cProfile overstates call-heavy functions, so the
counts steered. Now the policy builds the parameters a task text decides frozen, once per text
(the Environment keeps frozen parameters as they are), and both rulesets build `Task`
positionally. Instructions per step: legacy 126.4k -> 122.3k, v1 with fresh seeds 192.0k ->
184.9k (by instructions v1/legacy 1.52 -> 1.51). Side by side on the 2-core machine with a
model-training job running but a load average of only 0.4-0.6 (1500 episodes, 5 repeats, the
commit before and after alternating, two rounds each): original/ours 4.17 and 4.24 before
against 4.33 and 4.36 after (CPU time the same); v1/legacy with fresh seeds 1.51 and 1.50 before
against 1.52 and 1.55 after (legacy 16.6 -> 16.0 us/step, v1 25.0 -> 24.3-24.9). Neither target
is met: legacy needs about 14% more off its step. What is left is the cost of Python itself,
spread thin: a call about 430 instructions, building an object through `__init__` about 1.7k, a
three-key dict about 1.1k, and a legacy step makes some 28 Python calls and a dozen containers.

Sixth pass (issue 35; instruction counts under callgrind as before, per C function as the
difference of a run with and without the timed episodes, replays of the policy and of parsing
alone, and opcode counts per Python line from a tracer): the snapshot check of every view,
`KEPT.issuperset(map(type, view.values()))`, cost 7.6k of a legacy step's 118k (a `type()` call
through `map` per part); a frozen dict costs about 2k instructions to build (its keyword dict,
the subclass's generic construction and later its deallocation) and a step built about seven;
parsing a policy's action was 9.5k, the policy's decision 12.2k; the legacy completion was
worked out again after every successful call (a search changes nothing); in v1 the unknown-
parameter error, the heuristic's commonest answer, was written and built at every call, and
`Draws.choice` built a bound method at every draw; and caches kept objects that the garbage
collector walks (v1's 256 tasks and 8192 slots: a fresh-seed v1 step ran about 5% faster
with collection off). Now a ruleset whose `observe` builds every part frozen says so
(`Ruleset.frozen_views`; tested for every built-in policy on every cell) and its views are
handed out unchecked; a frozen action whose sub-object is frozen cannot change, so a pipeline
keeps its parse and its record form (the built-in heuristics send frozen actions: the calls a
text decides and their inspections, reports and completions; a search through the step loop
edits every other kind of input between steps and checks each step against fresh plain data);
legacy keeps its completion until the state changes, starts each episode from its scenario's
precomputed view fields and completion, and copies the whole history into the
window while it fits; v1 keeps the unknown-parameter answer per call shape (frozen, shared),
64 tasks and 256 slots; the heuristic finds a text's first address from shortly before its
first "@". A helper's pass over v1's task building (drift specs without the frozen dataclass's
`__init__`, pairs closed per target, slot texts cached per time of day, shuffles in one frame,
a slotted `Builder`) took v1 from 185.8k to 173.4k on its own. Every v1 task, first view,
oracle and heuristic episode is unchanged (a digest over 8 scenarios and 802 seeds, salted
too). Instructions per step: legacy 122.2k -> 97.2k, v1 with fresh seeds 186.1k -> 146.3k
(v1/legacy 1.51 by instructions; the figures below were measured at 96.6k and 146.7k, before a
review took out two caches that saved 0.8k together). Side by side on the quiet 2-core machine (load 0.4-0.9;
1500 episodes, 5 repeats; the session's first commit and this one alternating): original/ours
4.32, 4.34, 4.39, 4.43 before against 5.39, 5.39, 5.34, 5.35 after (target 5.06: met); v1/legacy
with fresh seeds 1.55, 1.57, 1.58 before against 1.50, 1.48, 1.48 after (target 1.5: met, at
its edge; legacy 16.8-17.5 -> 13.3-14.6 us/step, v1 25.9-27.4 -> 19.9-21.6). The server path
(`benchmarks/server_latency.py`, 3 rounds, two runs each, same machine) did not move
measurably: its in-process step went from 12.5-13.0 to 11.5-11.6 us, but a step over the
WebSocket transport is about 0.4 ms either way (mean 0.372-0.410 ms before, 0.393-0.400 after;
against the echo environment 1.18-1.25x before, 1.19-1.28x after). Part of legacy's gain comes
from the heuristic keeping its actions frozen, which a policy that sends JSON text does not get:
before the kept parses and record forms, legacy was at 106.1k.

Absolute figures depend on the machine and its load, so the target is really a ratio to the
original. `--original DIR` takes a checkout of the original SchemaShift repository (it needs
pydantic v2, and httpx because its eval.py imports its HTTP client) and plays the same episode
mix through the original's in-process API too: its environment class and its
policy_aware_heuristic agent, reset(task_id, seed) / step(action, tokens_used=0). Passes of the
two alternate within each repeat, so both see the same machine conditions, and the script
prints both figures and the ratio original/ours.

`--ruleset legacy,v1` times several rulesets under the same policy, interleaved the same way,
and prints each figure and the ratio to the first (v1 type-checks every call and grades the
world after every write, so its steps cost more). Passes replay seeds 0.. (tasks cached after
the first); `--fresh-seeds` plays each episode on a new seed, which adds building the task
(v1 draws a world and a drift plan per seed).

    python benchmarks/step_speed.py [--episodes 3000] [--repeats 7] [--original DIR]
    python benchmarks/step_speed.py --ruleset legacy,v1 [--fresh-seeds]
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from schemashift.env import Environment
from schemashift.policies import make_policy
from schemashift.rollout.runner import Cell

WARMUP_EPISODES = 300

# A timed pass: plays `episodes` episodes, returns (seconds, steps).
Pass = Callable[[int], tuple[float, int]]


def one_pass(
    env: Environment, policy, scenarios: list[str], episodes: int, seeds: itertools.count | None = None
) -> tuple[float, int]:
    """Episodes on seeds 0, 1, ... (or, with `seeds`, on seeds never played before in this run)."""
    steps = 0
    start = getattr(policy, "start_episode", None)  # as the runner starts a policy on its cell
    started = time.perf_counter()
    for i in range(episodes):
        policy.reset()
        scenario, seed = scenarios[i % len(scenarios)], i if seeds is None else next(seeds)
        if start is not None:
            start(Cell(env.ruleset.name, scenario, seed))
        observation = env.reset(scenario, seed)
        while not observation["done"]:
            observation, _ = env.step(policy.act(observation))
            steps += 1
    return time.perf_counter() - started, steps


def original_pass(checkout: Path, scenarios: list[str]) -> Pass:
    """The same episode mix through the original's environment and agent, imported from `checkout`.

    The original is a flat repository (top-level `models`, `eval`, `server/environment.py`, ...),
    so its root goes first on sys.path.
    """
    sys.path.insert(0, str(checkout.resolve()))
    env = importlib.import_module("server.environment").SchemaShiftEnvironment()
    agent = importlib.import_module("eval").PolicyAwareHeuristicAgent()

    def run(episodes: int) -> tuple[float, int]:
        steps = 0
        started = time.perf_counter()
        for i in range(episodes):
            agent.reset()
            observation = env.reset(scenarios[i % len(scenarios)], seed=i)
            while not observation.done:
                observation, _ = env.step(agent.act(observation), tokens_used=0)
                steps += 1
        return time.perf_counter() - started, steps

    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ruleset", default="legacy", help="a ruleset, or a comma list timed side by side")
    parser.add_argument("--policy", default="policy_aware_heuristic")
    parser.add_argument("--episodes", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--fresh-seeds",
        action="store_true",
        help="play every episode on a new seed, so task construction is timed too (rulesets cache tasks)",
    )
    parser.add_argument(
        "--original",
        type=Path,
        metavar="DIR",
        help="a checkout of the original SchemaShift repository: also time it, interleaved with ours",
    )
    args = parser.parse_args()
    rulesets = args.ruleset.split(",")
    passes: dict[str, Pass] = {}
    for name in rulesets:
        env = Environment(name)
        label = "ours" if len(rulesets) == 1 else name
        seeds = itertools.count() if args.fresh_seeds else None
        passes[label] = partial(
            one_pass, env, make_policy(args.policy, name), env.ruleset.scenario_ids(), seeds=seeds
        )
    if args.original is not None:
        if (rulesets, args.policy) != (["legacy"], "policy_aware_heuristic"):
            parser.error("--original compares the legacy ruleset under policy_aware_heuristic only")
        passes["original"] = original_pass(args.original, Environment("legacy").ruleset.scenario_ids())

    for run in passes.values():
        run(WARMUP_EPISODES)
    per_step: dict[str, list[float]] = {name: [] for name in passes}
    cpu_per_step: dict[str, list[float]] = {name: [] for name in passes}
    steps: dict[str, int] = {}
    for repeat in range(args.repeats):
        # Alternate which one goes first, so neither always runs on the warmer (or busier) slot.
        order = list(passes.items()) if repeat % 2 == 0 else list(reversed(passes.items()))
        for name, run in order:
            cpu_started = time.process_time()
            seconds, steps[name] = run(args.episodes)
            cpu_per_step[name].append((time.process_time() - cpu_started) / steps[name] * 1e6)
            per_step[name].append(seconds / steps[name] * 1e6)
    if "original" in passes and len(set(steps.values())) > 1:
        sys.exit(f"the implementations played different numbers of steps per pass: {steps}")

    print(
        f"ruleset={args.ruleset} policy={args.policy} episodes/pass={args.episodes} "
        f"steps/pass={','.join(str(n) for n in steps.values())}"
    )
    for name, figures in per_step.items():
        label = f"{name:<9} " if len(passes) > 1 else ""
        print(
            f"{label}us per step: median {statistics.median(figures):.2f}  "
            f"min {min(figures):.2f}  max {max(figures):.2f}  "
            f"(CPU: median {statistics.median(cpu_per_step[name]):.2f})"
        )
    if len(rulesets) > 1:
        first = rulesets[0]
        base, cpu_base = statistics.median(per_step[first]), statistics.median(cpu_per_step[first])
        for name in rulesets[1:]:
            print(
                f"ratio {name}/{first}: medians {statistics.median(per_step[name]) / base:.2f}  "
                f"CPU medians {statistics.median(cpu_per_step[name]) / cpu_base:.2f}  (target <= 1.5)"
            )
    if "original" in per_step:
        ours, original = per_step["ours"], per_step["original"]
        cpu_ratio = statistics.median(cpu_per_step["original"]) / statistics.median(cpu_per_step["ours"])
        print(
            f"ratio original/ours: medians {statistics.median(original) / statistics.median(ours):.2f}  "
            f"mins {min(original) / min(ours):.2f}  CPU medians {cpu_ratio:.2f}  "
            f"(target >= {86 / 17:.2f}, i.e. 86/17)"
        )
    print("target: <= 17 us/step (goal 9); the original measured about 86 us/step on this kind of machine")


if __name__ == "__main__":
    main()
