"""Success count of each v1 junk pair (tests/env/v1/v1_junk.py) at one random placement per seed,
`--seeds N` fresh seeds per scenario (default 30), played in the drift arm: before the damage
class most pairs succeeded, now none does.

    python benchmarks/v1_junk.py --seeds 50
"""

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "env" / "v1"))
from v1_junk import JUNK_PAIRS, honest_intents, placements, play_intents, with_junk
from v1_support import RULESET, SCENARIOS

from schemashift.env import Environment

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--seeds", type=int, default=30, help="fresh seeds per scenario (default: 30)")
N = parser.parse_args().seeds
rng = random.Random(777001)
env = Environment(RULESET)
totals = {p.__name__: [0, 0] for p in JUNK_PAIRS}
honest_ok = [0, 0]
for scenario in SCENARIOS:
    seeds = rng.sample(range(20000, 90000), N)
    for seed in seeds:
        task = RULESET.build_task(scenario, seed)
        s = play_intents(scenario, seed, honest_intents(task), env)
        honest_ok[0] += s["success"]
        honest_ok[1] += 1
        for junk in JUNK_PAIRS:
            pair = junk(task, rng)
            if pair is None:
                continue
            places = placements(task, pair)
            if not places:
                continue
            i, j = rng.choice(places)
            s = play_intents(scenario, seed, with_junk(task, pair, i, j), env)
            totals[junk.__name__][0] += s["success"]
            totals[junk.__name__][1] += 1
print("honest", honest_ok)
for k, (a, b) in totals.items():
    print(f"{k}: {a}/{b} succeed")
