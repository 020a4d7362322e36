"""Budgeted runs: a table converging over several runs, each within its budget.

Two parts:

1. **Real.** A table of many small real files (``--quick``: fewer) in 16 partitions whose files
   differ in size (so partitions differ in benefit), written by one Spark job. Then, like a
   scheduled DAG would: plan with ``max_files`` (the plan operator, PyIceberg engine), rewrite
   the plan (the rewrite operator, one spark-submit), again until the plan is empty. Each run's
   rewritten files and bytes are checked against the budget; rows and checksum are compared
   with the start.
2. **A million files, planned.** The same budget logic the plan operator uses
   (``plan_rewrite``), on 1,000,000 synthetic files in 100 partitions, each run "rewriting" what
   it took into target-sized files, until nothing is left to plan: how many runs, each within
   its budget, and how long each plan takes. Writing and rewriting a million real files does not
   fit these 2 cores; the real part shows the same loop with real rewrites.

Run: ``python benchmarks/budget.py [--quick]``.
"""

from __future__ import annotations

import argparse
import random
import time

from common import context, lake_hook, markdown_table, private_lake, timed, write_section

PARTITIONS = 16
TABLE = "bench.budgeted"


def build(hook, files: int) -> None:
    from airflow_lake_provider.hooks.spark_job import LakeSparkJobHook
    from airflow_lake_provider.core.contracts import SqlJobArgs

    hook.catalog.create_namespace_if_not_exists("bench")
    rows = files * 200
    # Payload length grows with the partition: partition 0 has the smallest files (most benefit per byte).
    LakeSparkJobHook(lake_hook=hook).run(SqlJobArgs(statements=[
        f"CREATE TABLE {TABLE} (id BIGINT, part INT, payload STRING) USING iceberg PARTITIONED BY (part) "
        "TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none', 'write.spark.fanout.enabled'='true')",
        f"INSERT INTO {TABLE} SELECT /*+ REPARTITION({files // PARTITIONS}) */ id, CAST(id % {PARTITIONS} AS INT), "
        f"repeat(sha1(CAST(id AS STRING)), 1 + CAST(id % {PARTITIONS} AS INT)) FROM range({rows})",
    ]))


def fingerprint(hook) -> tuple[int, int]:
    import pyarrow.compute as pc

    data = hook.load_table(TABLE).scan(selected_fields=("id",)).to_arrow()
    return data.num_rows, int(pc.sum(data["id"]).as_py() or 0)


def real_runs(hook, max_files: int) -> list[dict]:
    from airflow_lake_provider.operators.plan import IcebergRewritePlanOperator
    from airflow_lake_provider.operators.rewrite import IcebergRewriteDataFilesOperator

    runs = []
    while len(runs) < 20:
        plan_s, plan = timed(IcebergRewritePlanOperator(
            task_id="plan", table=TABLE, engine="pyiceberg", target_file_size_bytes=64 * 1024 * 1024,
            max_files=max_files).execute, context("plan"))
        if not plan["groups"]:
            break
        rewrite_s, result = timed(IcebergRewriteDataFilesOperator(
            task_id="rewrite", table=TABLE, plan=plan, rewrite_position_deletes=False).execute, context("rewrite"))
        runs.append({"plan_s": plan_s, "rewrite_s": rewrite_s, "planned_files": plan["totals"]["files"],
                     "partitions": sorted(g["partition"]["part"] for g in plan["groups"]),
                     "rewritten": result["rewritten_data_files"], "bytes": result["rewritten_bytes"],
                     "skipped": plan["skipped_by_budget"]})
        print(f"run {len(runs)}: {runs[-1]}", flush=True)
    return runs


def simulated_runs(total_files: int, max_files: int) -> list[dict]:
    from airflow_lake_provider.core.planning import DataFileInfo, RewriteOptions, plan_rewrite

    target = 128 * 1024 * 1024
    rng = random.Random(7)
    files = []
    for i in range(total_files):
        part = i % 100
        size = 1_000 + rng.randrange(1_000 + 2_000 * part)  # later partitions: larger files, less benefit
        files.append(DataFileInfo(path=f"s3://lake/t/data/part={part}/f{i}.parquet", spec_id=0,
                                  partition={"part": part}, size_bytes=size, record_count=10))
    options = RewriteOptions(target_file_size_bytes=target, max_files=max_files)
    runs = []
    while len(runs) < 50:
        plan_s, plan = timed(plan_rewrite, files, options)
        if plan.is_empty:
            break
        taken = {f.path for g in plan.groups for f in g.file_details}
        outputs = [DataFileInfo(path=f"s3://lake/t/data/part={g.partition['part']}/compacted-{len(runs)}-{n}.parquet",
                                spec_id=0, partition=g.partition, size_bytes=target, record_count=10)
                   for g in plan.groups for n in range(g.expected_output_files)]
        files = [f for f in files if f.path not in taken] + outputs
        runs.append({"plan_s": plan_s, "files": len(taken), "bytes": sum(g.bytes for g in plan.groups),
                     "partitions": len({str(g.partition) for g in plan.groups}), "skipped": plan.skipped_by_budget,
                     "first": min(g.partition["part"] for g in plan.groups)})
        print(f"simulated run {len(runs)}: {runs[-1]}", flush=True)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,600 real files and 100,000 planned")
    args = parser.parse_args()
    real_files, planned_files = (1_600, 100_000) if args.quick else (8_000, 1_000_000)
    real_budget, planned_budget = real_files // 4 + real_files // PARTITIONS, planned_files // 5

    with private_lake("budget"):
        hook = lake_hook()
        build(hook, real_files)
        table = hook.load_table(TABLE)
        start_files = sum(1 for _ in table.scan().plan_files())
        before = fingerprint(hook)
        started = time.perf_counter()
        runs = real_runs(hook, real_budget)
        real_wall = time.perf_counter() - started
        after = fingerprint(hook)
        end_files = sum(1 for _ in hook.load_table(TABLE).scan().plan_files())
    simulated = simulated_runs(planned_files, planned_budget)

    real_within = all(r["rewritten"] <= real_budget for r in runs)
    sim_within = all(r["files"] <= planned_budget for r in simulated)
    converged = bool(runs) and end_files == PARTITIONS and before == after
    rows = [[i + 1, f"{r['planned_files']:,}", f"{r['rewritten']:,}", f"{r['bytes'] / 1e6:.1f}",
             ", ".join(str(p) for p in r["partitions"]), r["skipped"], f"{r['plan_s']:.2f}", f"{r['rewrite_s']:.1f}"]
            for i, r in enumerate(runs)]
    sim_rows = [[i + 1, f"{r['files']:,}", f"{r['bytes'] / 1e6:.0f}", r["partitions"], r["first"], r["skipped"],
                 f"{r['plan_s']:.1f}"] for i, r in enumerate(simulated)]
    body = f"""
**Real table**: {start_files:,} small files in {PARTITIONS} partitions (partition 0 has the smallest files,
partition 15 the largest), budget `max_files={real_budget:,}` per run. Each run is the plan operator
(PyIceberg) then the rewrite operator (one spark-submit).

{markdown_table(["run", "planned files", "rewritten files", "rewritten MB", "partitions taken", "groups left for later",
                 "plan s", "rewrite s (spark-submit incl.)"], rows)}

{len(runs)} runs, {real_wall:.0f} s in all; every run within its budget: **{"yes" if real_within else "NO"}**; afterwards
{end_files} files (one per partition) and the same rows (count {after[0]:,}, sum of ids equal:
{"yes" if before == after else "NO"}).

**A million files, planned**: {planned_files:,} synthetic files in 100 partitions (later partitions hold
larger files), budget `max_files={planned_budget:,}`; each run's groups are replaced by target-sized files
before the next plan, as a rewrite would leave them.

{markdown_table(["run", "files taken", "MB taken", "partitions", "first partition taken", "groups left for later",
                 "plan s"], sim_rows)}

Every run within its budget: **{"yes" if sim_within else "NO"}**; {len(simulated)} runs to converge.

**Reading.** The budget takes whole partitions, most files and deletes per byte first, so the
first runs remove the most files for the bytes they rewrite (partition 0 before partition 15), and
each later run plans from the table as the previous one left it: the compacted partitions are no
longer candidates, so nothing is rewritten twice and nothing needs remembering between runs. A
run's cost is bounded by its budget, not by the table: the rewrite reads at most `max_files`
files, and planning (which still reads every manifest entry) is the only part that grows with the
table (see planning: the Spark engine plans a million files in the time shown there).
"""
    target = {"goal": "budgeted runs converge, each within its budget (real rewrites, and 1M files planned)",
              "measured": f"{len(runs)} real runs, {len(simulated)} planned runs, all within budget",
              "met": real_within and sim_within and converged}
    write_section("budget", "Budgeted runs converging on a large table", "python benchmarks/budget.py"
                  + (" --quick" if args.quick else ""), body, target=target)


if __name__ == "__main__":
    main()
