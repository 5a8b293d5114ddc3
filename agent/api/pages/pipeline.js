// /pipeline: the configured service graph, drawn as SVG, and each service's live numbers,
// polled from GET /api/pipeline every few seconds.
//
// The agent sends a layout (a column and a row per service), so this only draws boxes and
// arrows. No library: SVG elements made one by one, text set as text.

import {
  callApi, describeError, duration, el, installNavigation, keyPrompt, needsKey, replace, svg,
} from "/pages/common.js";

const REFRESH_MS = 3000;
const NODE_H = 46;
const COL_GAP = 64;
const ROW_GAP = 14;
const STAGE_PAD = 12;
const HEADER = 30;
const LANE_GAP = 14;

const notice = document.getElementById("notice");
const graph = document.getElementById("graph");
const statsBody = document.querySelector("#stats tbody");
const updated = document.getElementById("updated");
const mermaidBox = document.getElementById("mermaid");
const disabledSection = document.getElementById("disabled-section");
const disabledBody = document.querySelector("#disabled tbody");
const armsSection = document.getElementById("arms-section");
const armsBody = document.querySelector("#arms tbody");

let drawnShape = null; // the graph as last drawn, to redraw only when the config changed

function showNotice(...content) {
  replace(notice, ...content);
  notice.hidden = content.length === 0;
}

function shortTarget(target) {
  const match = /^https?:\/\/([^/]+)/.exec(target);
  return match ? match[1] : target;
}

/** One width for every box: the longest name or address fits, and so does the label of
 *  a one-column stage ("CANDIDATE ANNOTATORS"). */
function nodeWidth(info) {
  const text = Math.max(...info.services.map((s) => Math.max(s.name.length,
                                                             shortTarget(s.target).length * 0.85)));
  const label = Math.max(...info.stages.map((s) => s.role.length * 8.5 - 2 * STAGE_PAD));
  return Math.min(Math.max(140, text * 8 + 28, label), 300);
}

/** An arrow from one service to another. Next-column neighbours get an S-curve; an edge
 *  that skips columns would cross the boxes between, so it runs along a lane below them. */
function edgePath(a, b, width, lane) {
  if (lane === null) {
    const [x1, y1, x2, y2] = [a.x + width, a.y + NODE_H / 2, b.x - 2, b.y + NODE_H / 2];
    const bend = Math.max((x2 - x1) / 2, 20);
    return `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`;
  }
  const [x1, y1, x2, y2] = [a.x + width / 2, a.y + NODE_H, b.x + width / 2 - 8, b.y + NODE_H + 2];
  return `M${x1},${y1} L${x1},${lane - 8} Q${x1},${lane} ${x1 + 8},${lane} ` +
         `L${x2 - 8},${lane} Q${x2},${lane} ${x2},${lane - 8} L${x2},${y2}`;
}

function drawGraph(info) {
  const width = nodeWidth(info);
  const columns = Math.max(...info.stages.map((s) => s.last_column)) + 1;
  const perColumn = new Map();
  for (const s of info.services) perColumn.set(s.column, (perColumn.get(s.column) || 0) + 1);
  const rows = Math.max(...perColumn.values());
  const column = new Map(info.services.map((s) => [s.name, s.column]));
  const skipping = info.edges.filter((e) => column.get(e.target) - column.get(e.source) > 1);
  const nodesBottom = HEADER + rows * (NODE_H + ROW_GAP);
  const height = nodesBottom + skipping.length * LANE_GAP + STAGE_PAD;
  const x = (col) => STAGE_PAD + col * (width + COL_GAP);
  const position = new Map(info.services.map((s) => {
    const offset = ((rows - perColumn.get(s.column)) * (NODE_H + ROW_GAP)) / 2;
    return [s.name, { x: x(s.column), y: HEADER + offset + s.row * (NODE_H + ROW_GAP) }];
  }));
  const total = x(columns) - COL_GAP + STAGE_PAD;

  const stages = info.stages.map((stage) => {
    const left = x(stage.first_column) - STAGE_PAD + 2;
    const right = x(stage.last_column) + width + STAGE_PAD - 2;
    return svg("g", { className: "stage", dataset: { role: stage.role } },
      svg("rect", { attrs: { x: left, y: 2, width: right - left, height: height - 4, rx: 10 } }),
      svg("text", { className: "stage-label", text: stage.role.replace(/_/g, " "),
                    attrs: { x: (left + right) / 2, y: 20, "text-anchor": "middle" } }));
  });
  const flow = info.stages.slice(1).map((stage) => {
    const to = x(stage.first_column) - STAGE_PAD - 2;
    const from = to - COL_GAP + 2 * STAGE_PAD + 4;
    const y = 16; // beside the stage labels, clear of the service arrows
    return svg("path", { className: "stage-flow",
                         attrs: { d: `M${from},${y} L${to},${y}`, "marker-end": "url(#arrow)" } });
  });
  const edges = info.edges.map((edge) => {
    const index = skipping.indexOf(edge);
    const lane = index < 0 ? null : nodesBottom + index * LANE_GAP + LANE_GAP / 2;
    return svg("path", {
      className: edge.required ? "edge required" : "edge",
      dataset: { source: edge.source, target: edge.target },
      attrs: { d: edgePath(position.get(edge.source), position.get(edge.target), width, lane),
               "marker-end": "url(#arrow)" },
    });
  });
  const nodes = info.services.map((service) => {
    const { x: left, y: top } = position.get(service.name);
    return svg("g", { className: "node", dataset: { service: service.name } },
      svg("title", { text: `${service.name} (${roleText(service)}): ${service.target}, ` +
                           `timeout ${service.timeout}s, batch ${service.batch_size}` }),
      svg("rect", { attrs: { x: left, y: top, width, height: NODE_H, rx: 6 } }),
      svg("text", { className: "node-name", text: service.name,
                    attrs: { x: left + width / 2, y: top + 19, "text-anchor": "middle" } }),
      svg("text", { className: "node-target", text: shortTarget(service.target),
                    attrs: { x: left + width / 2, y: top + 36, "text-anchor": "middle" } }));
  });
  const defs = svg("defs", {},
    svg("marker", { attrs: { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
                             markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" } },
      svg("path", { className: "arrow-head", attrs: { d: "M0,0 L10,5 L0,10 z" } })));
  replace(graph, svg("svg", {
    attrs: { viewBox: `0 0 ${total} ${height}`, width: total, height, role: "img",
             "aria-label": "pipeline graph" },
  }, defs, stages, flow, edges, nodes));
}

/** A service's role, and a dp-agent service's group when it says more. */
function roleText(service) {
  const group = service.dream_group && service.dream_group !== service.role
    ? ` · ${service.dream_group}` : "";
  return `${service.role.replace(/_/g, " ")}${group}`;
}

function statsRow(service) {
  const cell = (field, className = "number") => el("td", { className, dataset: { field } });
  return el("tr", { dataset: { service: service.name } },
    el("td", { className: "service", text: service.name }),
    el("td", { text: roleText(service) }),
    el("td", { className: "target", text: service.target }),
    cell("calls"), cell("p50"), cell("p95"), cell("error_rate"), cell("timeouts"),
    cell("skipped"));
}

function percent(rate) {
  return rate === null ? "–" : `${(rate * 100).toFixed(rate > 0 && rate < 0.1 ? 1 : 0)}%`;
}

function updateStats(info) {
  for (const row of statsBody.rows) {
    const stats = info.stats[row.dataset.service];
    if (!stats) continue;
    const values = {
      calls: stats.calls, p50: duration(stats.p50_seconds), p95: duration(stats.p95_seconds),
      error_rate: percent(stats.error_rate), timeouts: stats.timeouts, skipped: stats.skipped,
    };
    for (const [field, value] of Object.entries(values)) {
      row.querySelector(`[data-field="${field}"]`).textContent = String(value);
    }
    row.classList.toggle("failing", stats.errors > 0);
    const node = graph.querySelector(`g.node[data-service="${CSS.escape(row.dataset.service)}"]`);
    if (node) node.classList.toggle("failing", stats.errors > 0);
  }
  const turns = info.turns === 1 ? "1 turn" : `${info.turns} turns`;
  updated.textContent = `Updated ${new Date().toLocaleTimeString()}: ${turns} answered by ` +
    `this agent process; p50/p95 over each service's last calls (up to 1000).`;
}

function armRow(arm) {
  return el("tr", { dataset: { arm: arm.name } },
    el("td", { className: "service", text: arm.name }),
    el("td", { className: "target", text: arm.pipeline }),
    el("td", { className: "number", text: percent(arm.share) }),
    el("td", { className: "number", text: String(arm.turns) }),
    el("td", { className: "number",
               text: arm.turns ? percent(arm.fallbacks / arm.turns) : "–" }));
}

// The experiment's arms, refreshed at each poll (their turns change); hidden without one.
function drawArms(info) {
  const experiment = info.experiment;
  armsSection.hidden = !experiment;
  if (!experiment) return;
  document.getElementById("experiment-name").textContent = experiment.name;
  replace(armsBody, experiment.arms.map(armRow));
}

function disabledRow(service) {
  return el("tr", { className: "disabled", dataset: { service: service.name } },
    el("td", { className: "service", text: service.name }),
    el("td", { text: roleText(service) }),
    el("td", { text: service.reason }));
}

function draw(info) {
  const disabled = info.disabled || [];
  const shape = JSON.stringify([info.stages, info.services, info.edges, disabled]);
  if (shape === drawnShape) return;
  drawnShape = shape;
  drawGraph(info);
  replace(statsBody, info.services.map(statsRow));
  replace(disabledBody, disabled.map(disabledRow));
  disabledSection.hidden = disabled.length === 0;
  mermaidBox.textContent = info.mermaid;
}

async function poll() {
  const result = await callApi("/api/pipeline");
  if (needsKey(result)) {
    showNotice(keyPrompt(result, poll)); // no further polling until a key is entered
    return;
  }
  if (result.ok) {
    showNotice();
    draw(result.body);
    drawArms(result.body);
    updateStats(result.body);
  } else {
    showNotice(el("p", { className: "error", attrs: { role: "alert" },
                         text: `Could not refresh: ${describeError(result)}` }));
  }
  setTimeout(poll, REFRESH_MS);
}

document.getElementById("copy-mermaid").addEventListener("click", async (event) => {
  const button = event.currentTarget;
  try {
    await navigator.clipboard.writeText(mermaidBox.textContent);
    button.textContent = "Copied";
  } catch {
    // No clipboard API on plain-http pages other than localhost: select it for Ctrl+C.
    window.getSelection().selectAllChildren(mermaidBox);
    button.textContent = "Selected: press Ctrl+C";
  }
});

installNavigation("pipeline");
poll();
