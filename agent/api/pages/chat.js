// /chat: talk to the bot through POST / (DeepPavlov Agent's chat API), following each
// turn's events: the services ticked off as they answer, and the answer's text as a
// streaming skill writes it (docs/api.md, turn events). The final answer replaces what
// was streamed: it is what the agent stored.
//
// The user id is made once and kept in localStorage, so the agent keeps the same user
// (and their attributes) across visits. "New dialog" sends /close, which ends the open
// dialog: the next message starts a new one.
//
// While the dialog is with a person (docs/handoff.md) the page follows it on
// GET /api/chat/dialogs/{id}/replies as Server-Sent Events: each operator's message appears
// as it is written, with who wrote it, and a line says when a person joins and when the bot
// is back. The last utterance shown is kept with the dialog, so a reloaded page follows on
// from there.

import {
  apiKey, callApi, describeError, el, installNavigation, keyPrompt, needsKey, replace,
  serverSentEvents, streamApi,
} from "/pages/common.js";

const USER_STORAGE = "chorus.chat.userId";
const DIALOG_STORAGE = "chorus.chat.dialogId";
const LAST_STORAGE = "chorus.chat.lastUttId";
/** Seconds before following a handed-off dialog again after its stream broke off. */
const RECONNECT_SECONDS = 2;

const messages = document.getElementById("messages");
const form = document.getElementById("send-form");
const input = document.getElementById("message");
const sendButton = document.getElementById("send");
const notice = document.getElementById("notice");
const inspectLink = document.getElementById("inspect-link");
const dialogInfo = document.getElementById("dialog-info");

/** A random id matching the API's user_id pattern, made without crypto.randomUUID (which
 *  plain-http pages other than localhost do not have). */
function newUserId() {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function userId() {
  let id = localStorage.getItem(USER_STORAGE);
  if (!id) {
    id = newUserId();
    localStorage.setItem(USER_STORAGE, id);
  }
  return id;
}

function showDialog(dialogId) {
  if (dialogId) {
    localStorage.setItem(DIALOG_STORAGE, dialogId);
    inspectLink.href = `/inspect/${encodeURIComponent(dialogId)}`;
    inspectLink.hidden = false;
    replace(dialogInfo, "Dialog ", el("code", { text: dialogId.slice(0, 8), title: dialogId }));
  } else {
    localStorage.removeItem(DIALOG_STORAGE);
    localStorage.removeItem(LAST_STORAGE);
    inspectLink.hidden = true;
    inspectLink.removeAttribute("href");
    replace(dialogInfo, "No dialog yet: say something.");
  }
}

/** The sources an answer cites (its attributes' citations, docs/knowledge.md): a link
 * where the knowledge base gave a web address (KNOWLEDGE_LINK_BASE), else the file. */
function citationList(citations) {
  if (!Array.isArray(citations) || citations.length === 0) return null;
  return el("ol", { className: "citations", attrs: { "aria-label": "sources" } },
    citations.map((cited) => {
      const where = [cited.source, cited.section].filter(Boolean).join(" › ");
      const link = String(cited.link || "");
      const target = /^https?:\/\//.test(link)
        ? el("a", { href: link, text: where, attrs: { rel: "noopener", target: "_blank" } })
        : el("a", { className: "source", text: where, title: link });
      return el("li", { attrs: { value: Number(cited.n) || 1 } }, target);
    }));
}

function addMessage(role, text, skill, operator = null, citations = null) {
  const badge = operator
    ? el("span", { className: "skill operator", title: "a person wrote it",
                   text: `operator ${operator}` })
    : skill ? el("span", { className: "skill", title: "the skill that answered", text: skill })
            : null;
  const item = el("li", { className: `message ${role}${operator ? " by-operator" : ""}` },
    el("div", { className: "bubble" }, el("span", { className: "text", text }),
      citationList(citations), badge));
  messages.append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

function showNotice(...content) {
  replace(notice, ...content);
  notice.hidden = content.length === 0;
}

async function post(payload) {
  return callApi("/", { method: "POST", body: { user_id: userId(), payload } });
}

/** Ask for the key when the agent protects its chat (CHORUS_PROTECT_CHAT). */
function refused(result, retry) {
  if (needsKey(result)) {
    showNotice(keyPrompt(result, () => { showNotice(); retry(); }));
  } else {
    showNotice(el("p", { className: "error", attrs: { role: "alert" },
                         text: describeError(result) }));
  }
}

/** The bot's answer while the turn runs: its text so far and the services done. */
function liveAnswer() {
  const text = el("span", { className: "text" });
  const progress = el("span", { className: "progress", attrs: { role: "status" },
                                text: "thinking…" });
  const item = el("li", { className: "message live" }, el("div", { className: "bubble" },
    text, progress));
  messages.append(item);
  item.scrollIntoView({ block: "end" });
  const done = [];
  return {
    item,
    // Every event that changes the bubble keeps it in view: a progress line that wraps
    // grows the bubble as much as a token does.
    event(kind, data) {
      if (kind === "token") {
        text.textContent += data.text;
      } else if (kind === "progress") {
        done.push(data.outcome === "ok" ? data.service : `${data.service} (${data.outcome})`);
        progress.textContent = done.join(" · ");
      } else {
        return;
      }
      item.scrollIntoView({ block: "end" });
    },
  };
}

function remember(uttId) {
  if (uttId) localStorage.setItem(LAST_STORAGE, uttId);
}

/** The dialog followed while it is with a person: its id and the stream's controller. */
let following = null;

async function readEvents(response, onEvent) {
  for await (const [kind, data] of serverSentEvents(response)) {
    if (data) onEvent(kind, JSON.parse(data));
  }
}

const HANDOFF_WORDS = {
  waiting: () => "Waiting for a person to join…",
  held: (status) => `${status.operator} joined the conversation.`,
  returned: () => "The bot is back.",
};

/** Follow a handed-off dialog's replies (an operator's messages) until the bot has it
 *  back; a dialog followed already is left as it is. */
async function follow(dialogId, after, resumed = false) {
  if (following && following.dialogId === dialogId) return;
  if (following) following.controller.abort();
  const state = { dialogId, controller: new AbortController(), shown: null, after };
  following = state;
  for (;;) {
    const query = new URLSearchParams({ user_id: userId() });
    if (state.after) query.set("after", state.after);
    const headers = { Accept: "text/event-stream" };
    const key = apiKey.get();
    if (key) headers["X-API-Key"] = key;
    let ended = false;
    try {
      const response = await fetch(
        `/api/chat/dialogs/${encodeURIComponent(dialogId)}/replies?${query}`,
        { headers, signal: state.controller.signal });
      if (!response.ok) break;
      await readEvents(response, (kind, data) => {
        if (kind === "reply") {
          addMessage("bot", data.text, data.active_skill, data.operator);
          state.after = data.utt_id;
          remember(data.utt_id);
        } else if (kind === "handoff") {
          // A reloaded page says nothing of a handoff that was over before it loaded.
          const over = resumed && state.shown === null && data.state === "returned";
          if (data.state !== state.shown && !over) {
            addMessage("system", HANDOFF_WORDS[data.state](data));
          }
          state.shown = data.state;
          ended = data.state === "returned";
        }
      });
    } catch {
      if (state.controller.signal.aborted) break;
    }
    if (ended || state.controller.signal.aborted || state.shown === null) break;
    await new Promise((resolve) => { setTimeout(resolve, RECONNECT_SECONDS * 1000); });
  }
  if (following === state) following = null;
}

async function send(text) {
  sendButton.disabled = true;
  showNotice();
  const pending = addMessage("human", text);
  const live = liveAnswer();
  let stored = null;
  const result = await streamApi("/", { user_id: userId(), payload: text }, (kind, data) => {
    if (kind === "accepted") stored = data.utt_id;
    live.event(kind, data);
  });
  live.item.remove();
  sendButton.disabled = false;
  if (!result.ok) {
    pending.classList.add("failed");
    refused(result, () => { pending.remove(); send(text); });
    return;
  }
  const reply = result.body;
  if (reply.handoff && reply.handoff.state !== "returned" && reply.utt_id === null) {
    // The dialog is with a person: the message was stored, not answered by the bot.
    showDialog(reply.dialog_id);
    follow(reply.dialog_id, localStorage.getItem(LAST_STORAGE) || stored);
    return;
  }
  if (reply.active_skill === null) {
    // "/start" or "/close" typed by hand: the dialog was closed, nothing was answered.
    addMessage("system", reply.response);
    showDialog(null);
    return;
  }
  addMessage("bot", reply.response, reply.active_skill, null,
    (reply.attributes || {}).citations);
  showDialog(reply.dialog_id);
  remember(reply.utt_id);
  if (reply.handoff && reply.handoff.state !== "returned") follow(reply.dialog_id, reply.utt_id);
}

async function newDialog() {
  if (following) following.controller.abort();
  const result = await post("/close");
  if (!result.ok) {
    refused(result, newDialog);
    return;
  }
  replace(messages);
  showDialog(null);
  addMessage("system", "New dialog: your next message starts it.");
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value;
  if (!text.trim()) return;
  input.value = "";
  send(text);
  input.focus();
});
document.getElementById("new-dialog").addEventListener("click", newDialog);

installNavigation("chat");
replace(document.getElementById("user-id"), userId());
showDialog(localStorage.getItem(DIALOG_STORAGE));
if (localStorage.getItem(DIALOG_STORAGE) && localStorage.getItem(LAST_STORAGE)) {
  // A dialog with a person before the page was reloaded: the operator's messages go on.
  follow(localStorage.getItem(DIALOG_STORAGE), localStorage.getItem(LAST_STORAGE), true);
}
input.focus();
