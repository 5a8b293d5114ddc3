// /inspect/{dialog_id}: one dialog, turn by turn, from GET /api/dialogs/{id}.
//
// For each turn: what the user said and its annotations, the skill selectors' decisions
// and why each skill that did not run was skipped, every hypothesis with its own
// annotations (the chosen one highlighted), the selector's reason, the attributes after
// the turn, the services' errors and a timeline of the service calls from the trace.
// The API needs the agent's key when CHORUS_API_KEY is set: the page then asks for it.

import {
  callApi, describeError, duration, el, installNavigation, keyPrompt, needsKey, pretty, replace,
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

/** A JSON value as a block, or a muted "none". */
function jsonBlock(value, emptyText = "none") {
  return isEmpty(value) ? el("span", { className: "muted", text: emptyText })
                        : el("pre", { className: "json", text: pretty(value) });
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "–";
}

function section(title, className, ...content) {
  return el("section", { className }, el("h3", { text: title }), ...content);
}

/** Utterances paired into turns: a human utterance and the bot's answer to it. */
function pairTurns(utterances) {
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

function annotationList(annotations) {
  const names = Object.keys(annotations || {});
  if (names.length === 0) return el("span", { className: "muted", text: "none" });
  return el("dl", { className: "annotations" },
    names.map((name) => [el("dt", { text: name }), el("dd", {}, jsonBlock(annotations[name]))]));
}

const EXTRA_SKIPPED = new Set(["skill_name", "text", "confidence", "annotations",
                               "human_attributes", "bot_attributes"]);

function hypothesisRow(hypothesis, index, chosen) {
  const extra = Object.fromEntries(
    Object.entries(hypothesis).filter(([key]) => !EXTRA_SKIPPED.has(key)));
  const attributes = { human_attributes: hypothesis.human_attributes,
                       bot_attributes: hypothesis.bot_attributes, ...extra };
  const shown = Object.fromEntries(Object.entries(attributes).filter(([, v]) => !isEmpty(v)));
  return el("tr", { className: chosen ? "hypothesis chosen" : "hypothesis",
                    dataset: { skill: hypothesis.skill_name } },
    el("td", { className: "index", text: index + 1 }),
    el("td", { className: "skill-cell" },
      el("span", { className: "skill", text: hypothesis.skill_name }),
      chosen ? el("span", { className: "chosen-badge", text: "chosen" }) : null),
    el("td", { className: "text", text: hypothesis.text }),
    el("td", { className: "number", text: hypothesis.confidence.toFixed(2) }),
    el("td", {}, annotationList(hypothesis.annotations)),
    el("td", {}, jsonBlock(shown)));
}

function hypothesesTable(human, bot) {
  if (human.hypotheses.length === 0) {
    return el("p", { className: "muted", text: "No hypotheses: every skill failed or none ran." });
  }
  const chosen = chosenIndex(human, bot);
  return el("table", { className: "hypotheses" },
    el("thead", {}, el("tr", {},
      ["#", "Skill", "Text", "Confidence", "Annotations", "Attributes and extra fields"]
        .map((title) => el("th", { text: title })))),
    el("tbody", {}, human.hypotheses.map((h, i) => hypothesisRow(h, i, i === chosen))));
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

function utteranceBox(utterance, who) {
  if (!utterance) return el("div", { className: `utterance ${who} missing`, text: "(none)" });
  const skill = utterance.speaker === "bot"
    ? [el("span", { className: "skill", text: utterance.active_skill }),
       el("span", { className: "confidence", text: utterance.confidence.toFixed(2) })]
    : [];
  return el("div", { className: `utterance ${who}` },
    el("span", { className: "who", text: who === "human" ? "User" : "Bot" }),
    el("p", { className: "text", text: utterance.text }), skill);
}

function attributesSection(turn, after) {
  const chosen = chosenIndex(turn.human, turn.bot);
  const hypothesis = chosen >= 0 ? turn.human.hypotheses[chosen] : null;
  return section("Attributes after the turn", "attributes",
    el("div", { className: "columns" },
      el("div", {}, el("h4", { text: "Human" }), jsonBlock(after.human)),
      el("div", {}, el("h4", { text: "Bot" }), jsonBlock(after.bot)),
      el("div", {}, el("h4", { text: "Merged from the chosen hypothesis" }),
         jsonBlock(hypothesis ? { human_attributes: hypothesis.human_attributes,
                                  bot_attributes: hypothesis.bot_attributes } : null,
                   "nothing"))));
}

function turnItem(turn, number, after) {
  const { human, bot } = turn;
  const reason = bot && bot.attributes ? bot.attributes.selector_reason : undefined;
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
              hypothesesTable(human, bot)),
      attributesSection(turn, after),
      section("Timeline", "timeline-section", timeline(human.trace, skipReasons(human))),
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

function render(dialog) {
  replace(summary, summaryBlock(dialog));
  summary.hidden = false;
  const turns = pairTurns(dialog.utterances);
  // A turn's "after" is what the next turn started from (its snapshots of the profiles),
  // or the profiles as they are now for the last turn.
  const items = turns.map((turn, i) => {
    const next = turns[i + 1];
    const after = {
      human: next && next.human ? next.human.user.attributes : dialog.human.attributes,
      bot: next && next.bot ? next.bot.user.attributes : dialog.bot.attributes,
    };
    return turnItem(turn, i + 1, after);
  });
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

installNavigation("inspect");
if (dialogId) {
  replace(document.getElementById("dialog-id"), dialogId);
  load();
} else {
  replace(document.getElementById("dialog-id"), "?");
  openForm.hidden = false;
  openForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = document.getElementById("open-id").value.trim();
    if (id) window.location.assign(`/inspect/${encodeURIComponent(id)}`);
  });
}
