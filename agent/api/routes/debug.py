"""``GET /debug/current_load``: dp-agent's load page, and the numbers it shows.

dp-agent answers the path with an HTML page that reads
``{"current_load": {service: calls in flight}, "response_time": {service: mean seconds}}``
from a WebSocket (``/debug/current_load/ws``, :mod:`agent.api.routes.load_ws`) twice a
second; so does this one, and where the socket cannot be opened (a proxy without
WebSocket upgrades) it polls the same object over HTTP: ask for it with
``Accept: application/json`` (or ``?format=json``). ``agent`` is the whole turn, as in
dp-agent; the services' mean is over their recent calls (:mod:`agent.metrics.services`).
The numbers need the reader's API key, as ``/metrics`` does, unless ``CHORUS_METRICS_PUBLIC``
is true; the page itself holds none.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel

from agent.api.deps import MetricsDep, PipelineDep, SettingsDep
from agent.api.security import check_metrics_key

router = APIRouter(prefix="/debug", tags=["debug"])


class CurrentLoad(BaseModel):
    """What dp-agent's ``/debug/current_load/ws`` sends."""

    current_load: dict[str, int]
    response_time: dict[str, float]


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Current load</title>
<style>body{font-family:sans-serif;margin:2em}td,th{padding:.2em 1em;text-align:left}</style>
</head><body><h1>Current load</h1>
<table><thead><tr><th>service</th><th>in flight</th><th>mean response time, s</th></tr></thead>
<tbody id="rows"></tbody></table><p id="status"></p>
<script>
function show(load) {
  const names = [...new Set([...Object.keys(load.current_load),
                             ...Object.keys(load.response_time)])];
  const rows = document.getElementById("rows");
  rows.replaceChildren(...names.map((name) => {
    const row = document.createElement("tr");
    for (const cell of [name, load.current_load[name] ?? 0,
                        (load.response_time[name] ?? 0).toFixed(3)]) {
      const td = document.createElement("td");
      td.textContent = cell;
      row.append(td);
    }
    return row;
  }));
  document.getElementById("status").textContent = "";
}
async function poll() {
  try {
    const response = await fetch("/debug/current_load?format=json");
    if (!response.ok) throw new Error(response.status + " " + response.statusText);
    show(await response.json());
  } catch (error) {
    document.getElementById("status").textContent = "cannot read the load: " + error.message;
  }
}
let polling = null;
const scheme = location.protocol === "https:" ? "wss://" : "ws://";
const socket = new WebSocket(scheme + location.host + "/debug/current_load/ws");
socket.onmessage = (event) => show(JSON.parse(event.data));
socket.onclose = () => {
  if (polling === null) { poll(); polling = setInterval(poll, 500); }
};
</script></body></html>
"""


def current_load(metrics: MetricsDep, pipeline: PipelineDep) -> CurrentLoad:
    registry = metrics.registry
    in_flight = registry.get_sample_value("chorus_turns_in_flight") or 0.0
    turns = registry.get_sample_value("chorus_turn_seconds_count") or 0.0
    total = registry.get_sample_value("chorus_turn_seconds_sum") or 0.0
    names = pipeline.service_names()
    response_time = {"agent": total / turns if turns else 0.0}
    response_time.update(metrics.services.mean_seconds(names))
    return CurrentLoad(current_load={"agent": int(in_flight)}, response_time=response_time)


@router.get(
    "/current_load",
    response_class=HTMLResponse,
    response_model=None,
    responses={200: {"model": CurrentLoad, "description": "HTML, or the JSON asked for"}},
)
async def get_current_load(
    request: Request,
    metrics: MetricsDep,
    pipeline: PipelineDep,
    settings: SettingsDep,
    format: Annotated[Literal["html", "json"] | None, Query()] = None,
) -> HTMLResponse | JSONResponse:
    """dp-agent's load page; its numbers with ``Accept: application/json`` or
    ``?format=json``."""
    wants_json = format == "json" or (
        format is None and "application/json" in request.headers.get("accept", "")
    )
    if not wants_json:
        return HTMLResponse(_PAGE)
    check_metrics_key(settings, request.headers.get("x-api-key"))
    return JSONResponse(current_load(metrics, pipeline).model_dump())
