"""A resumable sweep (rollout/sweep.py) over real episodes: a rerun reuses exactly the cells kept
graded under the current record schema, whatever a killed run left (missing, torn, infra_error
or older-schema cells, in any mix a random search draws), and its pin refuses another
configuration or sweep."""

from __future__ import annotations

import json
import random

import pytest

from schemashift.policies import make_policy
from schemashift.rollout.backends import make_backend
from schemashift.rollout.records import RECORD_SCHEMA_VERSION
from schemashift.rollout.runner import SweepContext, cells, run_sweep
from schemashift.rollout.sweep import PROGRESS, ResumableSweep, SweepConflict, cell_name, in_cell_order

pytestmark = pytest.mark.timeout(120)

CELLS = cells(["legacy"], ["E1_onboard_new_hire", "M1_customer_escalation"], [0, 1, 2], 2)


@pytest.fixture(scope="module")
def played():
    backend = make_backend("inprocess")
    try:
        return run_sweep(backend, make_policy("oracle", "legacy"), CELLS, SweepContext("s", "oracle"))
    finally:
        backend.close()


def path_of(sweep: ResumableSweep, cell) -> object:
    return sweep.progress / cell_name(cell.ruleset, cell.scenario, cell.seed, cell.sample_index)


def test_only_graded_cells_of_this_schema_are_reused_whatever_a_killed_run_left(tmp_path, played):
    damage = ("kept", "missing", "torn", "infra_error", "older_schema", "not_json")
    rng = random.Random(0)
    for trial in range(25):
        sweep = ResumableSweep(tmp_path / f"t{trial}", "eval.json")
        expected = set()
        for position, (cell, result) in enumerate(zip(CELLS, played, strict=True)):
            sweep.persist(result)
            path = path_of(sweep, cell)
            kind = rng.choice(damage)
            if kind == "kept":
                expected.add(position)
            elif kind == "missing":
                path.unlink()
            elif kind == "torn":
                path.write_bytes(path.read_bytes()[: rng.randrange(1, path.stat().st_size)])
            elif kind == "not_json":
                path.write_text("\x00garbage")
            else:
                data = json.loads(path.read_text())
                if kind == "infra_error":
                    data["record"]["status"] = "infra_error"
                else:
                    data["record"]["record_version"] = RECORD_SCHEMA_VERSION - 1
                path.write_text(json.dumps(data))
        finished = sweep.finished(CELLS)
        assert set(finished) == expected, (trial, sorted(finished), sorted(expected))
        for position in finished:
            assert finished[position].record == played[position].record
        # the fresh results fill the other positions, in cell order
        fresh = [played[p] for p in range(len(CELLS)) if p not in finished]
        assert [r.record for r in in_cell_order(len(CELLS), finished, fresh)] == [r.record for r in played]


def test_the_pin_refuses_another_configuration_or_sweep(tmp_path):
    sweep = ResumableSweep(tmp_path, "eval.json")
    pinned = sweep.pin(None, "digest-a", {"policy": "p"})
    assert sweep.pin(None, "digest-a", {"policy": "p"}) == pinned
    assert sweep.pin(pinned["sweep_id"], "digest-a", {}) == pinned
    with pytest.raises(SweepConflict, match="another configuration"):
        sweep.pin(None, "digest-b", {})
    with pytest.raises(SweepConflict, match=f"belongs to sweep {pinned['sweep_id']}, not other"):
        sweep.pin("other", "digest-a", {})
    (tmp_path / "eval.json").write_text("{")
    with pytest.raises(SweepConflict, match="not valid JSON"):
        sweep.pin(None, "digest-a", {})


def test_leftover_temporaries_go_and_kept_cells_stay(tmp_path, played):
    sweep = ResumableSweep(tmp_path, "eval.json")
    sweep.persist(played[0])
    kept = path_of(sweep, CELLS[0])
    stale = kept.parent / f".{kept.name}.0123abcd.tmp"  # as io.atomic_write names its temporaries
    stale.write_text("half")
    sweep.remove_leftovers()
    assert kept.is_file() and not stale.exists()
    assert (tmp_path / PROGRESS).is_dir()
