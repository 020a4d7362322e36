"""The layers, read from the source: each imports only those below it (CONTRIBUTING.md, "Layout")."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_lake_provider.hooks.spark_job import imported_names, shipped_modules

PACKAGE = Path(__file__).resolve().parents[1] / "airflow_lake_provider"

# Layer of each part of the package, lowest first; a module may import its own layer and below.
LAYERS = {
    "exceptions": 0, "core": 1, "catalog_config": 1, "jars": 1, "lake": 2, "preflight": 2, "jobs": 2, "class_archive": 2,
    "steps": 3, "hooks": 3, "demo": 3, "links": 3, "assets": 3, "lineage": 3, "operators": 4, "sensors": 4, "triggers": 4,
    "task_group": 5, "dag_factory": 6, "plugins": 6, "get_provider_info": 0, "__init__": 0,
}
# Outside libraries a layer must not import: the pure floor and the jobs run without Airflow,
# the pure floor and the steps also without Spark.
FORBIDDEN = {"core": ("airflow", "pyspark"), "jobs": ("airflow",), "steps": ("airflow", "pyspark"),
             "exceptions": ("airflow", "pyspark")}


def _part(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_import_points_down_the_layers(path):
    part = _part(path)
    assert part in LAYERS, f"{part} has no layer: add it to LAYERS (and to the layout in CONTRIBUTING.md)"
    for name in imported_names(path):
        top = name.split(".")[0]
        assert top not in FORBIDDEN.get(part, ()), f"{path.name} ({part}) imports {name}"
        if top == "airflow_lake_provider" and name != "airflow_lake_provider":
            target = name.split(".")[1]
            assert LAYERS[target] <= LAYERS[part], f"{path.name} ({part}) imports {name}, a higher layer"


def test_the_jobs_archive_holds_the_pure_floor_and_nothing_of_airflow():
    shipped = {str(p.relative_to(PACKAGE)) for p in shipped_modules()}
    assert {"__init__.py", "jobs/main.py", "core/planning.py", "exceptions.py"} <= shipped
    assert not any(p.startswith(("hooks", "operators", "sensors", "triggers")) for p in shipped)
    for path in shipped_modules():
        assert not any(n.split(".")[0] == "airflow" for n in imported_names(path)), path


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def test_no_module_of_the_package_imports_itself_back_even_lazily():
    """The import graph has no cycle, counting imports inside functions: a lazy import hides a cycle,
    it does not remove it (core/contracts and core/quarantine had one)."""
    modules = {_module_name(path): path for path in MODULES}
    imports = {name: {n for n in imported_names(path, with_imported=True) if n in modules and n != name}
               for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, trail: tuple[str, ...]) -> None:
        if name in trail:
            raise AssertionError("import cycle: " + " -> ".join((*trail[trail.index(name):], name)))
        if name in done:
            return
        for target in sorted(imports[name]):
            visit(target, (*trail, name))
        done.add(name)

    for name in sorted(modules):
        visit(name, ())
