"""`schemashift screenshots`: what a reader sees, in a real headless browser.

report.html opened from file:// and the Trackio dashboard served on 127.0.0.1 (with `--trace`,
also one failed episode's trace opened in its Traces tab), each as a PNG, with a check that the
page rendered: no console errors, every interactive chart drawn. A page that did not render is
an error (status 2), with the PNG kept to look at."""

from __future__ import annotations

import argparse

NAME = "screenshots"
HELP = "PNG screenshots of report.html (file://) and the Trackio dashboard (127.0.0.1), headless Chromium"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from schemashift.cli.options import add_path_options, add_trackio_project

    add_path_options(parser, {"--report": "report.html to open from file://"})
    add_path_options(parser, {"--trackio": "TRACKIO_DIR `report trackio` wrote, to serve and shoot"}, "DIR")
    add_trackio_project(parser)
    parser.add_argument(
        "--trace",
        action="store_true",
        help="with --trackio: also trace.png, one failed episode's trace opened in the Traces tab "
        "(v1's with a drift fired first)",
    )
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="folder for report.png, trackio.png (and trace.png)"
    )


def writes(args: argparse.Namespace) -> dict:
    """The folder this verb writes, locked while it runs (`cli.main`)."""
    return {"--out": args.out}


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from schemashift.cli import CliError
    from schemashift.report import ReportError, screenshots
    from schemashift.rollout.io import write_json
    from schemashift.runs.tracking import TRACKIO_PROJECT

    if not args.report and not args.trackio:
        raise CliError("nothing to shoot: give --report, --trackio or both")
    out = Path(args.out)
    shots = {}
    try:
        if args.report:
            page = Path(args.report).resolve()
            if not page.is_file():
                raise CliError(f"--report {args.report}: no such file")
            shots["report"] = screenshots.shoot(page.as_uri(), out / screenshots.REPORT_FILE)
        if args.trackio:
            project = args.project or TRACKIO_PROJECT
            if not (Path(args.trackio) / f"{project}.db").is_file():
                raise CliError(
                    f"--trackio {args.trackio}: no Trackio project {project} (run `report trackio`)"
                )
            shots["trackio"] = screenshots.shoot_dashboard(
                Path(args.trackio), out / screenshots.DASHBOARD_FILE, project
            )
            if args.trace:
                shots["trace"] = screenshots.shoot_trace(
                    Path(args.trackio), out / screenshots.TRACE_FILE, project
                )
        elif args.trace:
            raise CliError("--trace shoots a trace of the dashboard: give --trackio too")
    except ReportError as exc:
        raise CliError(str(exc)) from None
    summary = {
        name: {"png": shot.path.name, "console_errors": shot.console_errors, "charts": shot.charts}
        for name, shot in shots.items()
    }
    write_json(out / "screenshots.json", summary)
    problems = [f"{name}: console error: {e}" for name, shot in shots.items() for e in shot.console_errors]
    problems += [
        f"{name}: chart {c} not drawn"
        for name, shot in shots.items()
        for c, ok in shot.charts.items()
        if not ok
    ]
    if problems:
        raise CliError("the page did not render cleanly: " + "; ".join(problems))
    print(f"screenshots: wrote {', '.join(shot.path.name for shot in shots.values())} to {out}")
    return 0
