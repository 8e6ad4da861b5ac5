"""pyproject.toml declares what tsattn imports, with the lower bounds the suite is run with."""
import ast
import importlib.metadata
import pathlib
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _imported_top_level_modules() -> set[str]:
    names = set()
    for path in (ROOT / "tsattn").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"tsattn", "__future__"}


def test_every_imported_distribution_is_declared():
    declared = {canonicalize_name(Requirement(r).name) for r in _project()["dependencies"]}
    providers = importlib.metadata.packages_distributions()
    missing = {}
    for module in sorted(_imported_top_level_modules()):
        dists = {canonicalize_name(d) for d in providers.get(module, [module])}
        if not dists & declared:
            missing[module] = sorted(dists)
    assert not missing, f"imported by tsattn but not in [project.dependencies]: {missing}"


def test_lower_bounds_are_the_tested_versions():
    pins = _pins()
    requirements = _project()["dependencies"] + _project()["optional-dependencies"]["dev"]
    wrong = {}
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        lower = [s.version for s in req.specifier if s.operator == ">="]
        if name not in pins or lower != [pins[name]]:
            wrong[req.name] = (str(req.specifier), pins.get(name, "not pinned in constraints.txt"))
    assert not wrong, f"lower bound != the version constraints.txt pins (and the suite runs with): {wrong}"
