// /inspect/{dialog_id}: one dialog, turn by turn, from GET /api/dialogs/{id}.
//
// For each turn: what the user said and its annotations, the skill selectors' decisions
// and why each skill that did not run was skipped, every hypothesis with its own
// annotations (the chosen one highlighted), the selector's reason, the attributes after
// the turn, the services' errors and a timeline of the service calls from the trace.
// Attributes are shown as what each turn changed, the rest folded: the bot's persona, set
// once, is not repeated in every turn, and a long dialog stays readable.
// The API needs the agent's key when CHORUS_API_KEY is set: the page then asks for it.

import {
  callApi, describeError, duration, el, installNavigation, keyPrompt, labelCells, needsKey, oneLine,
  pretty, replace,
} from "/pages/common.js";

const notice = document.getElementById("notice");
const summary = document.getElementById("summary");
const turnsList = document.getElementById("turns");
const openForm = document.getElementById("open-form");

const dialogId = decodeURIComponent(window.location.pathname.replace(/^\/inspect\/?/, ""));

function showNotice(...content) {
  replace(notice, ...content);
  notice.hidden = content.length === 0;
}

function isEmpty(value) {
  return value === null || value === undefined ||
    (typeof value === "object" && Object.keys(value).length === 0);
}

/** A JSON value as a block, or a muted "none"; parts up to ``width`` characters on a line. */
function jsonBlock(value, emptyText = "none", width = 64) {
  return isEmpty(value) ? el("span", { className: "muted", text: emptyText })
                        : el("pre", { className: "json", text: pretty(value, "", width) });
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "–";
}

function section(title, className, ...content) {
  return el("section", { className }, el("h3", { text: title }), ...content);
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function sameValue(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null ||
      Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length &&
    keys.every((key) => Object.hasOwn(b, key) && sameValue(a[key], b[key]));
}

/** What changed from ``before`` to ``after``, nested objects key by key: a list of
 *  {path, kind, before, after}, kind "added", "removed", "changed" or "appended" (a list
 *  that grew at its end: ``after`` is what was added). */
function changes(before, after, path = []) {
  if (sameValue(before, after)) return [];
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    return keys.flatMap((key) => changes(before[key], after[key], [...path, key]));
  }
  if (before === undefined) return [{ path, kind: "added", after }];
  if (after === undefined) return [{ path, kind: "removed", before }];
  if (Array.isArray(before) && Array.isArray(after) && after.length > before.length &&
      before.every((item, i) => sameValue(item, after[i]))) {
    return [{ path, kind: "appended", after: after.slice(before.length) }];
  }
  return [{ path, kind: "changed", before, after }];
}

/** A value in a line of text; a long one folded, its summary saying what it holds. */
function valueView(value) {
  const line = oneLine(value);
  if (line.length <= 80) return el("code", { className: "value", text: line });
  let summary;
  if (Array.isArray(value)) summary = `[ ${value.length} item${value.length === 1 ? "" : "s"} ]`;
  else if (isObject(value)) {
    const keys = Object.keys(value);
    summary = `{ ${keys.length} keys: ${keys.slice(0, 4).join(", ")}${keys.length > 4 ? ", …" : ""} }`;
  } else summary = `${line.slice(0, 60)}…`;
  return el("details", { className: "value" }, el("summary", {}, el("code", { text: summary })),
            el("pre", { className: "json", text: pretty(value) }));
}

const CHANGE_WORDS = { added: "new", removed: "removed", changed: "now", appended: "added" };

/** Each change on a line: the attribute's path, what happened, the value. */
function changeList(found) {
  return el("ul", { className: "changes" }, found.map((change) => {
    const path = change.path.join(".");
    const values = change.kind === "changed"
      ? [valueView(change.before), " → ", valueView(change.after)]
      : [valueView(change.kind === "removed" ? change.before : change.after)];
    return el("li", { className: `change ${change.kind}`, dataset: { path } },
      el("code", { className: "path", text: path }), " ",
      el("span", { className: "change-kind", text: CHANGE_WORDS[change.kind] }), " ", values);
  }));
}

/** A folded block, its summary always in view. */
function folded(summary, className, ...content) {
  return el("details", { className }, el("summary", { text: summary }), ...content);
}

/** Utterances paired into turns: a human utterance and the bot's answer to it. */
export function pairTurns(utterances) {
  const turns = [];
  for (const utterance of utterances) {
    const last = turns[turns.length - 1];
    if (utterance.speaker === "human") turns.push({ human: utterance, bot: null });
    else if (last && last.bot === null) last.bot = utterance;
    else turns.push({ human: null, bot: utterance });
  }
  return turns;
}

/** Which hypothesis became the answer: the bot utterance keeps its skill and its text
 *  before any rewrite (orig_text). */
function chosenIndex(human, bot) {
  if (!human || !bot || bot.orig_text === null) return -1;
  return human.hypotheses.findIndex(
    (h) => h.skill_name === bot.active_skill && h.text === bot.orig_text &&
           h.confidence === bot.confidence);
}

/** An annotator's output on one line when it fits this many characters (it wraps in a
 *  narrow window): four annotators take four lines, not twenty. */
const ANNOTATION_WIDTH = 100;

function annotationList(annotations) {
  const names = Object.keys(annotations || {});
  if (names.length === 0) return el("span", { className: "muted", text: "none" });
  return el("dl", { className: "annotations" },
    names.map((name) => [el("dt", { text: name }),
                         el("dd", {}, jsonBlock(annotations[name], "none", ANNOTATION_WIDTH))]));
}

const EXTRA_SKIPPED = new Set(["skill_name", "text", "confidence", "annotations",
                               "human_attributes", "bot_attributes"]);

/** What a hypothesis asks to merge into the human's and the bot's attributes, as changes to
 *  the attributes the turn started from; what it hands back as it already was is folded
 *  under one line. */
function mergeView(hypothesis, before) {
  const found = [];
  const unchanged = {};
  for (const side of ["human", "bot"]) {
    const asked = hypothesis[`${side}_attributes`] || {};
    const start = before[side] || {};
    found.push(...changes(start, { ...start, ...asked }).map(
      (change) => ({ ...change, path: [side, ...change.path] })));
    for (const [key, value] of Object.entries(asked)) {
      if (sameValue(start[key], value)) unchanged[`${side}.${key}`] = value;
    }
  }
  const names = Object.keys(unchanged);
  return [
    found.length ? changeList(found) : null,
    names.length ? folded(`unchanged: ${names.join(", ")}`, "unchanged",
                          el("pre", { className: "json", text: pretty(unchanged) })) : null,
  ];
}

function hypothesisRow(hypothesis, index, chosen, before) {
  const extra = Object.fromEntries(Object.entries(hypothesis).filter(
    ([key, value]) => !EXTRA_SKIPPED.has(key) && !isEmpty(value)));
  const merge = mergeView(hypothesis, before);
  const nothing = isEmpty(extra) && merge.every((part) => part === null);
  return el("tr", { className: chosen ? "hypothesis chosen" : "hypothesis",
                    dataset: { skill: hypothesis.skill_name } },
    el("td", { className: "index", text: index + 1 }),
    el("td", { className: "skill-cell" },
      el("span", { className: "skill", text: hypothesis.skill_name }),
      chosen ? el("span", { className: "chosen-badge", text: "chosen" }) : null),
    el("td", { className: "text", text: hypothesis.text }),
    el("td", { className: "number", text: hypothesis.confidence.toFixed(2) }),
    el("td", { className: "wide" }, annotationList(hypothesis.annotations)),
    el("td", { className: "wide attributes-cell" },
       nothing ? el("span", { className: "muted", text: "none" }) : null,
       isEmpty(extra) ? null : jsonBlock(extra), merge));
}

function hypothesesTable(human, bot, before) {
  if (human.hypotheses.length === 0) {
    return el("p", { className: "muted", text: "No hypotheses: every skill failed or none ran." });
  }
  const chosen = chosenIndex(human, bot);
  const table = el("table", { className: "hypotheses stacking" },
    el("thead", {}, el("tr", {},
      ["#", "Skill", "Text", "Confidence", "Annotations", "Extra fields and attribute changes"]
        .map((title) => el("th", { text: title })))),
    el("tbody", {}, human.hypotheses.map((h, i) => hypothesisRow(h, i, i === chosen, before))));
  labelCells(table);
  return table;
}

function errorList(errors) {
  return el("ul", { className: "errors" }, errors.map((error) =>
    el("li", { className: `error kind-${error.kind}` },
      el("strong", { text: error.service }), ` · ${error.kind}: `,
      el("span", { text: error.message }))));
}

/** A call's role, and a dp-agent service's group when it says more ("services · sentiment"). */
function roleText(call) {
  const group = call.dream_group && call.dream_group !== call.role ? ` · ${call.dream_group}` : "";
  return `${call.role}${group}`;
}

/** Why each skill that did not run this turn was skipped: a required service's failure
 *  (recorded as an error), or the stored decision of the skill selectors that chose other
 *  skills and decide about this one. Turns stored before decisions were kept say so. */
function skipReasons(human) {
  const decisions = human.skill_selection || [];
  const reasons = {};
  for (const call of human.trace) {
    if (call.role !== "skills" || call.outcome !== "skipped") continue;
    const failure = human.errors.find(
      (e) => e.service === call.service && e.kind === "skipped");
    if (failure) {
      reasons[call.service] = failure.message;
      continue;
    }
    const binding = decisions.filter((d) => d.skills.length > 0 &&
      !d.skills.includes(call.service) && (d.decides == null || d.decides.includes(call.service)));
    reasons[call.service] = binding.length
      ? binding.map((d) => `not chosen by ${d.selector}: ${d.reason || "no reason given"}`)
          .join("; ")
      : "not chosen by the skill selector (no decision stored with this turn)";
  }
  return reasons;
}

/** The skill selectors' decisions, and each skipped skill with the reason. */
function selectionSection(human) {
  const decisions = human.skill_selection || [];
  const reasons = skipReasons(human);
  const skipped = Object.keys(reasons);
  if (decisions.length === 0 && skipped.length === 0) return null;
  return section("Skill selection", "selection-section",
    el("ul", { className: "selector-decisions" }, decisions.map((d) =>
      el("li", { className: "selector-decision", dataset: { selector: d.selector } },
        el("strong", { text: d.selector }), " chose ",
        el("span", { className: "chosen-skills",
                     text: d.skills.length ? d.skills.join(", ") : "every skill" }),
        ": ", el("span", { className: "selector-reason", text: d.reason || "no reason given" })))),
    skipped.length === 0 ? el("p", { className: "muted", text: "Every skill ran." })
      : el("ul", { className: "skipped-skills" }, skipped.map((name) =>
        el("li", { className: "skipped-skill", dataset: { skill: name } },
          el("strong", { text: name }), " did not run: ",
          el("span", { className: "skip-reason", text: reasons[name] })))));
}

/** Bars on one time axis, from the turn's start to its last service's end. */
function timeline(trace, reasons = {}) {
  if (trace.length === 0) return el("p", { className: "muted", text: "No trace recorded." });
  const calls = [...trace].sort((a, b) => a.start - b.start);
  const total = Math.max(...calls.map((c) => c.start + c.duration), 1e-6);
  const rows = calls.map((call) => {
    const why = reasons[call.service] ? ` (${reasons[call.service]})` : "";
    const bar = el("div", {
      className: "timeline-bar",
      title: `${call.service}: ${call.outcome}${why}, started at ${duration(call.start)}, ` +
             `took ${duration(call.duration)}, batch of ${call.batch_size}`,
    });
    bar.style.left = `${(call.start / total) * 100}%`;
    bar.style.width = `${Math.max((call.duration / total) * 100, 0.6)}%`;
    const batch = call.batch_size > 1 ? ` · batch ${call.batch_size}` : "";
    return el("div", { className: `timeline-row outcome-${call.outcome}`,
                       dataset: { service: call.service, outcome: call.outcome } },
      el("span", { className: "timeline-label" }, el("span", { text: call.service }),
         el("small", { text: roleText(call) })),
      el("div", { className: "timeline-track" }, bar),
      el("span", { className: "timeline-value",
                   text: `${duration(call.duration)}${batch} · ${call.outcome}` }));
  });
  return el("div", { className: "timeline" },
    el("div", { className: "timeline-scale" }, el("span"),
       el("span", { className: "timeline-axis" }, el("span", { text: "0" }),
          el("span", { text: duration(total) }))),
    rows,
    el("div", { className: "timeline-legend" },
      ["ok", "error", "timeout", "skipped", "dropped"].map((outcome) =>
        el("span", { className: `legend outcome-${outcome}`, text: outcome }))));
}

/** The timeline in a line, shown while it is folded: its calls, its length, the slowest
 *  call and the outcomes other than ok. */
function timelineSummary(trace) {
  const total = Math.max(...trace.map((c) => c.start + c.duration));
  const slowest = trace.reduce((a, b) => (b.duration > a.duration ? b : a));
  const outcomes = {};
  for (const call of trace) {
    if (call.outcome !== "ok") outcomes[call.outcome] = (outcomes[call.outcome] || 0) + 1;
  }
  const others = Object.entries(outcomes).map(([outcome, n]) => `${n} ${outcome}`);
  return [`${trace.length} calls in ${duration(total)}`,
          `slowest ${slowest.service} (${duration(slowest.duration)})`, ...others].join(" · ");
}

function utteranceBox(utterance, who) {
  if (!utterance) return el("div", { className: `utterance ${who} missing`, text: "(none)" });
  const skill = utterance.speaker === "bot"
    ? [el("span", { className: "skill", text: utterance.active_skill }),
       el("span", { className: "confidence", text: utterance.confidence.toFixed(2) })]
    : [];
  const speaker = who === "human" ? "User"
    : utterance.operator ? `Operator ${utterance.operator}` : "Bot";
  return el("div", { className: `utterance ${who}${utterance.operator ? " operator" : ""}` },
    el("span", { className: "who", text: speaker }),
    el("p", { className: "text", text: utterance.text }), skill);
}

/** What the turn changed in the human's and the bot's attributes; all of them after the
 *  turn, folded. */
function attributesSection(before, after) {
  const side = (name, title) => {
    const found = changes(before[name] || {}, after[name] || {});
    return el("div", { className: "attribute-changes", dataset: { side: name } },
      el("h4", { text: title }),
      found.length ? changeList(found) : el("span", { className: "muted", text: "no change" }));
  };
  return section("Attributes the turn changed", "attributes",
    el("div", { className: "columns" }, side("human", "Human"), side("bot", "Bot")),
    folded("All attributes after the turn", "all-attributes",
      el("div", { className: "columns" },
        el("div", {}, el("h4", { text: "Human" }), jsonBlock(after.human)),
        el("div", {}, el("h4", { text: "Bot" }), jsonBlock(after.bot)))));
}

/** A turn of a dialog handed to a person (docs/handoff.md): the user's message kept for
 *  the operator, no service called; or an operator's words. */
function handoffNote(human, bot) {
  const kept = human && human.handed_off;
  const operator = bot && bot.operator;
  if (!kept && !operator) return null;
  const said = [kept ? "the dialog was with a person: no service saw this message" : null,
                operator ? `answered by operator ${operator}, not by the bot` : null];
  return el("p", { className: "handoff-note", attrs: { role: "note" } },
    el("strong", { text: "Handed to a person: " }),
    el("span", { text: said.filter(Boolean).join("; ") }));
}

export function turnItem(turn, number, before, after) {
  const { human, bot } = turn;
  const reason = bot && bot.attributes ? bot.attributes.selector_reason : undefined;
  const note = handoffNote(human, bot);
  if (note) {
    return el("li", { className: "turn handed-off", dataset: { turn: number } },
      el("header", {}, el("h2", { text: `Turn ${number}` }),
         el("time", { text: when((human || bot).date_time) })),
      el("div", { className: "exchange" }, utteranceBox(human, "human"), utteranceBox(bot, "bot")),
      note);
  }
  return el("li", { className: "turn", dataset: { turn: number } },
    el("header", {}, el("h2", { text: `Turn ${number}` }),
       el("time", { text: when((human || bot).date_time) })),
    el("div", { className: "exchange" }, utteranceBox(human, "human"), utteranceBox(bot, "bot")),
    el("p", { className: "reason" }, el("strong", { text: "Selector's reason: " }),
       el("span", { text: reason || "none given" })),
    human ? [
      section("Annotations", "annotations-section", annotationList(human.annotations)),
      human.errors.length ? section("Errors", "errors-section", errorList(human.errors)) : null,
      selectionSection(human),
      section(`Hypotheses (${human.hypotheses.length})`, "hypotheses-section",
              hypothesesTable(human, bot, before)),
      attributesSection(before, after),
      section("Timeline", "timeline-section",
              human.trace.length === 0 ? timeline(human.trace)
                : folded(timelineSummary(human.trace), "timeline-fold",
                         timeline(human.trace, skipReasons(human)))),
      isEmpty(human.attributes) ? null
        : section("Message attributes", "message-attributes", jsonBlock(human.attributes)),
    ] : null,
    bot && !isEmpty(bot.annotations)
      ? section("Response annotations", "response-annotations", annotationList(bot.annotations))
      : null);
}

function summaryBlock(dialog) {
  return [
    el("dl", { className: "facts" },
      el("dt", { text: "User" }), el("dd", { text: dialog.human.user_external_id }),
      el("dt", { text: "Channel" }), el("dd", { text: dialog.channel_type }),
      el("dt", { text: "Started" }), el("dd", { text: when(dialog.date_start) }),
      el("dt", { text: "Finished" }),
      el("dd", { text: dialog.date_finish ? when(dialog.date_finish) : "open" }),
      el("dt", { text: "Rating" }), el("dd", { text: dialog.rating ?? "–" }),
      el("dt", { text: "Arm" }), el("dd", { className: "arm", text: dialog.arm ?? "–" })),
    el("div", { className: "columns" },
      el("div", {}, el("h4", { text: "Human attributes now" }),
         jsonBlock(dialog.human.attributes)),
      el("div", {}, el("h4", { text: "Bot attributes now" }), jsonBlock(dialog.bot.attributes)),
      el("div", {}, el("h4", { text: "Dialog attributes" }), jsonBlock(dialog.attributes))),
  ];
}

/** Every turn of ``dialog`` as the inspector shows it (the operator inbox shows them too). */
export function turnItems(dialog) {
  const turns = pairTurns(dialog.utterances);
  // A turn starts from its utterances' snapshots of the profiles (taken before its
  // attributes were merged); its "after" is what the next turn started from, or the
  // profiles as they are now for the last turn.
  const startOf = (turn) => ({
    human: turn && turn.human ? turn.human.user.attributes : undefined,
    bot: turn && turn.bot ? turn.bot.user.attributes : undefined,
  });
  let before = { human: {}, bot: {} };
  const items = turns.map((turn, i) => {
    const start = startOf(turn);
    before = { human: start.human ?? before.human, bot: start.bot ?? before.bot };
    const next = startOf(turns[i + 1]);
    const after = { human: next.human ?? dialog.human.attributes,
                    bot: next.bot ?? dialog.bot.attributes };
    const item = turnItem(turn, i + 1, before, after);
    before = after;
    return item;
  });
  return items;
}

function render(dialog) {
  replace(summary, summaryBlock(dialog));
  summary.hidden = false;
  const items = turnItems(dialog);
  replace(turnsList, items.length ? items
    : el("li", { className: "muted", text: "This dialog has no utterances yet." }));
}

async function load() {
  showNotice(el("p", { className: "muted", text: "Loading…" }));
  const result = await callApi(`/api/dialogs/${encodeURIComponent(dialogId)}?view=chorus`);
  if (needsKey(result)) {
    showNotice(keyPrompt(result, load));
    return;
  }
  if (!result.ok) {
    const message = result.status === 404 ? `There is no dialog with id ${dialogId}.`
                                          : describeError(result);
    showNotice(el("p", { className: "error", attrs: { role: "alert" }, text: message }));
    return;
  }
  showNotice();
  render(result.body);
}

function start() {
  installNavigation("inspect");
  if (dialogId) {
    replace(document.getElementById("dialog-id"), dialogId);
    load();
    return;
  }
  replace(document.getElementById("dialog-id"), "?");
  openForm.hidden = false;
  openForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = document.getElementById("open-id").value.trim();
    if (id) window.location.assign(`/inspect/${encodeURIComponent(id)}`);
  });
}

// The operator inbox imports the turns' rendering (turnItems) from this module: only the
// inspector's own page loads a dialog here.
if (document.body.classList.contains("page-inspect")) start();
