// /pipeline: the configured service graph, drawn as SVG, and each service's live numbers,
// polled from GET /api/pipeline every few seconds.
//
// The agent sends a layout (a column and a row per service); this draws it to fit the
// box's width: the columns side by side, or on a phone stacked top to bottom. No library:
// SVG elements made one by one, text set as text.

import {
  callApi, describeError, duration, el, installNavigation, keyPrompt, labelCells, needsKey, replace,
  svg,
} from "/pages/common.js";

const REFRESH_MS = 3000;
const NODE_H = 46;
const NODE_PAD = 12;
const MIN_NODE_W = 120;
const MAX_NODE_W = 260;
const COL_GAP = 64;
const ROW_GAP = 14;
const STAGE_PAD = 12;
const HEADER = 30;
const LANE_GAP = 14;
const BAND_GAP = 30;
/** Below this scale the graph's text is too small to read: the stages stack top to
 *  bottom instead of being shrunk further (a phone). */
const MIN_SCALE = 0.8;
/** The narrowest the graph is drawn (a window being closed can be 1 px wide). */
const MIN_TALL_W = 200;

const notice = document.getElementById("notice");
const graph = document.getElementById("graph");
const statsTable = document.getElementById("stats");
const statsBody = statsTable.querySelector("tbody");
const updated = document.getElementById("updated");
const mermaidBox = document.getElementById("mermaid");
const disabledSection = document.getElementById("disabled-section");
const disabledBody = document.querySelector("#disabled tbody");
const armsSection = document.getElementById("arms-section");
const armsBody = document.querySelector("#arms tbody");

let drawnShape = null; // the graph as last drawn, to redraw only when the config changed
let drawnInfo = null; // ... and what it was drawn from, to redraw when the window's width changes
let drawnWidth = null;

function showNotice(...content) {
  replace(notice, ...content);
  notice.hidden = content.length === 0;
}

/** Where a service runs, short enough for its box: host:port, or "in process" for one the
 *  agent runs itself (the whole target is in the box's tooltip and in the table). */
function shortTarget(target) {
  if (target.startsWith("module:")) return "in process";
  const match = /^https?:\/\/([^/]+)/.exec(target);
  return match ? match[1] : target;
}

function stageLabel(role) {
  return role.replace(/_/g, " ");
}

/** The widest of these texts as drawn with a class, in the graph's own font. */
function textWidth(className, texts) {
  const probe = svg("svg", { attrs: { width: 0, height: 0 } },
    texts.map((text) => svg("text", { className, text })));
  graph.append(probe);
  const width = Math.max(0, ...[...probe.children].map((t) => t.getComputedTextLength()));
  probe.remove();
  return width;
}

/** One width for every box: the longest name or address fits (up to MAX_NODE_W: longer
 *  ones are cut with "…"), and so does the label of a one-column stage. */
function nodeWidth(info) {
  const text = Math.max(textWidth("node-name", info.services.map((s) => s.name)),
                        textWidth("node-target", info.services.map((s) => shortTarget(s.target))));
  const label = textWidth("stage-label", info.stages.map((s) => stageLabel(s.role)));
  return Math.ceil(Math.min(Math.max(MIN_NODE_W, text + 2 * NODE_PAD, label - 2 * STAGE_PAD + 20),
                            MAX_NODE_W));
}

function graphShape(info) {
  const column = new Map(info.services.map((s) => [s.name, s.column]));
  const byColumn = new Map();
  for (const s of info.services) {
    if (!byColumn.has(s.column)) byColumn.set(s.column, []);
    byColumn.get(s.column).push(s);
  }
  for (const list of byColumn.values()) list.sort((a, b) => a.row - b.row);
  const skipping = info.edges.filter((e) => column.get(e.target) - column.get(e.source) > 1);
  return { column, byColumn, skipping };
}

/** Stages left to right, a column of boxes per stage column (the agent's layout). An arrow
 *  to the next column is an S-curve; one that skips columns runs along a lane below. */
function wideLayout(info, width) {
  const { byColumn, skipping } = graphShape(info);
  const columns = Math.max(...info.stages.map((s) => s.last_column)) + 1;
  const rows = Math.max(...[...byColumn.values()].map((list) => list.length));
  const nodesBottom = HEADER + rows * (NODE_H + ROW_GAP);
  const height = nodesBottom + skipping.length * LANE_GAP + STAGE_PAD;
  const x = (col) => STAGE_PAD + col * (width + COL_GAP);
  const position = new Map(info.services.map((s) => {
    const offset = ((rows - byColumn.get(s.column).length) * (NODE_H + ROW_GAP)) / 2;
    return [s.name, { x: x(s.column), y: HEADER + offset + s.row * (NODE_H + ROW_GAP) }];
  }));
  const stages = info.stages.map((stage) => {
    const left = x(stage.first_column) - STAGE_PAD + 2;
    const right = x(stage.last_column) + width + STAGE_PAD - 2;
    return { role: stage.role, left, top: 2, right, bottom: height - 2 };
  });
  const flows = info.stages.slice(1).map((stage) => {
    const to = x(stage.first_column) - STAGE_PAD - 2;
    const from = to - COL_GAP + 2 * STAGE_PAD + 4;
    return `M${from},16 L${to},16`; // beside the stage labels, clear of the service arrows
  });
  const edgePath = (edge) => {
    const [a, b] = [position.get(edge.source), position.get(edge.target)];
    const index = skipping.indexOf(edge);
    if (index < 0) {
      const [x1, y1, x2, y2] = [a.x + width, a.y + NODE_H / 2, b.x - 2, b.y + NODE_H / 2];
      const bend = Math.max((x2 - x1) / 2, 20);
      return `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`;
    }
    const lane = nodesBottom + index * LANE_GAP + LANE_GAP / 2;
    const [x1, y1, x2, y2] = [a.x + width / 2, a.y + NODE_H, b.x + width / 2 - 8, b.y + NODE_H + 2];
    return `M${x1},${y1} L${x1},${lane - 8} Q${x1},${lane} ${x1 + 8},${lane} ` +
           `L${x2 - 8},${lane} Q${x2},${lane} ${x2},${lane - 8} L${x2},${y2}`;
  };
  return { total: x(columns) - COL_GAP + STAGE_PAD, height, width, position, stages, flows,
           edgePath };
}

/** Stages top to bottom, for a window too narrow for them side by side: a band per stage,
 *  its columns one after another, each column's boxes in lines that fit the width. An
 *  arrow leaves its box downwards, runs in the gap below that line to a lane of its own on
 *  the right, down the lane, and in the gap above its target's line into the target's top:
 *  it crosses no box. */
function tallLayout(info, nodeW, available) {
  const { byColumn } = graphShape(info);
  // A lane per arrow, at most a quarter of the width between them.
  const laneGap = Math.min(LANE_GAP, available / 4 / Math.max(info.edges.length, 1));
  const lanes = info.edges.length * laneGap;
  const inner = available - lanes - 2 * STAGE_PAD;
  // Two boxes a line when two narrower boxes still fit their text (a phone), else as many
  // as fit.
  const half = (inner - ROW_GAP) / 2;
  const width = nodeW > half && half >= MIN_NODE_W - 2 * NODE_PAD ? half
    : Math.max(Math.min(nodeW, inner), 60);
  const perLine = Math.max(1, Math.floor((inner + ROW_GAP) / (width + ROW_GAP)));
  const position = new Map();
  const stages = [];
  const flows = [];
  let top = 2;
  for (const stage of info.stages) {
    let y = top + HEADER;
    for (let col = stage.first_column; col <= stage.last_column; col += 1) {
      const list = byColumn.get(col) || [];
      for (let start = 0; start < list.length; start += perLine) {
        const line = list.slice(start, start + perLine);
        const lineWidth = line.length * width + (line.length - 1) * ROW_GAP;
        const left = STAGE_PAD + (inner - lineWidth) / 2;
        line.forEach((s, i) => position.set(s.name, { x: left + i * (width + ROW_GAP), y }));
        y += NODE_H + ROW_GAP;
      }
    }
    const bottom = y - ROW_GAP + STAGE_PAD;
    if (stages.length) {
      const mid = STAGE_PAD + inner / 2;
      flows.push(`M${mid},${top - BAND_GAP + 4} L${mid},${top - 4}`);
    }
    stages.push({ role: stage.role, left: 2, top, right: inner + 2 * STAGE_PAD - 2, bottom });
    top = bottom + BAND_GAP;
  }
  const height = top - BAND_GAP + 2;
  const edgePath = (edge) => {
    const [a, b] = [position.get(edge.source), position.get(edge.target)];
    const lane = inner + 2 * STAGE_PAD + (info.edges.indexOf(edge) + 0.5) * laneGap;
    const [x1, y1, x2, y2] = [a.x + width / 2, a.y + NODE_H, b.x + width / 2, b.y - 2];
    const [below, above] = [y1 + ROW_GAP / 2, b.y - ROW_GAP / 2];
    return `M${x1},${y1} L${x1},${below} L${lane},${below} L${lane},${above} ` +
           `L${x2},${above} L${x2},${y2}`;
  };
  return { total: inner + 2 * STAGE_PAD + lanes, height, width, position, stages, flows,
           edgePath };
}

/** Cut a text with "…" until it fits ``room`` (the whole text stays in the tooltip). */
function fitText(text, room) {
  const full = text.textContent;
  if (text.getComputedTextLength() <= room) return;
  let keep = full.length;
  while (keep > 1 && text.getComputedTextLength() > room) {
    keep -= 1;
    text.textContent = `${full.slice(0, keep)}…`;
  }
}

/** The graph for the box's width: stages side by side, shrunk to fit down to MIN_SCALE;
 *  narrower than that, stacked top to bottom. Every label fits its box. */
function drawGraph(info) {
  const style = getComputedStyle(graph);
  const available = Math.max(graph.clientWidth - parseFloat(style.paddingLeft) -
    parseFloat(style.paddingRight), MIN_TALL_W);
  const nodeW = nodeWidth(info);
  let layout = wideLayout(info, nodeW);
  const fits = layout.total * MIN_SCALE <= available;
  if (!fits) layout = tallLayout(info, nodeW, available);
  const { total, height, width, position } = layout;
  const scale = Math.min(1, available / total);

  const stages = layout.stages.map((stage) =>
    svg("g", { className: "stage", dataset: { role: stage.role } },
      svg("rect", { attrs: { x: stage.left, y: stage.top, width: stage.right - stage.left,
                             height: stage.bottom - stage.top, rx: 10 } }),
      svg("text", { className: "stage-label", text: stageLabel(stage.role),
                    attrs: { x: (stage.left + stage.right) / 2, y: stage.top + 18,
                             "text-anchor": "middle" } })));
  const flow = layout.flows.map((d) =>
    svg("path", { className: "stage-flow", attrs: { d, "marker-end": "url(#arrow)" } }));
  const edges = info.edges.map((edge) => svg("path", {
    className: edge.required ? "edge required" : "edge",
    dataset: { source: edge.source, target: edge.target },
    attrs: { d: layout.edgePath(edge), "marker-end": "url(#arrow)" },
  }));
  const nodes = info.services.map((service) => {
    const { x: left, y: top } = position.get(service.name);
    const failing = (info.stats[service.name] || {}).errors > 0;
    return svg("g", { className: failing ? "node failing" : "node",
                      dataset: { service: service.name } },
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
  const drawing = svg("svg", {
    className: fits ? "wide" : "tall",
    attrs: { viewBox: `0 0 ${total} ${height}`, width: total * scale, height: height * scale,
             role: "img", "aria-label": "pipeline graph" },
  }, defs, stages, flow, edges, nodes);
  replace(graph, drawing);
  for (const text of drawing.querySelectorAll(".node text")) fitText(text, width - 2 * NODE_PAD);
  for (const stage of layout.stages) {
    const text = drawing.querySelector(`g.stage[data-role="${CSS.escape(stage.role)}"] text`);
    fitText(text, stage.right - stage.left - 8);
  }
  drawnInfo = info;
  drawnWidth = graph.clientWidth;
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
  labelCells(document.getElementById("arms"));
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
  labelCells(statsTable);
  replace(disabledBody, disabled.map(disabledRow));
  labelCells(document.getElementById("disabled"));
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

// The layout depends on the box's width: draw again when the window changes it.
window.addEventListener("resize", () => {
  if (drawnInfo && graph.clientWidth !== drawnWidth) drawGraph(drawnInfo);
});

installNavigation("pipeline");
poll();
