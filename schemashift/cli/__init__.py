"""The `schemashift` command. Each verb is a module in `schemashift.cli.verbs`, found by listing.

A verb module defines NAME (str), HELP (one line), add_arguments(parser) and run(args) -> int,
and imports heavy dependencies inside `run` only, so `schemashift --help` stays fast. Adding a
verb means adding a module; nothing here changes. A verb that writes folders also defines
writes(args) -> {option: folder}: `main` holds each folder's lock (`rollout.lock`) while the verb
runs, so a second writer into one folder is refused at once with a line naming the holder
(BUILDS_FOLDER_BY_RENAME = True puts the lock beside a folder the verb renames into place).

Whatever a verb raises ends as one line, `schemashift <verb>: error: <message>`, and a non-zero
status, never a traceback: CliError and the errors that bad input causes (unreadable or
missing files, text that is not UTF-8, input nested too deeply, a missing optional dependency)
exit with 2; anything else is a bug, reported as an internal error with status 1 (set
SCHEMASHIFT_TRACEBACK=1 to see its traceback). `add_arguments` reads no environment and no
files, so `--help` works whatever the environment holds.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType

import schemashift

VERB_ATTRIBUTES = ("NAME", "HELP", "add_arguments", "run")
INTERRUPTED = 130


class CliError(Exception):
    """A failure to report to the user as `schemashift <verb>: error: <message>` (exit status 2)."""


def discover_verbs(package: ModuleType | None = None) -> dict[str, ModuleType]:
    """Verb name -> module for every public module of `package` (default: schemashift.cli.verbs).

    A module that lacks part of the verb interface, or a NAME used twice, is a programming error
    and raises TypeError naming the module.
    """
    if package is None:
        from schemashift.cli import verbs as package
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        missing = [attr for attr in VERB_ATTRIBUTES if not hasattr(module, attr)]
        if missing:
            raise TypeError(f"verb module {module.__name__} lacks {', '.join(missing)}")
        if module.NAME in found:
            first = found[module.NAME].__name__
            raise TypeError(f"verb {module.NAME!r} is defined by both {first} and {module.__name__}")
        found[module.NAME] = module
    return found


def build_parser(verbs: dict[str, ModuleType]) -> argparse.ArgumentParser:
    summary = (schemashift.__doc__ or "").partition("\n")[0]
    parser = argparse.ArgumentParser(prog="schemashift", description=summary)
    parser.add_argument("--version", action="version", version=f"schemashift {schemashift.__version__}")
    sub = parser.add_subparsers(title="verbs", dest="verb", metavar="VERB", required=True)
    for name in sorted(verbs):
        module = verbs[name]
        verb_parser = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(verb_parser)
        verb_parser.set_defaults(
            _run=module.run,
            _writes=getattr(module, "writes", None),
            _beside=getattr(module, "BUILDS_FOLDER_BY_RENAME", False),
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]), run the verb and return the exit status."""
    parser = build_parser(discover_verbs())
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    try:
        with _writer_locks(args):
            return args._run(args)
    except KeyboardInterrupt:
        print(f"schemashift {args.verb}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - every failure is reported the same way
        status, message = describe_error(exc)
        if status == INTERNAL_ERROR and os.environ.get("SCHEMASHIFT_TRACEBACK"):
            raise
        print(f"schemashift {args.verb}: error: {message}", file=sys.stderr)
        return status


@contextlib.contextmanager
def _writer_locks(args: argparse.Namespace) -> Iterator[None]:
    """Hold the lock of every folder the verb writes (its `writes(args)`: option -> folder) while
    it runs, so a second writer into one of them is refused at once, naming the holder. A path
    that exists and is not a folder is left to the verb to refuse."""
    from schemashift.rollout.lock import FolderBusy, describe, hold

    folders = args._writes(args) if args._writes is not None else {}
    label = " ".join(filter(None, [args.verb, getattr(args, "part", None)]))
    with contextlib.ExitStack() as stack:
        for option, folder in sorted(folders.items(), key=lambda item: str(item[1])):
            if folder is None or (os.path.exists(folder) and not os.path.isdir(folder)):
                continue
            try:
                stack.enter_context(hold(folder, label, beside=args._beside))
            except FolderBusy as exc:
                raise CliError(
                    f"{option} {folder} is being written by {describe(exc.holder)}; wait for it "
                    "to finish or write elsewhere"
                ) from None
        yield


BAD_INPUT = 2
INTERNAL_ERROR = 1


#: top-level module -> the optional dependency group (pyproject.toml) that installs it
EXTRAS = {
    **dict.fromkeys(
        ("pandas", "matplotlib", "seaborn", "jsonschema", "yaml", "snakemake", "altair", "vl_convert"),
        "workflow",
    ),
    **dict.fromkeys(
        ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers", "trackio"), "train"
    ),
    **dict.fromkeys(
        ("fastapi", "uvicorn", "pydantic", "requests", "websockets", "httpx", "fastmcp"), "server"
    ),
    "unsloth": "unsloth",
    "vllm": "vllm",
}


def describe_error(exc: Exception) -> tuple[int, str]:
    """The exit status and one-line message of an exception a verb raised."""
    if isinstance(exc, CliError):
        return BAD_INPUT, str(exc)
    if isinstance(exc, ModuleNotFoundError):
        top = (exc.name or "").partition(".")[0]
        extra = EXTRAS.get(top)
        hint = f"; install the {extra!r} extra: pip install 'schemashift[{extra}]'" if extra else ""
        return BAD_INPUT, f"the Python package {top!r} is not installed{hint}"
    if isinstance(exc, OSError):
        return BAD_INPUT, str(exc)
    if isinstance(exc, UnicodeError):
        return BAD_INPUT, f"input is not valid text: {exc}"
    if isinstance(exc, RecursionError):
        return BAD_INPUT, "input is nested too deeply to read"
    return INTERNAL_ERROR, (
        f"internal error, {type(exc).__name__}: {exc} (a bug: please report it; "
        "SCHEMASHIFT_TRACEBACK=1 shows the traceback)"
    )
