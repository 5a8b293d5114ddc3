// Shared by the pages: building DOM safely, the API key, calling the agent's JSON API.
//
// Every piece of user or service text goes into the page through text nodes
// (`textContent`), never as markup: a message "<img src=x onerror=...>" shows as those
// characters. No innerHTML anywhere.

const KEY_STORAGE = "chorus.apiKey";

/** An element with properties and children; strings become text nodes, null is skipped.
 *  props: {className, text, href, title, dataset, attrs}; `attrs` refuses on* handlers. */
export function el(tag, props = {}, ...children) {
  return build(document.createElement(tag), props, children);
}

/** The same for SVG elements (attributes such as x, y, width go in props.attrs). */
export function svg(tag, props = {}, ...children) {
  return build(document.createElementNS("http://www.w3.org/2000/svg", tag), props, children);
}

function build(node, props, children) {
  const { className, text, href, title, dataset, attrs } = props;
  if (className) node.setAttribute("class", className);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (href) node.setAttribute("href", href);
  if (title) node.setAttribute("title", title);
  for (const [name, value] of Object.entries(dataset || {})) node.dataset[name] = value;
  for (const [name, value] of Object.entries(attrs || {})) {
    if (/^on/i.test(name)) throw new Error(`refusing event handler attribute ${name}`);
    node.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Replace all of a node's children. */
export function replace(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

/** Each cell's column header as its data-label, which a narrow window shows beside the
 *  value when the table's rows stack (style.css, table.stacking). */
export function labelCells(table) {
  const titles = [...table.tHead.rows[0].cells].map((th) => th.textContent.trim());
  for (const row of table.tBodies[0].rows) {
    [...row.cells].forEach((cell, i) => { if (titles[i]) cell.dataset.label = titles[i]; });
  }
}

/** A JSON value on one line, with a space after each comma and colon. */
export function oneLine(value) {
  if (Array.isArray(value)) {
    return value.length ? `[ ${value.map(oneLine).join(", ")} ]` : "[]";
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    if (entries.length === 0) return "{}";
    return `{ ${entries.map(([k, v]) => `${JSON.stringify(k)}: ${oneLine(v)}`).join(", ")} }`;
  }
  return JSON.stringify(value);
}

/** JSON for <pre> blocks: indented, but any part short enough (``width`` characters with
 *  its indent) stays on one line. */
export function pretty(value, indent = "", width = 64) {
  const line = oneLine(value);
  if (indent.length + line.length <= width || value === null || typeof value !== "object") {
    return line;
  }
  const inner = `${indent}  `;
  const items = Array.isArray(value)
    ? value.map((v) => inner + pretty(v, inner, width))
    : Object.entries(value).map(
      ([k, v]) => `${inner}${JSON.stringify(k)}: ${pretty(v, inner, width)}`);
  const [open, close] = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
  return `${open}\n${items.join(",\n")}\n${indent}${close}`;
}

/** Seconds as a short human duration: "850 µs", "12.3 ms", "1.20 s". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 0.001) return `${Math.round(seconds * 1e6)} µs`;
  if (seconds < 1) return `${(seconds * 1000).toFixed(seconds < 0.01 ? 2 : 1)} ms`;
  return `${seconds.toFixed(2)} s`;
}

export const apiKey = {
  get: () => sessionStorage.getItem(KEY_STORAGE),
  set: (value) => sessionStorage.setItem(KEY_STORAGE, value),
  clear: () => sessionStorage.removeItem(KEY_STORAGE),
};

/** The agent's answer to a request: {status, ok, body}; the API key rides along if set.
 *  A network failure comes back as status 0 with a message, not as an exception. */
export async function callApi(path, { method = "GET", body } = {}) {
  const key = apiKey.get();
  return requestJson(path, { method, body, headers: key ? { "X-API-Key": key } : {} });
}

/** ``path`` asked for JSON with ``headers``, as {status, ok, body}: what ``callApi`` and the
 *  inbox's operator calls share. */
export async function requestJson(path, { method = "GET", body, headers = {} } = {}) {
  const sent = { Accept: "application/json", ...headers };
  if (body !== undefined) sent["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method, headers: sent, body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    return unanswered(error);
  }
  return jsonResult(response);
}

/** A network failure in the shape of an answer: status 0. */
function unanswered(error) {
  return { status: 0, ok: false, body: { message: `the agent did not answer (${error})` } };
}

/** A response as {status, ok, body}: its JSON, or its status line when it is not JSON. */
async function jsonResult(response) {
  let parsed;
  try {
    parsed = await response.json();
  } catch {
    parsed = { message: `${response.status} ${response.statusText}` };
  }
  return { status: response.status, ok: response.ok, body: parsed };
}

/** POST ``body`` to a chat endpoint asking for the turn's events (Server-Sent Events),
 *  calling ``onEvent(kind, data)`` for each as it arrives. Resolves to ``callApi``'s shape:
 *  the ``answer`` event's data as the body, or the error (a refusal before the turn, or the
 *  ``error`` event, which carries the HTTP error's body and its status). */
export async function streamApi(path, body, onEvent) {
  // body null: a GET of a stream (a dialog's replies while a person holds it)
  const headers = { Accept: "text/event-stream" };
  if (body !== null) headers["Content-Type"] = "application/json";
  const key = apiKey.get();
  if (key) headers["X-API-Key"] = key;
  let response;
  try {
    response = await fetch(path, body === null ? { headers }
      : { method: "POST", headers, body: JSON.stringify(body) });
  } catch (error) {
    return unanswered(error);
  }
  if (!(response.headers.get("content-type") || "").startsWith("text/event-stream")) {
    return jsonResult(response);
  }
  let last = { status: 0, ok: false, body: { message: "the agent's answer ended early" } };
  for await (const [kind, data] of serverSentEvents(response)) {
    const parsed = data ? JSON.parse(data) : {};
    if (kind === "answer") last = { status: 200, ok: true, body: parsed };
    else if (kind === "error") last = { status: parsed.status, ok: false, body: parsed };
    else onEvent(kind, parsed);
  }
  return last;
}

/** A response's Server-Sent Events as `[kind, data]` pairs, in order: `kind` is the
 *  event's name ("message" when it has none), `data` its data lines joined (the pages'
 *  streams, the chat's follower and the inbox's, all read them with fetch). */
export async function* serverSentEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      yield [kind, data];
    }
  }
}

/** A readable sentence from an error body: every error's `message` (docs/api.md). */
export function describeError(result) {
  const message = result.body && result.body.message;
  return message ? String(message) : `the agent answered ${result.status}`;
}

/** Whether the agent refused for want of the right API key. */
export function needsKey(result) {
  return result.status === 401 || result.status === 403;
}

/** The "enter the API key" box: `retry` runs after a key is saved. */
export function keyPrompt(result, retry) {
  const wrong = result.status === 403;
  const input = el("input", {
    attrs: { type: "password", id: "api-key", name: "api-key", autocomplete: "off",
             placeholder: "CHORUS_API_KEY", "aria-label": "API key" },
  });
  const form = el("form", { className: "key-form" },
    el("p", { className: "key-message", attrs: { role: "alert" },
              text: wrong
                ? "That is not the agent's API key. Enter the API key to see this page."
                : "This agent needs its API key to show this page. Enter the API key " +
                  "(the agent's CHORUS_API_KEY); it is kept in this tab only." }),
    input,
    el("button", { attrs: { type: "submit" }, text: "Use key" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!input.value) return;
    apiKey.set(input.value);
    retry();
  });
  return form;
}

/** The header shared by the pages, with the current one marked. */
export function navigation(current) {
  const links = [["chat", "/chat", "Chat"], ["pipeline", "/pipeline", "Pipeline"],
                 ["inbox", "/inbox", "Inbox"]];
  return el("nav", { className: "top" },
    el("a", { className: "brand", href: "/chat", text: "Chorus" }),
    links.map(([name, href, label]) =>
      el("a", { href, text: label, className: name === current ? "current" : "" })),
    apiKey.get()
      ? el("button", { className: "forget-key", attrs: { type: "button" },
                       text: "Forget API key" })
      : null);
}

/** Put the navigation at the top of the page and wire its "forget key" button. */
export function installNavigation(current) {
  const nav = navigation(current);
  document.body.prepend(nav);
  const forget = nav.querySelector(".forget-key");
  if (forget) {
    forget.addEventListener("click", () => {
      apiKey.clear();
      window.location.reload();
    });
  }
}
