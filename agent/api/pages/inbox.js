// /inbox: the operator's inbox (docs/handoff.md, docs/pages.md). It lists the dialogs
// waiting for a person and those taken, with how long each has waited; an operator claims
// one, reads its history and the inspector's view of each turn, follows the user's new
// messages live, writes replies and hands the dialog back to the bot.
//
// It reads only the operator routes (/api/operator/..., docs/api.md) with the operator key
// (X-Operator-Key), never the API key: an operator sees only dialogs handed to people. The
// key and the operator's name are kept in the tab's sessionStorage. Everything a user
// wrote goes into the page as text (common.js).

import {
  describeError, el, installNavigation, replace, requestJson, serverSentEvents,
} from "/pages/common.js";
import { turnItems } from "/pages/inspect.js";

const KEY_STORAGE = "chorus.operatorKey";
const NAME_STORAGE = "chorus.operatorName";
/** Seconds between two reads of the inbox's lists (their ages are redrawn with them). */
const REFRESH_SECONDS = 3;
/** Seconds before following a dialog again after its stream broke off. */
const RECONNECT_SECONDS = 2;

const signIn = document.getElementById("sign-in");
const signInMessage = document.getElementById("sign-in-message");
const nameInput = document.getElementById("operator-name");
const keyInput = document.getElementById("operator-key");
const notice = document.getElementById("notice");
const desk = document.getElementById("desk");
const waitingList = document.getElementById("waiting");
const heldList = document.getElementById("held");
const noDialog = document.getElementById("no-dialog");
const dialogBody = document.getElementById("dialog-body");
const stateLine = document.getElementById("dialog-state");
const claimButton = document.getElementById("claim");
const handBackButton = document.getElementById("hand-back");
const inspectLink = document.getElementById("inspect-link");
const history = document.getElementById("history");
const replyForm = document.getElementById("reply-form");
const replyInput = document.getElementById("reply");
const turnsList = document.getElementById("turns");

const operator = {
  name: () => sessionStorage.getItem(NAME_STORAGE),
  key: () => sessionStorage.getItem(KEY_STORAGE),
  set(name, key) {
    sessionStorage.setItem(NAME_STORAGE, name);
    sessionStorage.setItem(KEY_STORAGE, key);
  },
  clear() {
    sessionStorage.removeItem(NAME_STORAGE);
    sessionStorage.removeItem(KEY_STORAGE);
  },
};

/** The open dialog: its handoff, the dialog as the inspector reads it, the ids shown, and
 *  the live stream's controller. */
let current = null;
let refreshTimer = null;

function headers(extra = {}) {
  return { "X-Operator-Key": operator.key() || "", "X-Operator": operator.name() || "", ...extra };
}

/** An operator route's answer: {status, ok, body}; a network failure is status 0. */
function operatorApi(path, { method = "GET", body } = {}) {
  return requestJson(path, { method, body, headers: headers() });
}

function showNotice(...content) {
  replace(notice, ...content);
  notice.hidden = content.length === 0;
}

function showError(result) {
  showNotice(el("p", { className: "error", attrs: { role: "alert" }, text: describeError(result) }));
}

/** Back to the sign-in form, saying why (a wrong or missing key). */
function askToSignIn(result) {
  stopFollowing();
  clearTimeout(refreshTimer);
  desk.hidden = true;
  signIn.hidden = false;
  if (result) {
    signInMessage.textContent = result.status === 403
      ? `The agent refused the key: ${describeError(result)}`
      : "The inbox needs the agent's operator key (CHORUS_OPERATOR_KEY, not the API key) " +
        "and your name, which marks what you write. Both are kept in this tab only.";
  }
  nameInput.value = operator.name() || "";
  (nameInput.value ? keyInput : nameInput).focus();
}

/** A duration since ``iso`` in words: "12 s", "4 min", "2 h 5 min". */
function since(iso, now = Date.now()) {
  const seconds = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

function entryItem(entry) {
  const { handoff } = entry;
  const held = handoff.state === "held";
  const age = held ? `held by ${handoff.operator} for ${since(handoff.claimed_at)}`
                   : `waiting for ${since(handoff.requested_at)}`;
  const open = current && current.id === handoff.dialog_id;
  const button = el("button", {
    className: open ? "queue-entry open" : "queue-entry",
    attrs: { type: "button", "aria-current": open ? "true" : "false" },
    dataset: { dialog: handoff.dialog_id, state: handoff.state },
  },
  el("span", { className: "entry-head" },
    el("strong", { className: "entry-user", text: handoff.user_id }),
    el("span", { className: "skill", text: entry.channel_type })),
  el("span", { className: "entry-text", text: entry.last_text ?? "" }),
  el("span", { className: "entry-age muted" }, age,
     entry.unanswered ? ` · ${entry.unanswered} unanswered` : "",
     handoff.reason ? ` · ${handoff.reason}` : ""));
  button.addEventListener("click", () => openDialog(handoff.dialog_id));
  return el("li", {}, button);
}

async function refreshInbox() {
  clearTimeout(refreshTimer);
  const result = await operatorApi("/api/operator/dialogs");
  if (result.status === 401 || result.status === 403) {
    askToSignIn(result);
    return;
  }
  if (result.ok) {
    const waiting = result.body.dialogs.filter((e) => e.handoff.state === "waiting");
    const held = result.body.dialogs.filter((e) => e.handoff.state === "held");
    replace(waitingList, waiting.length ? waiting.map(entryItem)
      : el("li", { className: "muted", text: "No one is waiting." }));
    replace(heldList, held.length ? held.map(entryItem)
      : el("li", { className: "muted", text: "No dialog is taken." }));
    replace(document.getElementById("waiting-count"), String(waiting.length));
    replace(document.getElementById("held-count"), String(held.length));
  } else {
    showError(result);
  }
  if (current) drawState();
  refreshTimer = setTimeout(refreshInbox, REFRESH_SECONDS * 1000);
}

/** One utterance as a chat bubble: the user's on the right; the bot's and the operators'
 *  on the left, with the skill or the operator who wrote it. */
function bubble(utterance) {
  const human = utterance.speaker === "human";
  const badge = human ? null : utterance.operator
    ? el("span", { className: "skill operator", title: "an operator wrote it",
                   text: `operator ${utterance.operator}` })
    : el("span", { className: "skill", title: "the skill that answered",
                   text: utterance.active_skill });
  return el("li", {
    className: `message ${human ? "human" : "bot"}${utterance.operator ? " by-operator" : ""}`,
    dataset: { utt: utterance.utt_id },
  }, el("div", { className: "bubble" }, el("span", { className: "text", text: utterance.text }),
        badge));
}

/** Who gave a dialog back, in words (the handoff's returned_by). */
const RETURNED_BY = {
  operator: (handoff) => `handed back by ${handoff.operator || "an operator"}`,
  api: () => "given back through the API",
  timeout: () => "no one claimed it in time",
};

function drawState() {
  const { handoff } = current;
  const mine = handoff.state === "held" && handoff.operator === operator.name();
  let text;
  if (handoff.state === "waiting") {
    text = `Waiting for a person for ${since(handoff.requested_at)} (asked by ` +
           `${handoff.requested_by}${handoff.reason ? `: ${handoff.reason}` : ""}).`;
  } else if (handoff.state === "held") {
    text = `${mine ? "You hold" : `${handoff.operator} holds`} this dialog, for ` +
           `${since(handoff.claimed_at)}: the bot does not answer.`;
  } else {
    text = `Back with the bot (${RETURNED_BY[handoff.returned_by](handoff)}).`;
  }
  stateLine.textContent = text;
  stateLine.dataset.state = handoff.state;
  claimButton.hidden = handoff.state !== "waiting";
  handBackButton.hidden = !(mine || handoff.state === "waiting");
  handBackButton.textContent = mine ? "Hand back to the bot" : "Decline: back to the bot";
  replyForm.hidden = !mine;
}

function drawTurns() {
  const items = turnItems(current.dialog);
  replace(turnsList, items.length ? items
    : el("li", { className: "muted", text: "This dialog has no utterances yet." }));
}

/** Add utterances not shown yet (the live stream and a reply's answer both bring them). */
function addUtterances(utterances) {
  let added = false;
  for (const utterance of utterances) {
    if (current.seen.has(utterance.utt_id)) continue;
    current.seen.add(utterance.utt_id);
    current.dialog.utterances.push(utterance);
    history.append(bubble(utterance));
    added = true;
  }
  if (added) {
    // The newest message in view, scrolling the history only (not the page).
    history.scrollTop = history.scrollHeight;
    drawTurns();
  }
}

function stopFollowing() {
  if (current && current.stream) current.stream.abort();
}

/** Follow the open dialog live (GET .../events, Server-Sent Events read with fetch: an
 *  EventSource cannot send the operator key). The stream ends once the dialog is back
 *  with the bot; broken off before that, it is followed again from the last utterance. */
async function follow(state) {
  const controller = new AbortController();
  state.stream = controller;
  const last = state.dialog.utterances.at(-1);
  const query = last ? `?after=${encodeURIComponent(last.utt_id)}` : "";
  try {
    const response = await fetch(
      `/api/operator/dialogs/${encodeURIComponent(state.id)}/events${query}`,
      { headers: headers({ Accept: "text/event-stream" }), signal: controller.signal });
    if (!response.ok) return;
    for await (const [kind, data] of serverSentEvents(response)) {
      if (!data || current !== state) continue;
      const parsed = JSON.parse(data);
      if (kind === "utterance") addUtterances([parsed]);
      else if (kind === "handoff") {
        state.handoff = parsed;
        drawState();
      }
    }
  } catch (error) {
    if (controller.signal.aborted) return;
  }
  if (current === state && !controller.signal.aborted && state.handoff.state !== "returned") {
    setTimeout(() => { if (current === state) follow(state); }, RECONNECT_SECONDS * 1000);
  }
}

async function openDialog(dialogId) {
  stopFollowing();
  showNotice();
  const result = await operatorApi(`/api/operator/dialogs/${encodeURIComponent(dialogId)}`);
  if (result.status === 401 || result.status === 403) {
    askToSignIn(result);
    return;
  }
  if (!result.ok) {
    showError(result);
    return;
  }
  const { handoff, dialog } = result.body;
  current = { id: dialogId, handoff, dialog, seen: new Set(), stream: null };
  replace(document.getElementById("dialog-user"), dialog.human.user_external_id);
  inspectLink.href = `/inspect/${encodeURIComponent(dialogId)}`;
  replace(history);
  const utterances = dialog.utterances;
  dialog.utterances = [];
  addUtterances(utterances);
  drawTurns();
  drawState();
  noDialog.hidden = true;
  dialogBody.hidden = false;
  history.scrollTop = history.scrollHeight; // shown now: its newest message in view
  for (const button of document.querySelectorAll(".queue-entry")) {
    const open = button.dataset.dialog === dialogId;
    button.classList.toggle("open", open);
    button.setAttribute("aria-current", open ? "true" : "false");
  }
  follow(current);
}

/** Claim, hand back: a change of the open dialog's handoff. */
async function change(action) {
  const state = current;
  const result = await operatorApi(
    `/api/operator/dialogs/${encodeURIComponent(state.id)}/${action}`, { method: "POST" });
  if (!result.ok) {
    showError(result);
  } else if (current === state) {
    showNotice();
    state.handoff = result.body.handoff;
    drawState();
  }
  refreshInbox();
}

/** A message id of the operator's, so a reply sent twice (a retried request) is stored once. */
function messageId() {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return "inbox-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function sendReply(text) {
  const state = current;
  const result = await operatorApi(
    `/api/operator/dialogs/${encodeURIComponent(state.id)}/messages`,
    { method: "POST", body: { text, message_id: messageId() } });
  if (!result.ok) {
    replyInput.value = text;
    showError(result);
    return;
  }
  showNotice();
  if (current === state) addUtterances([result.body.utterance]);
}

function start() {
  signIn.hidden = true;
  desk.hidden = false;
  replace(document.getElementById("operator-shown"), operator.name());
  refreshInbox();
}

signIn.addEventListener("submit", (event) => {
  event.preventDefault();
  if (!nameInput.checkValidity() || !keyInput.value) return;
  operator.set(nameInput.value, keyInput.value);
  keyInput.value = "";
  start();
});
document.getElementById("sign-out").addEventListener("click", () => {
  operator.clear();
  window.location.reload();
});
claimButton.addEventListener("click", () => change("claim"));
handBackButton.addEventListener("click", () => change("handback"));
replyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = replyInput.value;
  if (!text.trim()) return;
  replyInput.value = "";
  sendReply(text);
  replyInput.focus();
});

installNavigation("inbox");
if (operator.key() && operator.name()) start();
else askToSignIn(null);
