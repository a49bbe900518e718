"""The `schemashift` command framework: verb discovery, dispatch, errors and exit statuses."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path

import pytest

import schemashift
from schemashift import cli
from schemashift.cli import CliError, discover_verbs, main


def _verb(name: str, run: Callable[[argparse.Namespace], int]) -> types.ModuleType:
    module = types.ModuleType(f"fake_verbs.{name}")
    module.NAME = name
    module.HELP = f"the {name} verb"
    module.add_arguments = lambda parser: parser.add_argument("--count", type=int, default=1)
    module.run = run
    return module


@pytest.fixture
def use_verbs(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    def install(*modules: types.ModuleType) -> None:
        monkeypatch.setattr(cli, "discover_verbs", lambda: {m.NAME: m for m in modules})

    return install


def test_help_lists_the_verbs(use_verbs: Callable[..., None], capsys: pytest.CaptureFixture[str]) -> None:
    use_verbs(_verb("alpha", lambda a: 0), _verb("beta", lambda a: 0))
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: schemashift")
    assert "alpha" in out and "the alpha verb" in out and "beta" in out and "the beta verb" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"schemashift {schemashift.__version__}"


def test_a_verb_gets_its_parsed_arguments_and_its_status_is_returned(use_verbs: Callable[..., None]) -> None:
    seen = []

    def run(args: argparse.Namespace) -> int:
        seen.append(args.count)
        return 3

    use_verbs(_verb("alpha", run))
    assert main(["alpha", "--count", "7"]) == 3
    assert seen == [7]


def test_a_cli_error_is_printed_with_the_verb_and_exits_2(
    use_verbs: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    def run(args: argparse.Namespace) -> int:
        raise CliError("no such thing")

    use_verbs(_verb("alpha", run))
    assert main(["alpha"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "schemashift alpha: error: no such thing\n"
    assert captured.out == ""


def test_keyboard_interrupt_exits_130(
    use_verbs: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    def run(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    use_verbs(_verb("alpha", run))
    assert main(["alpha"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_other_exceptions_are_internal_errors_with_a_traceback_on_request(
    use_verbs: Callable[..., None], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(args: argparse.Namespace) -> int:
        raise RuntimeError("bug")

    use_verbs(_verb("alpha", run))
    assert main(["alpha"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("schemashift alpha: error: internal error, RuntimeError: bug (a bug: please report")
    assert "Traceback" not in err
    monkeypatch.setenv("SCHEMASHIFT_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="bug"):
        main(["alpha"])


@pytest.mark.parametrize(
    "exc, message",
    [
        (FileNotFoundError(2, "No such file or directory", "x.json"), "No such file or directory: 'x.json'"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "input is not valid text"),
        (RecursionError("maximum recursion depth exceeded"), "input is nested too deeply to read"),
        (
            ModuleNotFoundError("No module named 'seaborn'", name="seaborn"),
            "pip install 'schemashift[workflow]'",
        ),
        (
            ModuleNotFoundError("No module named 'zzz'", name="zzz"),
            "the Python package 'zzz' is not installed",
        ),
    ],
)
def test_errors_of_bad_input_exit_2_with_one_line(
    use_verbs: Callable[..., None], capsys: pytest.CaptureFixture[str], exc: Exception, message: str
) -> None:
    def run(args: argparse.Namespace) -> int:
        raise exc

    use_verbs(_verb("alpha", run))
    assert main(["alpha"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("schemashift alpha: error: ") and message in lines[0]


@pytest.mark.parametrize("argv", [[], ["nosuchverb"], ["alpha", "--count", "x"], ["alpha", "--bogus"]])
def test_usage_errors_exit_2(
    use_verbs: Callable[..., None], capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    use_verbs(_verb("alpha", lambda a: 0))
    assert main(argv) == 2
    assert "error:" in capsys.readouterr().err


def _package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, files: dict[str, str]
) -> types.ModuleType:
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    for filename, text in files.items():
        (root / filename).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


VERB_SOURCE = """
NAME = {name!r}
HELP = "help for {name}"
def add_arguments(parser):
    pass
def run(args):
    return 0
"""


def test_discovery_lists_public_modules_of_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _package(
        tmp_path,
        monkeypatch,
        "verbs_ok",
        {
            "zeta.py": VERB_SOURCE.format(name="zeta"),
            "alpha_mod.py": VERB_SOURCE.format(name="alpha"),
            "_helpers.py": "raise AssertionError('private modules are not verbs')",
        },
    )
    verbs = discover_verbs(package)
    assert list(verbs) == ["alpha", "zeta"]
    assert verbs["alpha"].__name__ == "verbs_ok.alpha_mod"


def test_discovery_rejects_an_incomplete_verb_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = _package(tmp_path, monkeypatch, "verbs_incomplete", {"half.py": "NAME = 'half'\nHELP = 'x'\n"})
    with pytest.raises(TypeError, match="verbs_incomplete.half lacks add_arguments, run"):
        discover_verbs(package)


def test_discovery_rejects_a_name_used_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = _package(
        tmp_path,
        monkeypatch,
        "verbs_twice",
        {"a.py": VERB_SOURCE.format(name="same"), "b.py": VERB_SOURCE.format(name="same")},
    )
    with pytest.raises(TypeError, match="verb 'same' is defined by both verbs_twice.a and verbs_twice.b"):
        discover_verbs(package)


def test_the_shipped_verbs_follow_the_interface() -> None:
    for name, module in discover_verbs().items():
        assert module.NAME == name
        assert isinstance(module.HELP, str) and module.HELP and "\n" not in module.HELP
        assert callable(module.add_arguments) and callable(module.run)
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)


def test_the_installed_console_script_runs() -> None:
    script = Path(sys.executable).with_name("schemashift")
    if not script.exists():
        pytest.skip("schemashift is not installed into this interpreter's environment")
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout.strip() == f"schemashift {schemashift.__version__}"
