// sbemulator console: vanilla JavaScript, no build step. Message contents are untrusted: every value
// reaches the page through textContent (the h() helper), never through innerHTML.
"use strict";

const API = "api/";
const POLL_MS = 2000;
const SUB_QUEUE_LABELS = { active: "Messages", deadletter: "Dead-letter queue", transferdeadletter: "Transfer dead-letter queue" };

const state = { signedIn: false, route: null, timer: null, entity: null, page: null };

// ---------------------------------------------------------------- helpers
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "className") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const $ = (sel) => document.querySelector(sel);

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(name, { method = "GET", query = null, body = null } = {}) {
  const url = API + name + (query ? "?" + new URLSearchParams(query).toString() : "");
  const headers = { "X-Requested-With": "sbconsole" };
  if (body !== null) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method, headers, credentials: "same-origin", cache: "no-store",
    body: body === null ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(15000),
  });
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (!response.ok) {
    const message = (data && data.message) || response.statusText || "Request failed";
    if (response.status === 401 && name !== "login") signedOut(message);
    throw new ApiError(response.status, message);
  }
  return data;
}

function say(text) { $("#status").textContent = text; }
function fail(err) {
  const box = $("#error");
  box.textContent = err instanceof Error ? err.message : String(err);
  box.hidden = false;
}
function clearMessages() { $("#error").hidden = true; $("#error").textContent = ""; say(""); }

function show(view) {
  for (const id of ["login-view", "overview-view", "entity-view"]) $("#" + id).hidden = id !== view;
}
function encodePath(path) { return path.split("/").map(encodeURIComponent).join("/"); }
function entityHref(path, tab) { return "#/entity/" + encodePath(path) + (tab ? "?tab=" + tab : ""); }

function formatTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

// ---------------------------------------------------------------- sign-in
function signedOut(message) {
  state.signedIn = false;
  stopPolling();
  $("#signout").hidden = true;
  $("#who").textContent = "";
  $("#namespace").textContent = "";
  show("login-view");
  if (message) fail(message);
  $("#key").focus();
}

function signedIn(who) {
  state.signedIn = true;
  $("#signout").hidden = false;
  $("#who").textContent = "Signed in as " + who.keyName;
  $("#namespace").textContent = who.namespace;
}

async function onLogin(event) {
  event.preventDefault();
  clearMessages();
  const form = event.target;
  const keyName = form.keyName.value.trim();
  const key = form.key.value;
  form.key.value = "";  // the key is not kept in the page
  try {
    const who = await api("login", { method: "POST", body: { keyName, key } });
    signedIn(who);
    route();
  } catch (err) {
    fail(err);
    form.key.focus();
  }
}

async function onSignOut() {
  try { await api("logout", { method: "POST", body: {} }); } catch (_) { /* signed out anyway */ }
  clearMessages();
  signedOut();
  say("Signed out.");
}

// ---------------------------------------------------------------- routing
function parseRoute() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [pathPart, queryPart] = hash.split("?");
  const query = new URLSearchParams(queryPart || "");
  if (pathPart.startsWith("/entity/")) {
    const path = pathPart.slice("/entity/".length).split("/").map(decodeURIComponent).join("/");
    return { view: "entity", path, tab: query.get("tab") || "overview" };
  }
  return { view: "overview" };
}

async function route() {
  if (!state.signedIn) return;
  stopPolling();
  clearMessages();
  const r = parseRoute();
  const previous = state.route;
  state.route = r;
  await keepFocus(async () => {
    try {
      if (r.view === "entity") await showEntity(r, previous);
      else await showOverview();
    } catch (err) { fail(err); }
  });
}

// Views are re-rendered, which would drop keyboard focus to the top of the page: put it back on the
// control with the same id (a tab, a paging button), or else on the new view's heading.
async function keepFocus(render) {
  const active = document.activeElement;
  const id = active && active !== document.body ? active.id : "";
  await render();
  const usable = (el) => el && el.isConnected && !el.disabled && el.offsetParent !== null;
  if (active && active !== document.body && usable(active) && document.activeElement === active) return;
  const again = id ? document.getElementById(id) : null;
  if (usable(again)) { again.focus(); return; }
  const heading = document.querySelector("main section:not([hidden]) h1");
  if (heading) heading.focus({ preventScroll: true });
}

function stopPolling() { if (state.timer) { clearInterval(state.timer); state.timer = null; } }
function poll(fn) {
  stopPolling();
  state.timer = setInterval(() => {
    if (document.hidden || !$("#live").checked) return;
    fn().catch(() => { /* a failed refresh is retried on the next tick */ });
  }, POLL_MS);
}

// ---------------------------------------------------------------- overview
function countCell(value, dead) {
  const cls = "num " + (value === 0 ? "zero" : dead ? "nonzero-dead" : "");
  return h("td", { className: cls }, value);
}

function entityRow(e, isSub) {
  const c = e.counts;
  return h("tr", { "data-path": e.path },
    h("td", { className: isSub ? "sub" : "" }, h("a", { href: entityHref(e.path) }, e.name)),
    h("td", {}, e.kind + (e.requiresSession ? " (sessions)" : "")),
    e.kind === "topic" ? h("td", { className: "num zero" }, "–") : countCell(c.active),
    e.kind === "topic" ? h("td", { className: "num zero" }, "–") : countCell(c.deadLetter, true),
    countCell(c.scheduled), countCell(c.deferred), countCell(c.transfer), countCell(c.transferDeadLetter, true));
}

async function refreshOverview() {
  const data = await api("overview");
  const rows = [];
  for (const e of data.entities) {
    rows.push(entityRow(e, false));
    for (const s of e.subscriptions || []) rows.push(entityRow(s, true));
  }
  if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: 8, className: "empty" }, "No queues or topics.")));
  const tbody = $("#entities tbody");
  const current = [...tbody.children];
  const samePaths = current.length === rows.length &&
    current.every((tr, i) => tr.dataset.path && tr.dataset.path === rows[i].dataset.path);
  if (samePaths) {
    // Same entities: change only the counts, so a focused link keeps its focus while counts update.
    current.forEach((tr, i) => {
      [...tr.children].slice(2).forEach((td, j) => {
        const fresh = rows[i].children[j + 2];
        td.textContent = fresh.textContent;
        td.className = fresh.className;
      });
    });
  } else tbody.replaceChildren(...rows);
  $("#overview-title").textContent = "Namespace " + data.namespace;
  $("#updated").textContent = "Updated " + new Date().toLocaleTimeString();
}

async function showOverview() {
  show("overview-view");
  await refreshOverview();
  poll(refreshOverview);
}

// ---------------------------------------------------------------- entity
function tabsFor(e) {
  const tabs = [["overview", "Overview"]];
  tabs.push(["messages", e.kind === "topic" ? "Scheduled messages" : "Messages"]);
  if (e.kind !== "topic") tabs.push(["deadletter", "Dead-letter queue"]);
  if (e.kind !== "topic" && e.counts.transferDeadLetter > 0) tabs.push(["transferdeadletter", "Transfer dead-letter"]);
  if (e.kind !== "subscription") tabs.push(["send", "Send"]);
  return tabs;
}

function renderCounts(e) {
  const c = e.counts;
  const items = e.kind === "topic"
    ? [["Scheduled", c.scheduled], ["Transfer", c.transfer], ["Transfer dead-lettered", c.transferDeadLetter, true]]
    : [["Active", c.active], ["Dead-lettered", c.deadLetter, true], ["Scheduled", c.scheduled], ["Deferred", c.deferred],
       ["Transfer", c.transfer], ["Transfer dead-lettered", c.transferDeadLetter, true]];
  $("#entity-counts").replaceChildren(...items.map(([label, value, dead]) =>
    h("div", { className: dead && value ? "dead" : "", "data-count": label }, h("dt", {}, label), h("dd", {}, value))));
}

async function showEntity(r, previous) {
  show("entity-view");
  if (!previous || previous.view !== "entity" || previous.path !== r.path || previous.tab !== r.tab) {
    $("#tab-body").replaceChildren(h("p", { className: "muted" }, "Loading…"));
  }
  const e = await api("entity", { query: { path: r.path } });
  state.entity = e;
  $("#entity-title").textContent = e.kind === "subscription" ? e.topic + " / " + e.name : e.name;
  $("#entity-crumb").textContent = e.path;
  $("#entity-kind").textContent = e.kind + (e.requiresSession ? " · sessions" : "");
  renderCounts(e);
  const tabs = tabsFor(e);
  const tab = tabs.some(([id]) => id === r.tab) ? r.tab : "overview";
  $("#tabs").replaceChildren(...tabs.map(([id, label]) => h("li", {},
    h("a", { href: entityHref(e.path, id), id: "tab-" + id, "aria-current": id === tab ? "page" : null }, label))));
  const body = $("#tab-body");
  if (tab === "overview") body.replaceChildren(...renderEntityOverview(e));
  else if (tab === "send") body.replaceChildren(renderSendForm(e));
  else {
    const samePage = previous && previous.view === "entity" && previous.path === r.path && previous.tab === tab;
    if (!samePage || !state.page) state.page = { stack: [], from: 0, count: 20 };
    await renderMessages(e, tab === "messages" ? "active" : tab);
  }
  poll(async () => {
    const fresh = await api("entity", { query: { path: r.path } });
    state.entity = fresh;
    renderCounts(fresh);
    if (tab === "overview") refreshLiveParts(fresh);
  });
}

function propertyList(props, className = "props") {
  return h("dl", { className }, Object.entries(props).flatMap(([k, v]) =>
    [h("dt", {}, k), h("dd", {}, v === null || v === undefined ? "—" : String(v))]));
}

function rulesTable(rules) {
  return h("table", { className: "grid rules" },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Rule"), h("th", { scope: "col" }, "Filter type"),
      h("th", { scope: "col" }, "Filter"), h("th", { scope: "col" }, "Action"))),
    h("tbody", {}, rules.map((rule) => h("tr", {},
      h("td", {}, rule.name), h("td", {}, rule.filterType), h("td", {}, h("code", {}, rule.filter)),
      h("td", {}, rule.action ? h("code", {}, rule.action) : h("span", { className: "zero" }, "none"))))));
}

function sessionsTable(sessions) {
  if (!sessions.length) return h("p", { className: "empty" }, "No session holds messages or state.");
  return h("table", { className: "grid", id: "sessions" },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Session id"), h("th", { scope: "col", className: "num" }, "Messages"),
      h("th", { scope: "col" }, "Locked until"), h("th", { scope: "col" }, "State"))),
    h("tbody", {}, sessions.map((s) => h("tr", {},
      h("td", {}, h("code", {}, s.id)), h("td", { className: "num" }, s.messageCount),
      h("td", {}, s.lockedUntil ? formatTime(s.lockedUntil) : "not locked"),
      h("td", {}, s.state ? h("code", {}, s.state.text !== null ? s.state.text : s.state.hex) : h("span", { className: "zero" }, "none"))))));
}

function renderEntityOverview(e) {
  const parts = [];
  if (e.kind === "topic") {
    parts.push(h("h2", {}, "Subscriptions"));
    if (!e.subscriptions.length) parts.push(h("p", { className: "empty" }, "No subscriptions."));
    const box = h("div", { id: "subscriptions" });
    for (const s of e.subscriptions) {
      box.append(h("h3", {}, h("a", { href: entityHref(s.path) }, s.name), " ",
        h("span", { className: "muted", "data-sub-counts": s.path }, subCountsText(s))), rulesTable(s.rules));
    }
    parts.push(box);
  }
  if (e.kind === "subscription") parts.push(h("h2", {}, "Rules"), rulesTable(e.rules));
  if (e.requiresSession) parts.push(h("h2", {}, "Sessions"), h("div", { id: "sessions-box" }, sessionsTable(e.sessions)));
  parts.push(h("h2", {}, "Properties"), propertyList(e.properties, "props two-columns"));
  return parts;
}

function subCountsText(s) {
  return `${s.counts.active} active · ${s.counts.deadLetter} dead-lettered`;
}

function refreshLiveParts(e) {
  if (e.requiresSession && $("#sessions-box")) $("#sessions-box").replaceChildren(sessionsTable(e.sessions));
  for (const s of e.subscriptions || []) {
    const el = document.querySelector(`[data-sub-counts="${CSS.escape(s.path)}"]`);
    if (el) el.textContent = subCountsText(s);
  }
}

// ---------------------------------------------------------------- messages (peek)
function bodyView(body, contentType, initial) {
  const pre = h("pre", { className: "body", tabindex: "0" });
  const name = "view-" + Math.random().toString(36).slice(2);
  const modes = [["text", "Text"], ["json", "JSON"], ["hex", "Hex"]];
  const render = (mode) => {
    if (mode === "hex") pre.textContent = body.hex || "(empty)";
    else if (mode === "json") {
      try { pre.textContent = JSON.stringify(JSON.parse(body.text), null, 2); }
      catch (_) { pre.textContent = body.text === null ? "(not text)" : "(not JSON) " + body.text; }
    } else pre.textContent = body.text === null ? "(binary: see Hex)" : (body.text || "(empty)");
    if (body.truncated) pre.textContent += `\n… (${body.size} bytes in all; the first part is shown)`;
  };
  const fieldset = h("fieldset", { className: "views" }, h("legend", {}, "Body as"),
    modes.map(([mode, label]) => h("label", { className: "inline" },
      h("input", { type: "radio", name, value: mode, checked: mode === initial, onchange: () => render(mode) }), label)));
  render(initial);
  return [fieldset, pre];
}

function initialView(body, contentType) {
  if (body.text === null) return "hex";
  try { JSON.parse(body.text); return "json"; } catch (_) { /* not JSON */ }
  return contentType && contentType.includes("json") ? "json" : "text";
}

function messageItem(m, selectable) {
  const sys = m.systemProperties;
  const summary = h("summary", {},
    h("span", { className: "seq" }, "#" + m.sequenceNumber),
    h("span", { className: "id" }, m.messageId || ""),
    h("span", {}, formatTime(m.enqueuedTime)),
    h("span", { className: "tag" }, m.state),
    m.deadLetterReason ? h("span", { className: "reason" }, m.deadLetterReason) : null,
    sys.SessionId ? h("span", {}, "session " + sys.SessionId) : null,
    sys.Subject ? h("span", {}, sys.Subject) : null);
  const appProps = m.applicationProperties.length
    ? h("table", { className: "grid" }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Name"),
        h("th", { scope: "col" }, "Value"), h("th", { scope: "col" }, "Type"))),
      h("tbody", {}, m.applicationProperties.map((p) => h("tr", {}, h("td", {}, p.name),
        h("td", {}, h("code", {}, p.value === null ? "null" : String(p.value))), h("td", {}, p.type)))))
    : h("p", { className: "empty" }, "None.");
  const details = h("details", {}, summary,
    m.deadLetterReason || m.deadLetterErrorDescription
      ? h("p", { className: "reason" }, "Dead-letter reason: ", m.deadLetterReason || "—", ". Description: ",
          m.deadLetterErrorDescription || "—") : null,
    h("div", { className: "message-body" },
      h("div", {}, h("h3", {}, "System properties"), propertyList(sys)),
      h("div", {}, h("h3", {}, "Application properties"), appProps,
        h("h3", {}, "Body"), ...bodyView(m.body, sys.ContentType, initialView(m.body, sys.ContentType)))));
  const li = h("li", { "data-seq": m.sequenceNumber });
  if (selectable) {
    li.append(h("input", { type: "checkbox", className: "pick", value: m.sequenceNumber,
      "aria-label": "Select message #" + m.sequenceNumber }));
  }
  li.append(details);
  if (selectable) {
    li.append(h("button", { type: "button", className: "secondary",
      onclick: () => resubmit([m.sequenceNumber]) }, "Resubmit #" + m.sequenceNumber));
  }
  return li;
}

async function renderMessages(e, subQueue) {
  const page = state.page;
  const data = await api("messages", { query: { path: e.path, subqueue: subQueue, from: page.from, count: page.count } });
  const dead = subQueue === "deadletter";
  const first = data.messages.length ? data.messages[0].sequenceNumber : null;
  const last = data.messages.length ? data.messages[data.messages.length - 1].sequenceNumber : null;
  const sizeSelect = h("select", { id: "page-size", onchange: (ev) => {
    page.count = Number(ev.target.value); page.stack = []; page.from = 0;
    keepFocus(() => renderMessages(e, subQueue).catch(fail));
  } }, [10, 20, 50, 100].map((n) => h("option", { value: n, selected: n === page.count }, n)));
  const toolbar = h("div", { className: "toolbar" },
    h("button", { type: "button", className: "secondary", id: "refresh", onclick: () => keepFocus(() => renderMessages(e, subQueue).catch(fail)) }, "Refresh"),
    h("button", { type: "button", className: "secondary", id: "prev-page", disabled: !page.stack.length, onclick: () => {
      page.from = page.stack.pop(); keepFocus(() => renderMessages(e, subQueue).catch(fail));
    } }, "Previous page"),
    h("button", { type: "button", className: "secondary", id: "next-page", disabled: !data.more, onclick: () => {
      page.stack.push(page.from); page.from = data.nextFromSequenceNumber;
      keepFocus(() => renderMessages(e, subQueue).catch(fail));
    } }, "Next page"),
    h("label", { className: "inline", for: "page-size" }, "Page size"), sizeSelect,
    h("span", { className: "muted", id: "page-info" }, first === null ? "No messages" : `Sequence numbers ${first} to ${last}`));
  const actions = h("div", { className: "toolbar" });
  if (dead) {
    actions.append(
      h("button", { type: "button", id: "resubmit-selected", onclick: () => {
        const picked = [...document.querySelectorAll(".pick:checked")].map((c) => Number(c.value));
        if (!picked.length) { fail("Select at least one message first."); return; }
        resubmit(picked);
      } }, "Resubmit selected"),
      h("button", { type: "button", id: "resubmit-all", onclick: () => resubmit(null) }, "Resubmit all"));
  }
  actions.append(h("button", { type: "button", className: "danger", id: "purge-queue",
    onclick: () => purge(subQueue) }, "Purge " + SUB_QUEUE_LABELS[subQueue].toLowerCase()));
  const list = data.messages.length
    ? h("ul", { className: "messages", "aria-label": SUB_QUEUE_LABELS[subQueue] }, data.messages.map((m) => messageItem(m, dead)))
    : h("p", { className: "empty" }, dead ? "The dead-letter queue is empty." : "No messages.");
  const intro = h("p", { className: "muted" }, dead
    ? "Resubmitting sends a copy of the message to the entity it was dead-lettered from (without the dead-letter reason) and removes it from this queue."
    : "Peeking shows messages in every state without locking them or changing their delivery count.");
  $("#tab-body").replaceChildren(intro, toolbar, actions, list);
}

async function resubmit(sequenceNumbers) {
  const e = state.entity;
  clearMessages();
  const body = sequenceNumbers ? { path: e.path, sequenceNumbers } : { path: e.path, all: true };
  if (!sequenceNumbers && !confirm(`Resubmit every dead-lettered message of ${e.path}?`)) return;
  try {
    const result = await api("resubmit", { method: "POST", body });
    state.page = null;
    await route();
    say(`Resubmitted ${result.resubmitted} message${result.resubmitted === 1 ? "" : "s"} to ${e.path}` +
      (result.skippedLocked ? ` (${result.skippedLocked} locked by a receiver were left in place)` : "") + ".");
  } catch (err) { fail(err); }
}

async function purge(subQueue) {
  const e = state.entity;
  const what = subQueue === "all" ? "every message (dead-lettered and scheduled ones too)" : "the " + SUB_QUEUE_LABELS[subQueue].toLowerCase();
  if (!confirm(`Purge ${what} of ${e.path}? This cannot be undone.`)) return;
  clearMessages();
  try {
    const result = await api("purge", { method: "POST", body: { path: e.path, subQueue } });
    state.page = null;
    await route();
    say(`Purged ${result.purged} message${result.purged === 1 ? "" : "s"} from ${e.path}.`);
  } catch (err) { fail(err); }
}

// ---------------------------------------------------------------- send
function field(id, label, input, help) {
  return h("div", {}, h("label", { for: id }, label), input, help ? h("p", { className: "help", id: id + "-help" }, help) : null);
}

function propertyRow() {
  const n = Math.random().toString(36).slice(2);
  const row = h("tr", { className: "prop-row" },
    h("td", {}, h("input", { className: "prop-name", "aria-label": "Property name", placeholder: "Name", id: "pn-" + n })),
    h("td", {}, h("input", { className: "prop-value", "aria-label": "Property value", placeholder: "Value" })),
    h("td", {}, h("select", { className: "prop-type", "aria-label": "Property type" },
      ["string", "int", "double", "boolean"].map((t) => h("option", { value: t }, t)))),
    h("td", {}, h("button", { type: "button", className: "secondary", onclick: () => row.remove() }, "Remove")));
  return row;
}

function renderSendForm(e) {
  const rows = h("tbody", {});
  const form = h("form", { id: "send-form", className: "form-grid", onsubmit: (ev) => onSend(ev, e) },
    h("div", { className: "wide" }, field("send-body", "Body", h("textarea", { id: "send-body", name: "body" }))),
    field("send-content-type", "Content type", h("input", { id: "send-content-type", name: "contentType", list: "content-types", placeholder: "application/json" })),
    field("send-message-id", "Message id", h("input", { id: "send-message-id", name: "messageId", placeholder: "generated when empty" })),
    field("send-subject", "Subject", h("input", { id: "send-subject", name: "subject" })),
    field("send-session", "Session id" + (e.requiresSession ? " (required)" : ""),
      h("input", { id: "send-session", name: "sessionId", required: e.requiresSession })),
    field("send-correlation", "Correlation id", h("input", { id: "send-correlation", name: "correlationId" })),
    field("send-ttl", "Time to live (seconds)", h("input", { id: "send-ttl", name: "ttl", type: "number", min: "1", step: "any" }),
      "Empty: the entity's default."),
    field("send-scheduled", "Scheduled enqueue time (local time)", h("input", { id: "send-scheduled", name: "scheduled", type: "datetime-local", step: "1" }),
      "Empty: enqueue now."),
    h("div", { className: "wide" },
      h("h3", {}, "Application properties"),
      h("table", { className: "props-editor" }, rows),
      h("button", { type: "button", className: "secondary", id: "add-property", onclick: () => {
        const row = propertyRow(); rows.append(row); row.querySelector("input").focus();
      } }, "Add property")),
    h("div", { className: "wide" }, h("button", { type: "submit", id: "send-button" }, "Send message")),
    h("datalist", { id: "content-types" }, ["application/json", "text/plain", "application/xml", "application/octet-stream"].map((v) => h("option", { value: v }))));
  return form;
}

async function onSend(event, e) {
  event.preventDefault();
  clearMessages();
  const f = event.target;
  const props = [...f.querySelectorAll(".prop-row")].map((row) => ({
    name: row.querySelector(".prop-name").value, value: row.querySelector(".prop-value").value,
    type: row.querySelector(".prop-type").value,
  })).filter((p) => p.name.trim());
  const body = {
    path: e.path, body: f.body.value, contentType: f.contentType.value, messageId: f.messageId.value,
    subject: f.subject.value, sessionId: f.sessionId.value, correlationId: f.correlationId.value,
    timeToLiveSeconds: f.ttl.value || null,
    scheduledEnqueueTimeUtc: f.scheduled.value ? new Date(f.scheduled.value).toISOString() : null,
    applicationProperties: props,
  };
  try {
    const result = await api("send", { method: "POST", body });
    say(`Sent message ${result.messageId} to ${e.path}${result.scheduled ? " (scheduled)" : ""}.`);
    const fresh = await api("entity", { query: { path: e.path } });
    renderCounts(fresh);
  } catch (err) { fail(err); }
}

// ---------------------------------------------------------------- start
async function start() {
  $("#login-form").addEventListener("submit", onLogin);
  $("#signout").addEventListener("click", onSignOut);
  $("#purge-all").addEventListener("click", () => purge("all"));
  window.addEventListener("hashchange", route);
  try {
    signedIn(await api("session"));
    await route();
  } catch (err) {
    clearMessages();
    signedOut();
  }
}

document.addEventListener("DOMContentLoaded", start);
