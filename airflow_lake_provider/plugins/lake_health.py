"""The "Lake health" page: an Airflow 3 plugin (FastAPI app + a nav entry), read-only.

One page for the on-call engineer: every table this package's tasks maintain in the DAGs the user
may read, unhealthy first, each with its health score and why, the file-size histogram before and
after its last maintenance, delete files, snapshots, and its last maintenance runs linked to
their pages in the Airflow UI. Tables come from the DAGs (a task's literal ``table``, or the
default of the ``table`` param it renders) and from the results of their recent runs. Metadata
is read with PyIceberg (no JVM); a table that cannot be read shows the sentence why. See
docs/health-page.md.
"""

from __future__ import annotations

import datetime as dt
import html
from typing import Any

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse

from airflow_lake_provider.core.health_page import (
    SUMMARY_XCOM_KEY,
    Histogram,
    TableReport,
    bar_heights,
    order_reports,
    run_rows,
    table_report,
    table_results,
)

URL_PREFIX = "/lake-health"
RECENT_RESULTS = 2000  # XCom rows read per page view, newest first


def _our_tasks(dag) -> dict[str, tuple[str | None, str]]:
    """``task_id -> (table or None, lake_conn_id)`` for this package's tasks in a serialized DAG."""
    found = {}
    params = getattr(dag, "params", None) or {}
    for task in dag.tasks:
        if not str(getattr(task, "_task_module", "") or "").startswith("airflow_lake_provider"):
            continue
        table = getattr(task, "table", None)
        if isinstance(table, str) and "{{" in table:
            table = None
            if "params.table" in (getattr(task, "table", "") or ""):
                try:
                    default = params.get("table") if hasattr(params, "get") else None
                    table = getattr(default, "value", default)
                except Exception:  # noqa: BLE001 - a param without a default names no table
                    table = None
        conn = getattr(task, "lake_conn_id", None)
        found[task.task_id] = (table if isinstance(table, str) and table else None,
                               conn if isinstance(conn, str) and "{{" not in conn else "lake_default")
    return found


def _xcoms(session, *where) -> tuple[dict[str, dict[tuple[str, str, str], Any]], dict[tuple[str, str, str], Any]]:
    """The newest results and summaries matching ``where``: ``{key: {(dag_id, run_id, task_id): value}}``
    and when each task wrote them."""
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    rows = session.execute(
        select(XComModel.key, XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.timestamp,
               XComModel.value)
        .where(XComModel.key.in_(("return_value", SUMMARY_XCOM_KEY)), *where)
        .order_by(XComModel.timestamp.desc()).limit(RECENT_RESULTS)).all()
    values: dict[str, dict[tuple[str, str, str], Any]] = {"return_value": {}, SUMMARY_XCOM_KEY: {}}
    whens = {}
    for key, dag_id, run_id, task_id, when, raw in rows:
        values[key][(dag_id, run_id, task_id)] = XComModel.deserialize_value(type("Row", (), {"value": raw})())
        whens[(dag_id, run_id, task_id)] = when
    return values, whens


def said_in_run(dag_id: str, run_id: str) -> dict[str, list[str]]:
    """``task_id -> the sentences its step said`` in one run, in the order the tasks wrote them."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        values, whens = _xcoms(session, XComModel.dag_id == dag_id, XComModel.run_id == run_id)
    said = values[SUMMARY_XCOM_KEY]
    return {key[2]: said[key] for key in sorted(said, key=whens.__getitem__)}


def _discover(dag_ids: set[str]) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], list[str]]:
    """``(table, lake_conn_id) -> recent step results`` over the readable DAGs, and notes."""
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    tables: dict[tuple[str, str], list[dict[str, Any]]] = {}
    tasks: dict[tuple[str, str], str] = {}
    notes: list[str] = []
    with create_session() as session:
        for dag_id in sorted(dag_ids):
            try:
                dag = SerializedDagModel.get_dag(dag_id, session=session)
            except Exception as error:  # noqa: BLE001 - one unreadable DAG must not hide the others
                notes.append(f"DAG {dag_id} could not be read: {error}")
                continue
            if dag is None:
                continue
            for task_id, (table, conn) in _our_tasks(dag).items():
                tasks[(dag_id, task_id)] = conn
                if table:
                    tables.setdefault((table, conn), [])
        if not tasks:
            return tables, notes
        values, whens = _xcoms(session, XComModel.dag_id.in_({d for d, _ in tasks}))
    for (dag_id, run_id, task_id), value in values["return_value"].items():
        if (dag_id, task_id) not in tasks:
            continue
        results = table_results(value)  # a fleet step's value lists one result per table
        said = values[SUMMARY_XCOM_KEY].get((dag_id, run_id, task_id)) if len(results) == 1 else None
        for result in results:
            tables.setdefault((result["table"], tasks[(dag_id, task_id)]), []).append(
                {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "when": whens[(dag_id, run_id, task_id)],
                 "value": result, "said": said})
    return tables, notes


def _report(table: str, conn: str, results: list[dict[str, Any]]) -> TableReport:
    from airflow_lake_provider.hooks.lake import IcebergLakeHook

    hook = IcebergLakeHook(conn)
    try:
        report = table_report(hook.load_table(table), table_name=table, lake_conn_id=conn)
    except Exception as error:  # noqa: BLE001 - the page shows why, and goes on
        report = TableReport(table=table, lake_conn_id=conn, error=f"{type(error).__name__}: {error}")
    try:
        embedded = hook.uses_embedded_lake
    except Exception:  # noqa: BLE001 - a connection that cannot be read: its error is on the card already
        embedded = False
    report.lake = f"the embedded lake (no connection {conn})" if embedded else f"connection {conn}"
    report.runs = run_rows(results)
    return report


# -- rendering ----------------------------------------------------------------------------------
_COLOURS = {"unreadable": "#8a8a8a", "unhealthy": "#d64545", "fair": "#e0a100", "healthy": "#2e9d5b"}
_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2933;background:#f7f9fb}
h1{font-size:22px;margin:0 0 4px} .sub{color:#52606d;margin:0 0 20px}
.summary span{display:inline-block;margin-right:16px;font-weight:600}
.card{background:#fff;border-radius:10px;box-shadow:0 1px 3px rgba(0,0,0,.12);padding:16px 20px;margin:16px 0;
border-left:8px solid var(--c)}
.head{display:flex;align-items:center;gap:16px} .score{font-size:34px;font-weight:700;color:var(--c);min-width:64px}
.name{font-size:18px;font-weight:600} .state{color:var(--c);font-weight:600;text-transform:uppercase;font-size:12px}
.figs span{margin-right:14px;color:#323f4b} .reasons{margin:8px 0;color:#7b2020}
.charts{display:flex;gap:28px;flex-wrap:wrap} .chart h3{font-size:13px;margin:10px 0 4px;color:#52606d}
table.runs{border-collapse:collapse;margin-top:8px;font-size:13px}
table.runs td,table.runs th{padding:4px 10px;border-bottom:1px solid #e4e7eb;text-align:left} .err{color:#7b2020}
.note{color:#52606d;font-size:12px;max-width:300px} .reasons .ok{color:#2e9d5b}
.said p{white-space:pre-wrap;margin:4px 0;font-family:ui-monospace,monospace;font-size:12px;color:#323f4b}
"""


def _histogram_svg(histogram: Histogram, colour: str, title: str) -> str:
    width, height, bar, gap = 330, 120, 36, 10
    heights = bar_heights(histogram, height - 30)
    parts = [(f'<svg role="img" aria-label="{html.escape(title)}" width="{width}" height="{height + 34}" '
              f'xmlns="http://www.w3.org/2000/svg">')]
    for i, (count, label, h) in enumerate(zip(histogram.counts, histogram.labels, heights, strict=True)):
        x = 8 + i * (bar + gap)
        parts.append(f'<rect x="{x}" y="{height - h}" width="{bar}" height="{h}" fill="{colour}" rx="3">'
                     f'<title>{html.escape(label)}: {count} files</title></rect>')
        parts.append(f'<text x="{x + bar / 2}" y="{height - h - 4}" font-size="11" text-anchor="middle">'
                     f'{count}</text>')
        parts.append(f'<text x="{x + bar / 2}" y="{height + 14}" font-size="8" text-anchor="middle" fill="#52606d">'
                     f'{html.escape(label.split("-")[0])}</text>')
    parts.append(f'<line x1="0" y1="{height}" x2="{width}" y2="{height}" stroke="#9aa5b1"/></svg>')
    return "".join(parts)


def _chart(title: str, histogram: Histogram | None, colour: str, note: str = "") -> str:
    body = _histogram_svg(histogram, colour, title) if histogram else f'<p class="note">{html.escape(note)}</p>'
    total = f" ({histogram.total} data files)" if histogram else ""
    return f'<div class="chart"><h3>{html.escape(title)}{total}</h3>{body}</div>'


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if isinstance(value, dt.datetime) else str(value)


def _said(sentences: list[str], *, newest: bool) -> str:
    """What the run's steps said in their logs, folded (open for the newest run)."""
    if not sentences:
        return ""
    lines = "".join(f"<p>{html.escape(sentence)}</p>" for sentence in sentences)
    return f'<details class="said"{" open" if newest else ""}><summary>what the steps said</summary>{lines}</details>'


def _card(report: TableReport) -> str:
    colour = _COLOURS[report.state]
    name = html.escape(report.table)
    if report.error:
        return (f'<div class="card" style="--c:{colour}" data-table="{name}"><div class="head">'
                f'<div class="score">?</div><div><div class="name">{name}</div>'
                f'<div class="state">{report.state}</div></div></div>'
                f'<p class="err">{html.escape(report.error)}</p></div>')
    reasons = "".join(f"<li>{html.escape(r)}</li>" for r in report.reasons) or \
        '<li class="ok">nothing lowers the score</li>'
    charts = "".join([
        _chart("Before the last maintenance", report.before, "#d69c45",
               report.before_note or "no maintenance commit in the table's history yet"),
        _chart("After the last maintenance", report.after, "#3f7fbf", "no maintenance commit yet"),
        _chart("Now", report.now, colour, "the table has no snapshot"),
    ])
    runs = "".join(
        f'<tr><td><a target="_top" href="/dags/{html.escape(r["dag_id"])}/runs/{html.escape(r["run_id"])}">'
        f'{html.escape(r["dag_id"])} / {html.escape(r["run_id"])}</a></td>'
        f'<td>{html.escape(_when(r["when"]))}</td>'
        f'<td>{html.escape("; ".join(r["steps"]))}{_said(r["said"], newest=i == 0)}</td></tr>'
        for i, r in enumerate(report.runs))
    if runs:
        runs_table = (f'<table class="runs"><tr><th>last runs</th><th>when (UTC)</th><th>what they did</th></tr>'
                      f'{runs}</table>')
    else:
        runs_table = '<p class="note">No run results of this table in the recent XComs.</p>'
    return (f'<div class="card" style="--c:{colour}" data-table="{name}"><div class="head">'
            f'<div class="score" data-score="{report.score}">{report.score}</div>'
            f'<div><div class="name">{name}</div><div class="state">{report.state}</div></div></div>'
            f'<div class="figs"><span>{report.data_files} data files</span><span>{report.small_files} small</span>'
            f'<span>{report.delete_files} delete files</span><span>{report.snapshots} snapshots</span>'
            f'<span>{html.escape(report.lake or "connection " + report.lake_conn_id)}</span></div>'
            f'<ul class="reasons">{reasons}</ul><div class="charts">{charts}</div>{runs_table}</div>')


def render_page(reports: list[TableReport], notes: list[str]) -> str:
    counts = {state: sum(1 for r in reports if r.state == state) for state in _COLOURS}
    summary = "".join(f'<span style="color:{_COLOURS[s]}">{n} {s}</span>' for s, n in counts.items() if n)
    cards = "".join(_card(r) for r in reports) or "<p>No table is maintained by the DAGs you can read.</p>"
    extra = "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes)
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>Lake health</title><style>{_STYLE}</style>'
            f'</head><body><h1>Lake health</h1><p class="sub">Iceberg tables maintained by your DAGs, '
            f'the least healthy first. Measured now from table metadata.</p><div class="summary">{summary}</div>'
            f'{cards}{extra}</body></html>')


def _page(user) -> HTMLResponse:
    from airflow.api_fastapi.app import get_auth_manager

    readable = set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))
    tables, notes = _discover(readable)
    reports = order_reports([_report(table, conn, results) for (table, conn), results in tables.items()])
    return HTMLResponse(render_page(reports, notes))


def _app() -> FastAPI:
    from airflow.api_fastapi.core_api.security import get_user

    app = FastAPI(title="Lake health", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def lake_health(user=Depends(get_user)) -> HTMLResponse:  # noqa: B008 - FastAPI's way
        return _page(user)

    return app


class LakeHealthPlugin(AirflowPlugin):
    """Adds the read-only Lake health page at ``/lake-health/`` and an entry in the Browse menu."""

    name = "lake_health"
    fastapi_apps = [{"app": _app(), "url_prefix": URL_PREFIX, "name": "Lake health"}]
    external_views = [{"name": "Lake health", "href": f"{URL_PREFIX}/", "url_route": "lake-health",
                       "destination": "nav", "category": "browse"}]
