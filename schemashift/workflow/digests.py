"""Code digests from real imports: what a rule's job imports decides what reruns it.

A rule's `code` param is the digest of the package modules its job can import: the transitive
closure, by static analysis (`ast`), of the imports of its entry modules, function-level imports
included (verbs import their dependencies inside `run`). Three dynamic imports of the package are
followed too: `importlib.import_module("schemashift...")` and any string constant naming a package
module (the model policies' "module:function" registry), and a package that lists its own
`__path__` with pkgutil (the ruleset registry) imports its subpackages. `if TYPE_CHECKING:` blocks
are left out: they never run.

The graph is built once per process and root; a job imports the standard library and third-party
modules too, which `third_party` lists (tests check them against the rules' conda envs).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PACKAGE = "schemashift"
_MODULE_STRING = re.compile(rf"{PACKAGE}(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?")
CLI = f"{PACKAGE}.cli.__main__"
DASHBOARD = f"{PACKAGE}.report.dashboard"


@dataclass(frozen=True)
class Job:
    """A job's entry: `python -m schemashift.cli <verb>`, less the modules of its verb's other
    parts (`report tables` never imports the figures or the HTML page, `report figures` neither
    the tables nor the page). `plays` lists the policy modules the job asks the policy registry
    for: the registry names every policy's module but imports only the one asked for."""

    verb: str
    skip: tuple[str, ...] = ()
    plays: tuple[str, ...] = ()

    @property
    def entries(self) -> tuple[str, ...]:
        return (CLI, f"{PACKAGE}.cli.verbs.{self.verb}", *self.plays)


def _registry() -> tuple[dict[str, str], tuple[str, ...]]:
    """The policy registry's modules: built-in policy -> its module, and the model policies'."""
    from schemashift.policies import BUILTIN, PREFIXES, policy_module

    return {name: policy_module(name) for name in BUILTIN}, tuple(
        target.partition(":")[0] for target in PREFIXES.values()
    )


def jobs() -> dict[str, Job]:
    """What each rule's job runs: `cells/<policy>` plays one built-in policy (`run`), `eval` the
    model policies; `code_digests` gives each its digest."""
    builtin, models = _registry()
    return {
        **{f"cells/{name}": Job("run", plays=(module,)) for name, module in builtin.items()},
        "eval": Job("eval", plays=models),
        "tiny_model": Job("tiny_model"),
        "pretrained_model": Job("pretrained_model"),
        "train": Job("train"),
        "aggregate": Job("aggregate"),
        "tables": Job("report", skip=(f"{PACKAGE}.report.figures", f"{PACKAGE}.report.html", DASHBOARD)),
        "figures": Job("report", skip=(f"{PACKAGE}.report.tables", f"{PACKAGE}.report.html", DASHBOARD)),
        "html": Job("report", skip=(DASHBOARD,)),
        "trackio": Job("report", skip=(f"{PACKAGE}.report.tables", f"{PACKAGE}.report.html")),
        "screenshots": Job("screenshots"),
    }


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(tree: ast.AST):
    """Every node, less the bodies of `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def scan(name: str, source: bytes, is_package: bool) -> dict:
    """What module `name` names: `targets` (absolute dotted names it imports, or may: `from a
    import b` gives a and a.b), and whether it lists its own `__path__`."""
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    lists_path = False
    for node in _nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            stem = node.module or ""
            if node.level:
                base = package.split(".")
                stem = ".".join(base[: len(base) - node.level + 1] + ([stem] if stem else []))
            targets.add(stem)
            targets.update(f"{stem}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _MODULE_STRING.fullmatch(node.value):
                targets.add(node.value.partition(":")[0])
        elif isinstance(node, ast.Call) and is_package:
            lists_path = lists_path or _lists_own_path(node)
    return {"targets": sorted(targets - {""}), "lists_path": lists_path}


@dataclass(frozen=True)
class Module:
    path: Path
    imports: frozenset[str]  # package modules
    third_party: frozenset[str]  # top-level names of everything else it imports


class ImportGraph:
    """The package's modules under `root` (the directory holding `schemashift/`) and their imports.

    Parsing the package takes most of a second, so each file's scan is kept in `cache` (a JSON
    file) under the digest of its name and content; a changed file is parsed again.
    """

    def __init__(self, root: Path, cache: Path | None = None) -> None:
        self.root = Path(root)
        self.names = {self._name(path): path for path in sorted((self.root / PACKAGE).rglob("*.py"))}
        stored = _read_cache(cache)
        scans = {}
        self.modules: dict[str, Module] = {}
        for name, path in self.names.items():
            source = path.read_bytes()
            key = hashlib.sha256(name.encode() + b"\0" + source).hexdigest()
            scans[key] = stored.get(key) or scan(name, source, path.name == "__init__.py")
            self.modules[name] = self._module(name, path, scans[key])
        if cache is not None and scans.keys() != stored.keys():
            _write_cache(cache, scans)

    def _name(self, path: Path) -> str:
        parts = list(path.relative_to(self.root).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    def _resolve(self, name: str) -> set[str]:
        """`name` and the packages above it, as far as they are package modules."""
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & self.names.keys()

    def _module(self, name: str, path: Path, scanned: dict) -> Module:
        imports: set[str] = set()
        third: set[str] = set()
        for target in scanned["targets"]:
            if target == PACKAGE or target.startswith(f"{PACKAGE}."):
                imports.update(self._resolve(target))
            else:
                third.add(target.partition(".")[0])
        if scanned["lists_path"]:
            prefix = f"{name}."
            imports.update(m for m in self.names if m.startswith(prefix) and "." not in m[len(prefix) :])
        return Module(path, frozenset(imports - {name}), frozenset(third))

    def closure(
        self,
        entries: tuple[str, ...],
        skip: tuple[str, ...] = (),
        lazy: frozenset[tuple[str, str]] = frozenset(),
    ) -> list[str]:
        """Package modules the entries import, directly or not, in name order; a module in `skip`
        is left out with its submodules, and an import edge in `lazy` (importer, imported) is not
        followed (a registry that imports what it names only when asked for it)."""
        seen: set[str] = set()
        todo = [name for entry in entries for name in self._resolve(entry)]
        while todo:
            name = todo.pop()
            if name in seen or any(name == part or name.startswith(f"{part}.") for part in skip):
                continue
            seen.add(name)
            todo.extend(target for target in self.modules[name].imports if (name, target) not in lazy)
        return sorted(seen)

    def third_party(self, modules: list[str]) -> set[str]:
        """Top-level names of the non-package modules these modules import (stdlib included)."""
        return set().union(*(self.modules[name].third_party for name in modules))

    def digest(self, modules: list[str]) -> str:
        digest = hashlib.sha256()
        for name in modules:
            path = self.names[name]
            digest.update(str(path.relative_to(self.root)).encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()[:16]


def _lists_own_path(node: ast.Call) -> bool:
    """`pkgutil.iter_modules(__path__)` (or walk_packages): a registry that lists itself."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return (
        called in ("iter_modules", "walk_packages")
        and bool(node.args)
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "__path__"
    )


def _read_cache(path: Path | None) -> dict:
    try:
        return json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        return {}


def _write_cache(path: Path, scans: dict) -> None:
    """Atomically, so that jobs parsing at once never read half a file; a failure only costs time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as f:
            json.dump(scans, f)
        os.replace(f.name, path)
    except OSError:
        pass


@cache
def import_graph(root: Path, cache: Path | None = None) -> ImportGraph:
    """The graph of `root`, built once per process."""
    return ImportGraph(root, cache)


def closure(graph: ImportGraph, job: Job) -> list[str]:
    """The package modules `job` imports. The registry's edges to the policy modules it names
    are not followed (it imports only the one asked for, which `job.plays` names): editing one
    policy reruns only its cells, and a policy that imports another, as scripted does
    policy_aware, takes it along."""
    builtin, models = _registry()
    registry = f"{PACKAGE}.policies"
    lazy = frozenset((registry, module) for module in (*builtin.values(), *models))
    return graph.closure(job.entries, job.skip, lazy)


def code_digests(graph: ImportGraph) -> dict[str, str]:
    """Rule (of `jobs()`) -> digest of the package modules its job imports."""
    return {rule: graph.digest(closure(graph, job)) for rule, job in jobs().items()}


def tree_digest(root: Path, *paths: str) -> str:
    """Digest of files and every .py under directories: what an image build copies."""
    digest = hashlib.sha256()
    for path in paths:
        top = Path(root) / path
        for file in sorted(top.rglob("*.py")) if top.is_dir() else [top]:
            if file.exists():
                digest.update(str(file.relative_to(root)).encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()[:16]
