"""`schemashift report tables|figures|html|trackio`: the summary tables, the figures, the HTML
report and the Trackio dashboard project.

Each part is its own command so that a workflow reruns only the part whose code or inputs changed;
`html` assembles what `tables` and `figures` wrote; `trackio` writes a local Trackio project
(`<DIR>/schemashift.db`, served by `TRACKIO_DIR=DIR trackio show`).
"""

from __future__ import annotations

import argparse

NAME = "report"
HELP = "write the summary tables, the figures or the HTML report from aggregated results"

PARTS = {
    "tables": "all tables: overview, coverage, A-E, legacy vs v1, verdicts, pass^k... (CSV, Markdown)",
    "figures": "overview, learning and training curves, ablations, drift, coverage, efficiency (PNG and PDF)",
    "html": "a self-contained report.html: the answer first, then details, tables, figures, provenance",
    "trackio": "a local Trackio project (a TRACKIO_DIR): one run per training run, eval and training metrics",
}

#: the optional inputs every part reads, besides --episodes: option -> help
INPUTS = {
    "--drifts": "aggregated drifts Parquet file",
    "--training-metrics": "training metrics Parquet file",
    "--manifest": "manifest.json written by `schemashift aggregate`",
    "--config": "workflow config (YAML or JSON): models, training runs",
    "--examples": "failed-episode examples `aggregate` wrote",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from schemashift.cli.options import add_path_options, add_trackio_project

    parts = parser.add_subparsers(title="parts", dest="part", metavar="PART", required=True)
    for name, help_text in PARTS.items():
        part = parts.add_parser(name, help=help_text, description=help_text)
        add_path_options(part, {"--episodes": "aggregated episodes Parquet file"}, required=True)
        add_path_options(part, INPUTS)
        part.add_argument("--out", required=True, metavar="DIR", help="output directory")
        if name == "tables":
            add_path_options(part, {"--summary": "summary.md path (default: DIR/summary.md)"})
        if name == "trackio":
            figures = "directory `report figures` wrote: its interval figures are attached as media"
            add_path_options(part, {"--figures": figures}, "DIR")
            add_trackio_project(part)
            part.add_argument(
                "--cells",
                nargs="*",
                default=[],
                metavar="DIR",
                help="result folders (or folders above them) whose episodes become traces: every "
                "failed one and a sample of the successful ones (all of a small run)",
            )
            part.add_argument(
                "--publish",
                default=None,
                metavar="SPACE_ID",
                help="after the local export, sync it to this Hugging Face Space (needs HF_TOKEN)",
            )
        if name in ("tables", "figures", "html", "trackio"):
            part.add_argument(
                "--bootstrap-samples",
                type=int,
                default=2000,
                metavar="B",
                help="bootstrap resamples (efficiency savings, figure whiskers; default: %(default)s)",
            )
            part.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
        if name == "html":
            written = {
                "--tables": "directory `report tables` wrote (tables.json)",
                "--figures": "directory `report figures` wrote",
            }
            add_path_options(part, written, "DIR", required=True)


def writes(args: argparse.Namespace) -> dict:
    """The folder this verb writes, locked while it runs (`cli.main`)."""
    return {"--out": args.out}


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    # every part reads through pandas (the workflow extra): fail here, naming it, if it is missing
    import pandas  # noqa: F401

    from schemashift.cli import CliError
    from schemashift.report import ReportError, load

    if getattr(args, "bootstrap_samples", 1) < 1:
        raise CliError(f"--bootstrap-samples must be at least 1, got {args.bootstrap_samples}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {args.out} exists and is not a directory")
    try:
        episodes = load.episodes_frame(args.episodes)
        manifest = load.read_json(args.manifest, "manifest") if args.manifest else None
        from schemashift.report.analysis import Analysis

        analysis = Analysis(
            episodes,
            manifest,
            load.read_config(args.config),
            load.drifts_frame(args.drifts) if args.drifts else None,
            load.training_frame(args.training_metrics) if args.training_metrics else None,
            load.read_examples(args.examples),
            args.bootstrap_samples,
            args.seed,
        )
        if args.part == "tables":
            from schemashift.report.tables import build
            from schemashift.report.tables.format import write

            written = [str(p) for p in write(build(analysis), out, args.summary)]
        elif args.part == "figures":
            from schemashift.report import figures

            index = figures.write(analysis, out)
            written = [str(out / f"{e['stem']}.{fmt}") for e in index for fmt in figures.FORMATS]
        elif args.part == "trackio":
            from schemashift.report import dashboard
            from schemashift.runs.tracking import DEFAULT_URL, TRACKIO_PROJECT

            project = args.project or TRACKIO_PROJECT
            from schemashift.report.traces import read_trajectories

            trajectories = read_trajectories(args.cells)
            written = [str(dashboard.export(analysis, out, args.figures, project, trajectories))]
            if args.publish:
                dashboard.publish(out, args.publish, project)
            runs = {run["name"]: run["group"] for run in dashboard.plan(analysis, None, project)["runs"]}
            print(f"serve it offline: TRACKIO_DIR={out} trackio show --project {project}; preset views:")
            for view, link in dashboard.preset_views(DEFAULT_URL, project, runs).items():
                print(f"  {view}: {link}")
        else:
            from schemashift.report import html

            written = [str(html.write(analysis, args.tables, args.figures, out))]
    except ReportError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write the {args.part}: {exc}") from None
    print(f"report {args.part}: wrote {len(written)} file(s) to {args.out}")
    return 0
