"""The cell arguments that `run` and `eval` share (`--ruleset`, `--scenarios`, `--seeds`,
`--split`, `--compositions`, `--samples`, `--arms`, `--salt-id`) and the cells they select
(`rollout.selection`); the path options of the report verbs (`add_path_options`) and their
Trackio `--project`.
"""

from __future__ import annotations

from schemashift.cli import CliError
from schemashift.rollout.selection import CellSelectionError, parse_arms, select_cells


def add_cell_arguments(parser) -> None:
    """--ruleset, --scenarios, --seeds, --split, --compositions, --samples, --arms and --salt-id
    (run and eval)."""
    parser.add_argument("--ruleset", default="legacy", help="ruleset to play (default: %(default)s)")
    parser.add_argument(
        "--scenarios", default="all", help="'all' or a comma list of scenario ids (default: %(default)s)"
    )
    parser.add_argument(
        "--seeds",
        default=None,
        help="seeds as a range '0-4', a comma list '0,2,5' or both '0-2,7' "
        "(default: the first 5 seeds of --split, else 0-4)",
    )
    parser.add_argument(
        "--split",
        default=None,
        help="seed split of rulesets that have them (v1: train, test); --seeds must then lie in it",
    )
    parser.add_argument(
        "--compositions",
        action="store_true",
        help="with --scenarios all, also play the ruleset's generated cross-tool compositions",
    )
    parser.add_argument("--samples", type=int, default=1, help="episodes per (scenario, seed) (default: 1)")
    parser.add_argument(
        "--arms",
        default="drift",
        help="comma list of the arms each cell is played in: drift (its drift plan), control (the same "
        "task with no drift); an arm the ruleset does not play is an error (legacy: drift only) "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--salt-id",
        default=None,
        help="the salt this run must draw held-out test tasks under, by its recorded id ('none': no "
        "salt); the run refuses to start where SCHEMASHIFT_SALT gives another (default: not checked)",
    )


def cells_of(args, ruleset) -> tuple[list[str], list[int]]:
    """select_cells on a verb's parsed cell arguments, after checking `--salt-id`."""
    if args.samples < 1:
        raise CliError(f"--samples must be at least 1, got {args.samples}")
    if args.salt_id is not None:
        found = ruleset.salt_id() or "none"
        if args.salt_id != found:
            raise CliError(
                f"--salt-id {args.salt_id}: this process draws {ruleset.name}'s tasks under salt id {found} "
                "(set SCHEMASHIFT_SALT to the held-out salt, or leave it unset for none)"
            )
    try:
        return select_cells(ruleset, args.scenarios, args.seeds, args.split, args.compositions)
    except CellSelectionError as exc:
        raise CliError(str(exc)) from None


def arms_of(args, ruleset) -> list[str]:
    """The arms of a verb's `--arms`, checked against what the ruleset plays."""
    try:
        return parse_arms(args.arms, ruleset)
    except CellSelectionError as exc:
        raise CliError(str(exc)) from None


def add_path_options(parser, helps: dict[str, str], metavar: str = "FILE", required: bool = False) -> None:
    """One option per flag -> help in `helps`, each a path shown as `metavar`; None unless given
    (or `required`)."""
    for flag, help_text in helps.items():
        parser.add_argument(flag, required=required, default=None, metavar=metavar, help=help_text)


def add_trackio_project(parser) -> None:
    """--project: the Trackio project a Trackio folder holds (`report trackio`, `screenshots`)."""
    parser.add_argument(
        "--project", default=None, metavar="NAME", help="Trackio project (default: schemashift)"
    )
