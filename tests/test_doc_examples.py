"""Every ```python block of docs/ runs, so a doc example that stops working fails the suite.

Each block is executed as a user who copies it would run it: alone, in a fresh module, on the
embedded lake. Its imports must resolve, the DAGs it defines must construct with the tasks listed
in ``EXPECTED`` below, and a block that defines no DAG (a hook call, an operator built on its own)
must run to its end. One DAG of every page that has one then runs through ``dag.test()`` on small
real tables (``RUNS``), with the task states and the spark-submits it should take.

The convention for doc writers:

* A ```python block is **complete**: its imports, and its DAG (``with DAG(...):``) when it builds
  tasks, so it runs when pasted into a file of the dags folder. Name the tables the way the other
  examples do (``db.events``); the tests create them.
* A block that cannot run here (a machine's own paths, a cluster, a call's shape with ``...``) is
  marked by an HTML comment on the line before its fence, which GitHub does not render::

      <!-- example: skip: the paths are an example user's home -->

  Its imports are still checked.
* A block that goes on with the block before it (an example split by prose) is marked
  ``<!-- example: continues -->``: it runs in the module of the previous block of its page.
* A new block needs its entry in ``EXPECTED`` (its DAGs and their tasks); a new page with a DAG,
  its entry in ``RUNS``. The tests say so when one is missing.

Cost: most runs point at tables that need no work, so the Spark steps have nothing to do and
start no JVM; the clean step starts one only when a file under the table is older than its orphan
floor (none of these new tables), the restore always does; the rewrite page compacts a real table.

A failing block's traceback names the page and line (``docs/operators/clean.md:42``); a run's file
(``<dags folder>/doc_examples/<page>.py``) keeps the page's line numbers too.
"""

from __future__ import annotations

import ast
import contextlib
import re
import shutil
import signal
import sys
import textwrap
import threading
import types
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from airflow.listeners import hookimpl

from airflow_lake_provider.core.health import table_health
from conftest import DAGS_FOLDER
from demo_data import create_events_table

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE_OPEN, FENCE_CLOSE = "```python", "```"
MARKER = re.compile(r"^<!--\s*example:\s*(?P<kind>skip|continues)\s*(?::\s*(?P<reason>.*?))?\s*-->$")
#: A table name as the examples write it: a quoted ``namespace.table``.
TABLE_NAME = re.compile(r"""["']([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*)["']""")
#: A run (a few seconds, 15 s with a spark-submit) that takes this long is waiting for something that never comes.
RUN_DEADLINE_SECONDS = 180


# -- the blocks -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    page: str  # relative to docs/
    index: int  # the page's n-th python block, from 0
    line: int  # the line of its first code line in the page, from 1
    code: str
    skip: str | None = None  # the reason given in <!-- example: skip: ... -->
    continues: "Block | None" = None  # the block it goes on from (<!-- example: continues -->)

    @property
    def id(self) -> str:
        return f"{self.page}[{self.index}]"

    def chain(self) -> list[Block]:
        """This block and the blocks it continues, first first."""
        return [*(self.continues.chain() if self.continues else []), self]

    def source(self) -> str:
        """The code of the chain, each block at its own line numbers of the page (tracebacks name them)."""
        lines: list[str] = []
        for block in self.chain():
            lines += [""] * (block.line - 1 - len(lines)) + block.code.splitlines()
        return "\n".join(lines) + "\n"


def python_blocks(path: Path, root: Path = DOCS) -> list[Block]:
    """The ```python blocks of a markdown page (named relative to ``root``), with their markers."""
    lines = path.read_text().splitlines()
    page = path.relative_to(root).as_posix()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == FENCE_OPEN:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == FENCE_CLOSE)
            before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = MARKER.match(before)
            kind = marker["kind"] if marker else None
            if kind == "skip" and not marker["reason"]:
                raise ValueError(f"{page}:{i + 1}: <!-- example: skip: ... --> needs a reason")
            if kind == "continues" and not blocks:
                raise ValueError(f"{page}:{i + 1}: <!-- example: continues --> on the page's first block")
            blocks.append(Block(page, len(blocks), i + 2, textwrap.dedent("\n".join(lines[i + 1:end])),
                                skip=marker["reason"] if kind == "skip" else None,
                                continues=blocks[-1] if kind == "continues" else None))
            i = end
        i += 1
    return blocks


BLOCKS = [block for path in sorted(DOCS.rglob("*.md")) for block in python_blocks(path)]


# -- what each block defines ------------------------------------------------------------------
@dataclass(frozen=True)
class Tasks:
    ids: frozenset[str]
    exact: bool = True  # False: at least these (a maintenance group, whose other tasks are changing)


def exactly(*ids: str) -> Tasks:
    return Tasks(frozenset(ids))


def group(*prefixes: str, extra: tuple[str, ...] = ()) -> Tasks:
    """The steps of ``lake_maintenance_group``s (plan, rewrite, expire, clean) under ``prefixes``."""
    return Tasks(frozenset(f"{p}.{t}" for p in prefixes for t in ("plan", "rewrite", "expire", "clean", *extra)),
                 exact=False)


#: Block id -> {dag_id: its tasks}; {} for a block that defines no DAG (a hook call, an operator alone).
EXPECTED: dict[str, dict[str, Tasks]] = {
    "assets.md[0]": {"refresh_dashboards": exactly("refresh")},
    "event-driven.md[0]": {"maintain_events_on_need": group("db_events")},
    "getting-started.md[0]": {},
    "lease.md[0]": {"nightly_events": group("sales_events")},
    "lease.md[1]": {"events_by_hand": exactly("acquire_lease", "plan", "rewrite", "expire", "release_lease")},
    "operators/approval.md[0]": {"maintain_events_with_approval": group(
        "db_events", extra=("expire_preview", "approve_expire", "clean_preview", "approve_clean"))},
    "operators/approval.md[1]": {"expire_events_with_approval": exactly("expire_preview", "approve_expire", "expire")},
    "operators/clean.md[0]": {"maintain_events": exactly("plan", "rewrite", "expire", "clean")},
    "operators/clean.md[1]": {},
    "operators/convert-equality-deletes.md[0]": {
        "convert_then_compact_events": exactly("convert_equality_deletes", "plan", "rewrite")},
    "operators/expire.md[0]": {"compact_and_expire_events": exactly("plan", "rewrite", "expire")},
    "operators/expire.md[1]": {},
    "operators/fleet.md[0]": {"fleet_maintenance": exactly("plan", "rewrite")},
    "operators/plan.md[0]": {"plan_events": exactly("plan")},
    "operators/restore.md[0]": {"restore_quarantine": exactly("restore_orphans")},
    "operators/repair-deletion-vectors.md[0]": {"repair_deletion_vectors": exactly("repair")},
    "operators/rewrite.md[0]": {"compact_events": exactly("plan", "rewrite")},
    "sensors/health.md[0]": {"plan_events_when_needed": exactly("wait_for_health", "plan")},
    "sensors/snapshot.md[0]": {"wait_for_writer_after_plan": exactly("plan", "wait_for_writer")},
    "production.md[0]": {},
    "your-own-dag.md[0]": {"nightly_lake": group("sales_events", "finance.ledger")},
}
#: Blocks whose run submits a Spark job (a JVM): marked spark_submit, left out of `make test-fast`.
BUILD_STARTS_SPARK = {"getting-started.md[0]"}


# -- running a block --------------------------------------------------------------------------
def execute(block: Block, filename: str | Path) -> list:
    """Run the block (and what it continues) as the module of file ``filename``; its DAGs, as a DagBag finds them.

    DAGs register themselves when their ``with`` ends, so ``with DAG(...):`` without ``as`` counts.
    """
    from airflow.sdk import DAG
    from airflow.sdk.definitions._internal.contextmanager import DagContext

    module = types.ModuleType(f"doc_example_{uuid.uuid4().hex[:8]}")
    module.__file__ = str(filename)
    sys.modules[module.__name__] = module
    DagContext.current_autoregister_module_name = module.__name__
    try:
        exec(compile(block.source(), str(filename), "exec"), vars(module))
        registered = [dag for dag, owner in list(DagContext.autoregistered_dags) if owner is module]
    finally:
        DagContext.current_autoregister_module_name = None
        DagContext.autoregistered_dags = {(d, m) for d, m in DagContext.autoregistered_dags if m is not module}
        del sys.modules[module.__name__]
    named = [value for value in vars(module).values() if isinstance(value, DAG)]
    return list({id(dag): dag for dag in [*registered, *named]}.values())


def check_imports(block: Block) -> None:
    """Run only the block's import statements (for a block that is not executed)."""
    tree = ast.parse(block.source(), str(DOCS / block.page))
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    exec(compile(ast.Module(body=imports, type_ignores=[]), str(DOCS / block.page), "exec"), {})


def healthy(catalog, name: str) -> None:
    """Nothing to compact (one file per partition) and nothing to expire (every snapshot is young)."""
    create_events_table(catalog, name, days=2, commits_per_day=1, rows_per_commit=20)


def small_files(catalog, name: str) -> None:
    """Eight small files in one partition: health score 65, a plan with one group."""
    create_events_table(catalog, name, days=1, commits_per_day=8, rows_per_commit=20)


def ensure_tables(lake_hook, code: str) -> None:
    """Create the quoted ``namespace.table`` names of ``code`` that do not exist yet (healthy ones)."""
    for name in sorted(set(TABLE_NAME.findall(code))):
        if not lake_hook.catalog.table_exists(name):
            healthy(lake_hook.catalog, name)


def _param(block: Block):
    marks = []
    if block.id in BUILD_STARTS_SPARK:
        marks.append(pytest.mark.spark_submit)
    return pytest.param(block, id=block.id, marks=marks)


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_doc_example_builds(block, lake_hook):
    """The block's imports resolve, it runs, and it defines exactly the DAGs and tasks listed."""
    from airflow.serialization.serialized_objects import DagSerialization

    if block.skip:
        check_imports(block)
        pytest.skip(f"{block.id} is marked skip: {block.skip} (its imports resolve)")
    assert block.id in EXPECTED, (
        f"docs/{block.page} line {block.line}: a python block with no entry in EXPECTED; add "
        f"{block.id!r}: {{dag_id: exactly(task ids...)}} ({{}} when it defines no DAG), or mark it "
        "<!-- example: skip: <why> -->")
    ensure_tables(lake_hook, block.source())
    dags = execute(block, DOCS / block.page)
    for dag in dags:  # what the dag-processor does with a DAG it found: an error here is an import error
        dag.validate()
        dag.check_cycle()
        DagSerialization.serialize_dag(dag)
    found = {dag.dag_id: set(dag.task_ids) for dag in dags}
    expected = EXPECTED[block.id]
    assert set(found) == set(expected), f"docs/{block.page} line {block.line} defines the DAGs {sorted(found)}"
    for dag_id, tasks in expected.items():
        if tasks.exact:
            assert found[dag_id] == tasks.ids, dag_id
        else:
            assert tasks.ids <= found[dag_id], (dag_id, sorted(tasks.ids - found[dag_id]))


def test_blocks_are_read_with_their_markers_and_line_numbers(tmp_path):
    """The helper the tests stand on: a fragment marked ``continues`` runs after its block, at the page's lines."""
    (tmp_path / "page.md").write_text(textwrap.dedent("""\
        # A page
        ```python
        x = 1
        ```
        Prose.
        <!-- example: continues -->
        ```python
        y = x + 1
        ```
        <!-- example: skip: a shape only -->
          ```python
          f(...)
          ```
        """))
    first, second, third = python_blocks(tmp_path / "page.md", root=tmp_path)
    assert (first.id, first.line, second.line, second.continues, third.skip) == ("page.md[0]", 3, 8, first, "a shape only")
    assert second.source().splitlines()[2] == "x = 1" and second.source().splitlines()[7] == "y = x + 1"
    assert third.code == "f(...)"
    namespace: dict = {}
    exec(compile(second.source(), "page.md", "exec"), namespace)
    assert namespace["y"] == 2


def test_every_block_is_listed_once_and_every_listed_block_exists():
    """EXPECTED names every block that runs, and DAG ids are unique (the run tests put the examples' files in
    one dags folder)."""
    ids = {block.id for block in BLOCKS if not block.skip}
    assert ids == set(EXPECTED), {"not in EXPECTED": sorted(ids - set(EXPECTED)),
                                  "no such block": sorted(set(EXPECTED) - ids)}
    dag_ids = [dag_id for dags in EXPECTED.values() for dag_id in dags]
    assert len(dag_ids) == len(set(dag_ids)), sorted(d for d in dag_ids if dag_ids.count(d) > 1)


def test_every_install_line_pins_what_the_install_check_proves():
    """The docs' ``pip install`` lines (README, getting started, the production image) pin the pyspark that
    scripts/check_install.sh installs and checks, and pyspark-client at the same version where Spark 4's
    provider brings it (both write one ``pyspark/`` directory)."""
    tested = set(re.findall(r"pyspark==([\d.]+)", (DOCS.parent / "scripts" / "check_install.sh").read_text()))
    lines = [(page, line) for page in [DOCS.parent / "README.md", *sorted(DOCS.rglob("*.md"))]
             for line in page.read_text().replace("\\\n", " ").splitlines()  # a shell line continued
             if "pip install " in line and '"pyspark==' in line]
    assert len(lines) >= 4, lines  # the README, the two tracks of getting started, the production image
    for page, line in lines:
        pins = dict(re.findall(r'"(pyspark(?:-client)?)==([\d.]+)"', line))
        assert pins["pyspark"] in tested, (page.name, line, tested)
        if pins["pyspark"].startswith("4."):
            assert pins.get("pyspark-client") == pins["pyspark"], (page.name, line)


# -- one DAG of each page through dag.test() ----------------------------------------------------
@dataclass(frozen=True)
class Run:
    block: int  # the page's block whose DAG runs
    dag_id: str
    tables: dict = field(default_factory=dict)  # name -> how to create it (healthy, small_files)
    states: dict = field(default_factory=dict)  # task id -> state; the run itself must succeed
    spark_submits: int = 0  # the spark-submits the run takes (JVMs)
    conf: dict | None = None


def maintained(prefix: str) -> dict[str, str]:
    """A maintenance group's steps on a table with nothing to compact: the rewrite skips, the rest run
    (in the worker: nothing to expire, and no file of these new tables is older than the orphan floor)."""
    return {f"{prefix}plan": "success", f"{prefix}rewrite": "skipped", f"{prefix}expire": "success",
            f"{prefix}clean": "success"}


RUNS: dict[str, Run] = {
    "assets.md": Run(0, "refresh_dashboards", states={"refresh": "success"}),
    "event-driven.md": Run(0, "maintain_events_on_need", {"db.events": healthy}, maintained("db_events.")),
    "lease.md": Run(0, "nightly_events", {"sales.events": healthy}, maintained("sales_events.")),
    "operators/approval.md": Run(1, "expire_events_with_approval", {"db.events": healthy},
                                 dict.fromkeys(["expire_preview", "approve_expire", "expire"], "success")),
    "operators/clean.md": Run(0, "maintain_events", {"db.events": healthy}, maintained("")),
    "operators/convert-equality-deletes.md": Run(
        0, "convert_then_compact_events", {"db.events": healthy},
        {"convert_equality_deletes": "success", "plan": "success", "rewrite": "skipped"}),
    "operators/expire.md": Run(0, "compact_and_expire_events", {"db.events": healthy},
                               {"plan": "success", "rewrite": "skipped", "expire": "success"}),
    "operators/fleet.md": Run(0, "fleet_maintenance", {"db.events": small_files, "db.clicks": healthy,
                                                       "sales.orders": healthy},
                              {"plan": "success", "rewrite": "success"}, spark_submits=1),
    "operators/plan.md": Run(0, "plan_events", {"db.events": small_files}, {"plan": "success"}),
    "operators/repair-deletion-vectors.md": Run(0, "repair_deletion_vectors", {"db.events": healthy},
                                                {"repair": "success"}),
    "operators/restore.md": Run(0, "restore_quarantine", {"db.events": healthy}, {"restore_orphans": "success"},
                                spark_submits=1),
    "operators/rewrite.md": Run(0, "compact_events", {"db.events": small_files}, {"plan": "success", "rewrite": "success"},
                                spark_submits=1),
    "sensors/health.md": Run(0, "plan_events_when_needed", {"db.events": small_files},
                             {"wait_for_health": "success", "plan": "success"}),
    "sensors/snapshot.md": Run(0, "wait_for_writer_after_plan", {"db.events": healthy},
                               {"plan": "success", "wait_for_writer": "success"}, conf={"job_id": "job-42"}),
    "your-own-dag.md": Run(0, "nightly_lake", {"sales.events": healthy, "finance.ledger": healthy},
                         {**maintained("sales_events."), **maintained("finance.ledger.")}),
}


def test_every_page_with_a_dag_runs_one():
    pages = {block.page for block in BLOCKS if EXPECTED.get(block.id)}
    assert pages <= set(RUNS), f"pages with a DAG and no entry in RUNS: {sorted(pages - set(RUNS))}"
    assert set(RUNS) <= pages, f"no DAG on {sorted(set(RUNS) - pages)}"


@pytest.fixture(scope="module", autouse=True)
def example_tables(lake_hook):
    """The examples' tables live in their own namespaces (db, sales, ...) of the session's lake: dropped at the end."""
    yield
    catalog = lake_hook.catalog
    names = {n for block in BLOCKS for n in TABLE_NAME.findall(block.code)} | {n for r in RUNS.values() for n in r.tables}
    for namespace in sorted({name.split(".")[0] for name in names}):
        if (namespace,) not in catalog.list_namespaces():
            continue
        for identifier in catalog.list_tables(namespace):
            catalog.purge_table(identifier)
        catalog.drop_namespace(namespace)


class DeadlineExceeded(BaseException):
    """Not an Exception: dag.test() logs a task's exceptions and goes on; this one ends it."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Stop a run that waits instead of finishing (a sensor whose table never crossed, a gate waiting for a
    person): the examples poll every 15 minutes and time out after hours. A watchdog thread interrupts the
    main thread (SIGUSR1; Airflow's task timeouts own SIGALRM) until the run gives up."""
    done = threading.Event()

    def expired(signum, frame):
        raise DeadlineExceeded(f"the run did not finish in {seconds:g} s")

    def watch():
        if done.wait(seconds):
            return
        while not done.is_set():  # again, in case it landed where something caught it
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
            done.wait(5)

    previous = signal.signal(signal.SIGUSR1, expired)
    watchdog = threading.Thread(target=watch, name="doc-example-deadline", daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        watchdog.join()
        signal.signal(signal.SIGUSR1, previous)


@pytest.fixture(scope="module")
def example_dags_folder():
    """A folder inside the dags folder for the examples' files (dag.test runs only DAGs found there)."""
    folder = DAGS_FOLDER / "doc_examples"
    folder.mkdir(exist_ok=True)
    yield folder
    shutil.rmtree(folder)  # other tests' dag.test() parse the whole dags folder: leave nothing behind


@pytest.fixture
def spark_submits(monkeypatch):
    """The jobs submitted in this process (dag.test runs every task in it)."""
    from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook

    jobs: list[str] = []
    from airflow_lake_provider.core.job_registry import job_for

    run = LakeSparkJobHook.run

    def counted(self, args):
        jobs.append(job_for(args).name)
        return run(self, args)

    monkeypatch.setattr(LakeSparkJobHook, "run", counted)
    return jobs


class WriterCommitsAfterThePlan:
    """An Airflow listener: the moment the plan task succeeds, a writer commits to the table with its job id
    (what the snapshot sensor's example waits for), before the sensor's first check."""

    def __init__(self, lake_hook, table: str, job_id: str):
        self.lake_hook, self.table, self.job_id = lake_hook, table, job_id
        self.snapshot_id: int | None = None

    @hookimpl
    def on_task_instance_success(self, previous_state, task_instance):
        if task_instance.task_id != "plan" or self.snapshot_id is not None:
            return
        table = self.lake_hook.load_table(self.table)
        table.append(table.scan(limit=1).to_arrow(), snapshot_properties={"writer.job-id": self.job_id})
        self.snapshot_id = self.lake_hook.load_table(self.table).current_snapshot().snapshot_id


def _run_param(page: str):
    marks = []
    if RUNS[page].spark_submits:
        marks.append(pytest.mark.spark_submit)
    return pytest.param(page, id=page, marks=marks)


@pytest.mark.parametrize("page", [_run_param(p) for p in RUNS])
def test_doc_example_runs(page, airflow_db, lake_hook, example_dags_folder, spark_submits):
    """The page's DAG, as written, through dag.test() on small real tables of the embedded lake."""
    from airflow.sdk.listener import get_listener_manager

    spec = RUNS[page]
    block = python_blocks(DOCS / page)[spec.block]
    for name, create in spec.tables.items():
        create(lake_hook.catalog, name)
    if page == "sensors/health.md":  # the sensor fires on its first check (else it would poll every 15 minutes)
        assert table_health(lake_hook.load_table("db.events"), table_name="db.events").score <= 70
    path = example_dags_folder / (re.sub(r"\W", "_", page.removesuffix(".md")) + ".py")
    path.write_text(block.source())
    dags = execute(block, path)
    dag = next((d for d in dags if d.dag_id == spec.dag_id), None)
    assert dag is not None, f"docs/{page} block {spec.block} defines no DAG {spec.dag_id}: {[d.dag_id for d in dags]}"

    writer = None
    if page == "sensors/snapshot.md":
        writer = WriterCommitsAfterThePlan(lake_hook, "db.events", spec.conf["job_id"])
        get_listener_manager().add_listener(writer)
    try:
        with deadline(RUN_DEADLINE_SECONDS):
            run = dag.test(run_conf=spec.conf)
    finally:
        if writer is not None:
            get_listener_manager().pm.unregister(writer)
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert {task: states.get(task) for task in spec.states} == spec.states
    assert len(spark_submits) == spec.spark_submits, spark_submits

    def xcom(task_id):
        return run.get_task_instance(task_id).xcom_pull(task_ids=task_id)

    # What each example's page says its run gives.
    if page == "sensors/snapshot.md":
        found = xcom("wait_for_writer")
        assert found["snapshot_id"] == writer.snapshot_id and found["summary"]["writer.job-id"] == "job-42"
        assert xcom("plan")["snapshot_id"] == found["parent_snapshot_id"]
    elif page == "sensors/health.md":
        report = xcom("wait_for_health")
        assert "score 65 <= 70 (max_score)" in report["crossed"]
        assert xcom("plan")["totals"]["groups"] == 1
    elif page == "operators/fleet.md":  # the compacted table's lease is given back: its next run is not kept out
        from airflow_lake_provider.hooks.lease import TableLeaseHook

        assert [(r["table"], r["lease"]) for r in xcom("rewrite")] == [("db.events", None)]
        assert not TableLeaseHook(lake_hook).load("db.events")[1].held
    elif page == "operators/repair-deletion-vectors.md":  # a v2 table: nothing to repair, no JVM
        assert xcom("repair")["format_version"] == 2 and xcom("repair")["committed_snapshot_ids"] == []
    elif page == "operators/restore.md":
        assert xcom("restore_orphans")["runs"] == {} and xcom("restore_orphans")["restored_count"] == 0
    elif page == "operators/plan.md":
        plan = xcom("plan")
        assert plan["totals"]["files"] == 8 and plan["scope"]["partition_filter"] == "day >= '2026-01-01'"
        assert plan["options"]["target-file-size-bytes"] == str(128 * 1024 * 1024)
    elif page == "operators/rewrite.md":
        rewrite = xcom("rewrite")
        assert (rewrite["rewritten_data_files"], rewrite["added_data_files"], rewrite["strategy"]) == (8, 1, "binpack")
        assert rewrite["options"]["max-concurrent-file-group-rewrites"] == "2"
