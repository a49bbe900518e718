"""`schemashift aggregate`: merge result cells into the aggregated tables (and the manifest)."""

from __future__ import annotations

import argparse

NAME = "aggregate"
HELP = "merge the episodes and drifts of result cells into two tables, optionally with a manifest"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from schemashift.cli.options import add_path_options

    parser.add_argument(
        "--cells",
        nargs="+",
        required=True,
        metavar="DIR",
        help="cell directories (holding episodes.parquet and drifts.parquet) or directories above them",
    )
    add_path_options(
        parser,
        {"--out-episodes": "merged episodes Parquet file", "--out-drifts": "merged drifts Parquet file"},
        required=True,
    )
    add_path_options(
        parser,
        {
            "--manifest": "also write this manifest (JSON) of what ran",
            "--expected": "JSON list of the expected cells: objects with ruleset, policy, scenario, seed, "
            "sample_index",
        },
    )
    parser.add_argument("--config-hash", default=None, help="config digest to record in the manifest")
    parser.add_argument(
        "--train",
        nargs="*",
        default=[],
        metavar="DIR",
        help="directories holding training runs' metrics.parquet (and go_no_go.json, run.json)",
    )
    add_path_options(
        parser,
        {
            "--out-training": "merged training metrics Parquet file",
            "--out-examples": "JSON file of three failed episodes per subject, as key steps from the "
            "trajectories",
        },
    )


OUTPUTS = ("out_episodes", "out_drifts", "manifest", "out_training", "out_examples")


def writes(args: argparse.Namespace) -> dict:
    """The folders the output files lie in, locked while it runs (`cli.main`)."""
    import os

    folders = {}
    for attribute in OUTPUTS:
        path = getattr(args, attribute)
        if path is not None:
            folders.setdefault(os.path.dirname(os.path.abspath(path)), "--" + attribute.replace("_", "-"))
    return {option: folder for folder, option in folders.items()}


def run(args: argparse.Namespace) -> int:
    import sys

    from schemashift.cli import CliError
    from schemashift.report import ReportError, aggregate
    from schemashift.report.load import cell_key, read_expected_cells

    def subject_of(cell):
        return cell_key(cell)[1]

    try:
        expected = read_expected_cells(args.expected) if args.expected is not None else None
        merged = aggregate.merge(args.cells, exclude=[args.out_episodes, args.out_drifts])
        training = aggregate.merge_training(args.train)
        manifest = aggregate.write(
            merged,
            args.out_episodes,
            args.out_drifts,
            args.manifest,
            expected,
            args.config_hash,
            training,
            args.out_training,
            args.out_examples,
        )
    except ReportError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write the aggregated tables: {exc}") from None
    statuses = merged.episodes.column("status").to_pylist()
    print(
        f"aggregated {merged.episodes.num_rows} episodes ({statuses.count('graded')} graded, "
        f"{statuses.count('infra_error')} infra_error) and {merged.drifts.num_rows} drift rows "
        f"from {len(merged.cells)} cell directories -> {args.out_episodes}, {args.out_drifts}"
    )
    if training.runs:
        print(f"training metrics of {len(training.runs)} run(s): {', '.join(sorted(training.runs))}")
    cells = manifest["cells"] if manifest else aggregate.cell_statuses(merged.episodes, expected)
    counts = aggregate.count_statuses(cells)
    if expected is not None:
        print(
            f"expected cells: {counts['graded']} graded, {counts['infra_error']} infra_error, "
            f"{counts['missing']} missing"
        )
        for cell in cells:
            if cell["status"] == "missing":
                arm = f" ({cell['arm']} arm)" if cell.get("arm") else ""  # only control cells name one
                print(
                    f"schemashift aggregate: missing cell {cell['ruleset']}/{subject_of(cell)}/"
                    f"{cell['scenario']} seed {cell['seed']} sample {cell['sample_index']}{arm}",
                    file=sys.stderr,
                )
    return 0
