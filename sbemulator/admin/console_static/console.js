// sbemulator console: vanilla JavaScript, no build step. Message contents are untrusted: every value
// reaches the page through textContent (the h() helper), never through innerHTML.
"use strict";

const API = "api/";
const POLL_MS = 2000;
const SUB_QUEUE_LABELS = { active: "Messages", deadletter: "Dead-letter queue", transferdeadletter: "Transfer dead-letter queue" };
// The entity-wide purge and the one of a single list must not read alike.
const PURGE_LABELS = {
  all: "Purge entity (every message, dead-lettered too)",
  active: "Purge active, scheduled and deferred only",
  deadletter: "Purge dead-letter queue only",
  transferdeadletter: "Purge transfer dead-letter queue only",
};

const state = { signedIn: false, route: null, timer: null, entity: null, page: null, draft: null, received: null };

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
    const message = (data && (data.message || (data.error && data.error.message))) || response.statusText || "Request failed";
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
function clearMessages() {
  $("#error").hidden = true; $("#error").textContent = ""; say("");
  $("#poll-error").hidden = true; $("#poll-error").textContent = "";
}

function show(view) {
  for (const id of ["login-view", "overview-view", "entity-view", "edit-view"]) $("#" + id).hidden = id !== view;
  // Hidden views keep no forms: their ids (and labels) would be found twice.
  if (view !== "edit-view") $("#edit-body").replaceChildren();
  if (view !== "entity-view") $("#tab-body").replaceChildren();
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
  if (pathPart.startsWith("/new/")) {
    return { view: "new", kind: pathPart.slice("/new/".length), topic: query.get("topic") || "" };
  }
  return { view: "overview" };
}

async function route() {
  if (!state.signedIn) return;
  stopPolling();
  clearMessages();
  if (state.flash) { say(state.flash); state.flash = null; }  // said before a change of view
  const r = parseRoute();
  const previous = state.route;
  state.route = r;
  await keepFocus(async () => {
    try {
      if (r.view === "entity") await showEntity(r, previous);
      else if (r.view === "new") await showNewEntity(r);
      else await showOverview();
    } catch (err) { fail(err); }
  }, () => state.route === r);
}

// Views are re-rendered, which would drop keyboard focus to the top of the page: put it back on the
// control with the same id (a tab, a paging button), or else on the new view's heading. Only while
// the render is still `current`: a view whose load finished after the user moved on (a slow server)
// must not take the focus from the view the user is in.
async function keepFocus(render, current = () => true) {
  const active = document.activeElement;
  const id = active && active !== document.body ? active.id : "";
  await render();
  if (!current()) return;
  const usable = (el) => el && el.isConnected && !el.disabled && el.offsetParent !== null;
  if (active && active !== document.body && usable(active) && document.activeElement === active) return;
  const again = id ? document.getElementById(id) : null;
  if (usable(again)) { again.focus(); return; }
  const heading = document.querySelector("main section:not([hidden]) h1");
  if (heading) heading.focus({ preventScroll: true });
}

function stopPolling() { if (state.timer) { clearInterval(state.timer); state.timer = null; } }
// A failed refresh is shown (and retried on the next tick; the notice goes once one succeeds); `onError`
// may decide the failure is final (an entity that no longer exists) and stop the polling.
function poll(fn, onError) {
  stopPolling();
  let failing = false;
  const timer = setInterval(async () => {
    if (document.hidden || !$("#live").checked) return;
    try {
      await fn();
      if (failing) { failing = false; $("#poll-error").hidden = true; }
    } catch (err) {
      if (state.timer !== timer) return;  // the view changed meanwhile
      if (onError && onError(err)) { stopPolling(); return; }
      failing = true;
      const box = $("#poll-error");
      box.textContent = "Live update failed: " + (err instanceof Error ? err.message : String(err)) + " (retrying)";
      box.hidden = false;
    }
  }, POLL_MS);
  state.timer = timer;
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

// The broker's clock: a manual one (--clock manual) can be moved from here; every timer follows it.
function renderClock(clock) {
  $("#clock-box").hidden = false;
  $("#clock-now").textContent = formatTime(clock.now) + " (" + clock.now + ")";
  $("#clock-mode").textContent = clock.mode === "manual" ? "manual clock" : "real time";
  $("#clock-form").hidden = !clock.canAdvance;
}

async function onAdvanceClock(event) {
  event.preventDefault();
  clearMessages();
  const seconds = Number(event.target.seconds.value);
  try {
    const clock = await api("clock-advance", { method: "POST", body: { seconds } });
    renderClock(clock);
    await refreshOverview();
    say(`Advanced the emulator's clock by ${seconds} s: it is now ${clock.now}.`);
  } catch (err) { fail(err); }
}

// Injected faults (docs/emulator.md, "Fault injection"): listed with how often each matched and
// failed, added and cleared here as through POST/DELETE /$admin/faults.
let faultChoices = null;
async function refreshFaults() {
  let data;
  try { data = await api("faults"); } catch (err) { if (err.status === 404) { $("#faults-box").hidden = true; return; } throw err; }
  $("#faults-box").hidden = false;
  if (!faultChoices) {
    faultChoices = data;
    $("#fault-operation").replaceChildren(...data.operations.map((o) => h("option", { value: o }, o)));
    $("#fault-effect").replaceChildren(...Object.keys(data.effects).map((e) => h("option", { value: e }, e)));
  }
  const rows = data.faults.map((f) => h("tr", { "data-fault": f.id },
    h("td", {}, h("code", {}, f.id)), h("td", {}, f.operation), h("td", {}, f.effect), h("td", {}, f.entity),
    h("td", { className: "num" }, f.count === null ? "always" : String(f.count)),
    h("td", { className: "num" }, String(f.matched)), h("td", { className: "num" }, String(f.applied)),
    h("td", {}, h("button", { type: "button", className: "secondary", onclick: () => clearFault(f.id) }, "Clear " + f.id))));
  if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: 8, className: "empty" }, "No fault is injected.")));
  $("#faults tbody").replaceChildren(...rows);
  $("#clear-faults").disabled = !data.faults.length;
}

async function onAddFault(event) {
  event.preventDefault();
  clearMessages();
  const f = event.target;
  const body = { operation: f.operation.value, effect: f.effect.value, entity: f.entity.value.trim() || "*" };
  if (f.count.value !== "") body.count = Number(f.count.value);
  if (f.probability.value !== "") body.probability = Number(f.probability.value);
  if (f.seconds.value !== "") body.seconds = Number(f.seconds.value);
  try {
    const rule = await api("faults", { method: "POST", body });
    await refreshFaults();
    say(`Injected ${rule.id}: ${rule.effect} on ${rule.operation} of ${rule.entity}.`);
  } catch (err) { fail(err); }
}

async function clearFault(id) {
  clearMessages();
  try {
    await api(id ? "faults/" + encodeURIComponent(id) : "faults", { method: "DELETE", body: {} });
    await refreshFaults();
    say(id ? `Cleared ${id}.` : "Cleared every fault.");
  } catch (err) { fail(err); }
}

async function refreshOverview() {
  renderClock(await api("clock"));
  await refreshFaults();
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
  // Polling starts before the first load: if that one fails, the next ticks retry and say so.
  poll(refreshOverview);
  await refreshOverview();
}

// ---------------------------------------------------------------- entity
function tabsFor(e) {
  const tabs = [["overview", "Overview"]];
  tabs.push(["messages", e.kind === "topic" ? "Scheduled messages" : "Messages"]);
  if (e.kind !== "topic") tabs.push(["deadletter", "Dead-letter queue"]);
  if (e.kind !== "topic" && e.counts.transferDeadLetter > 0) tabs.push(["transferdeadletter", "Transfer dead-letter"]);
  if (e.kind !== "topic") tabs.push(["receive", "Receive"]);
  if (e.kind !== "subscription") tabs.push(["send", "Send"]);
  tabs.push(["settings", "Settings"]);
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

function entityGone(path, message) {
  // Nothing of the previous entity may stay on screen: title, counts, tabs and actions all go.
  state.entity = null;
  $("#entity-title").textContent = "Entity not found";
  $("#entity-crumb").textContent = path;
  $("#entity-kind").textContent = "";
  $("#entity-counts").replaceChildren();
  $("#tabs").replaceChildren();
  $("#entity-actions").hidden = true;
  $("#tab-body").replaceChildren(h("p", { className: "empty", id: "gone" }, message, " "),
    h("p", {}, h("a", { href: "#/" }, "Back to the namespace")));
}

async function showEntity(r, previous) {
  show("entity-view");
  const same = previous && previous.view === "entity" && previous.path === r.path;
  if (!same) {
    $("#entity-title").textContent = r.path.split("/").pop();
    $("#entity-crumb").textContent = r.path;
    $("#entity-kind").textContent = "";
    $("#entity-counts").replaceChildren();
    $("#tabs").replaceChildren();
  }
  if (!same || previous.tab !== r.tab) $("#tab-body").replaceChildren(h("p", { className: "muted" }, "Loading…"));
  let e;
  try {
    e = await api("entity", { query: { path: r.path } });
  } catch (err) {
    if (state.route !== r) return;  // the user moved on meanwhile: this load is stale
    if (err.status === 404) { entityGone(r.path, `There is no queue, topic or subscription '${r.path}'.`); return; }
    throw err;
  }
  if (state.route !== r) return;
  state.entity = e;
  $("#entity-actions").hidden = false;
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
  else if (tab === "send") body.replaceChildren(await renderSendForm(e));
  else if (tab === "receive") body.replaceChildren(...renderReceive(e));
  else if (tab === "settings") body.replaceChildren(await renderEntityForm(e.kind, e, e.topic || ""));
  else {
    const samePage = previous && previous.view === "entity" && previous.path === r.path && previous.tab === tab;
    if (!samePage || !state.page) state.page = { stack: [], from: 0, count: 20 };
    await renderMessages(e, tab === "messages" ? "active" : tab);
  }
  if (state.route !== r) return;  // a stale view must not replace the current one's polling
  poll(async () => {
    const fresh = await api("entity", { query: { path: r.path } });
    state.entity = fresh;
    renderCounts(fresh);
    if (tab === "overview") refreshLiveParts(fresh);
  }, (err) => {
    if (err.status !== 404) return false;
    entityGone(r.path, `The entity '${r.path}' no longer exists: it was deleted while it was open.`);
    return true;
  });
}

function propertyList(props, className = "props") {
  return h("dl", { className }, Object.entries(props).flatMap(([k, v]) =>
    [h("dt", {}, k), h("dd", {}, v === null || v === undefined ? "—" : String(v))]));
}

function rulesTable(rules, editable) {
  return h("div", { className: "scroll" }, h("table", { className: "grid rules" + (editable ? " editable" : "") },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Rule"), h("th", { scope: "col" }, "Filter type"),
      h("th", { scope: "col" }, "Filter"), h("th", { scope: "col" }, "Action"),
      editable ? h("th", { scope: "col" }, "Change") : null)),
    h("tbody", {}, rules.map((rule) => h("tr", { "data-rule": rule.name },
      h("td", {}, rule.name), h("td", {}, rule.filterType), h("td", {}, h("code", {}, rule.filter)),
      h("td", {}, rule.action ? h("code", {}, rule.action) : h("span", { className: "zero" }, "none")),
      editable ? h("td", {}, h("div", { className: "toolbar" },
        h("button", { type: "button", className: "secondary", onclick: () => {
          $("#rule-form-box").replaceChildren(ruleForm(state.entity, rule)); $("#rule-action").focus();
        } }, "Edit rule " + rule.name),
        h("button", { type: "button", className: "danger", onclick: () => onDeleteRule(state.entity, rule.name) },
          "Delete rule " + rule.name))) : null)))));
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
    parts.push(h("h2", {}, "Subscriptions"),
      h("p", {}, h("a", { href: "#/new/subscription?topic=" + encodeURIComponent(e.path), id: "new-subscription" }, "New subscription")));
    if (!e.subscriptions.length) parts.push(h("p", { className: "empty" }, "No subscriptions."));
    const box = h("div", { id: "subscriptions" });
    for (const s of e.subscriptions) {
      box.append(h("h3", {}, h("a", { href: entityHref(s.path) }, s.name), " ",
        h("span", { className: "muted", "data-sub-counts": s.path }, subCountsText(s))), rulesTable(s.rules));
    }
    parts.push(box);
  }
  if (e.kind === "subscription") {
    parts.push(h("h2", {}, "Rules"), rulesTable(e.rules, true), h("div", { id: "rule-form-box" }, ruleForm(e, null)));
  }
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

async function downloadBody(path, subQueue, seq) {
  clearMessages();
  try {
    const url = API + "body?" + new URLSearchParams({ path, subqueue: subQueue, seq }).toString();
    const response = await fetch(url, { headers: { "X-Requested-With": "sbconsole" }, credentials: "same-origin",
      cache: "no-store", signal: AbortSignal.timeout(15000) });
    if (!response.ok) {
      let message = response.statusText;
      try { message = (await response.json()).message || message; } catch (_) { /* not JSON */ }
      throw new ApiError(response.status, message);
    }
    const disposition = response.headers.get("Content-Disposition") || "";
    const match = /filename="([^"]+)"/.exec(disposition);
    const blob = await response.blob();
    const link = h("a", { href: URL.createObjectURL(blob), download: match ? match[1] : "body.bin", hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
    say(`Downloaded the body of message #${seq} (${blob.size} bytes).`);
  } catch (err) { fail(err); }
}

// A snapshot of the namespace (entities and messages; docs/emulator.md, "Snapshots") as a file.
async function downloadSnapshot() {
  clearMessages();
  try {
    const response = await fetch(API + "snapshot", { headers: { "X-Requested-With": "sbconsole" },
      credentials: "same-origin", cache: "no-store", signal: AbortSignal.timeout(60000) });
    if (!response.ok) {
      let message = response.statusText;
      try { message = (await response.json()).message || message; } catch (_) { /* not JSON */ }
      throw new ApiError(response.status, message);
    }
    const match = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
    const blob = await response.blob();
    const link = h("a", { href: URL.createObjectURL(blob), download: match ? match[1] : "namespace.snapshot.json", hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
    say(`Downloaded a snapshot of the namespace (${blob.size} bytes).`);
  } catch (err) { fail(err); }
}

// Import a snapshot file: the namespace becomes what the file holds (docs/emulator.md, "Snapshots"); a file
// the emulator refuses changes nothing, and its answer says what is wrong.
async function importSnapshot(event) {
  const input = event.target;
  const file = input.files && input.files[0];
  input.value = "";
  if (!file) return;
  if (!confirm(`Replace every entity and message of the namespace with the snapshot ${file.name}?`)) return;
  clearMessages();
  try {
    const response = await fetch(API + "snapshot", { method: "POST", credentials: "same-origin", cache: "no-store",
      headers: { "X-Requested-With": "sbconsole", "Content-Type": "application/json" },
      body: await file.arrayBuffer(), signal: AbortSignal.timeout(120000) });
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (!response.ok) throw new ApiError(response.status, (data && data.message) || response.statusText);
    const n = data.imported;
    await route();
    say(`Imported ${file.name}: ${n.entities} entities, ${n.messages} messages, ${n.sessionStates} session states.`);
  } catch (err) { fail(err); }
}

// Edit and re-send: the message's body and properties fill the send form, whose target may be any
// queue or topic (a subscription's or dead-letter queue's message goes to its topic by default).
function editAndResend(m, e) {
  state.draft = m;
  const target = e.kind === "subscription" ? e.topic : e.path;
  location.hash = entityHref(target, "send");
}

function messageActions(m, e, subQueue) {
  return h("div", { className: "toolbar message-actions" },
    h("button", { type: "button", className: "secondary", onclick: () => downloadBody(e.path, subQueue, m.sequenceNumber) },
      "Download body #" + m.sequenceNumber),
    h("button", { type: "button", className: "secondary", onclick: () => editAndResend(m, e) },
      "Edit and re-send #" + m.sequenceNumber));
}

function messageItem(m, selectable, actions) {
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
  if (actions) li.append(actions);
  if (selectable) {
    li.append(h("button", { type: "button", className: "secondary",
      onclick: () => resubmit([m.sequenceNumber]) }, "Resubmit #" + m.sequenceNumber));
  }
  return li;
}

async function renderMessages(e, subQueue) {
  const page = state.page;
  const fromInput = h("input", { id: "from-seq", type: "number", min: "0", step: "1", inputmode: "numeric",
    value: page.from || "", placeholder: "first" });
  const fromForm = h("form", { className: "inline-form", id: "from-form", onsubmit: (ev) => {
    ev.preventDefault();
    page.stack = []; page.from = Math.max(0, Number(fromInput.value) || 0);
    keepFocus(() => renderMessages(e, subQueue).catch(fail));
  } }, h("label", { className: "inline", for: "from-seq" }, "From sequence number"), fromInput,
    h("button", { type: "submit", className: "secondary", id: "peek-from" }, "Peek from"));
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
    h("span", { className: "muted", id: "page-info" }, first === null ? "No messages" : `Sequence numbers ${first} to ${last}`),
    fromForm);
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
    onclick: () => purge(subQueue) }, PURGE_LABELS[subQueue]));
  const list = data.messages.length
    ? h("ul", { className: "messages", "aria-label": SUB_QUEUE_LABELS[subQueue] },
      data.messages.map((m) => messageItem(m, dead, messageActions(m, e, subQueue))))
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
  const what = subQueue === "all" ? "every message (dead-lettered and scheduled ones too)"
    : subQueue === "active" ? "the active, scheduled and deferred messages (not the dead-letter queue)"
    : "the " + SUB_QUEUE_LABELS[subQueue].toLowerCase();
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

async function renderSendForm(e) {
  const overview = await api("overview");
  const targets = overview.entities.map((x) => x.path);
  const draft = state.draft;
  state.draft = null;
  const rows = h("tbody", {});
  const sys = draft ? draft.systemProperties : {};
  const draftText = draft ? (draft.body.text === null ? "" : draft.body.text) : "";
  const form = h("form", { id: "send-form", className: "form-grid", onsubmit: (ev) => onSend(ev, e) },
    draft ? h("p", { className: "wide notice", id: "draft-note" },
      `Editing a copy of message #${draft.sequenceNumber}${draft.body.truncated ? " (its body was cut for display: the copy holds only the part shown)" : ""}. ` +
      "Change what you need, pick where it goes and send it; the original is left as it is.") : null,
    field("send-target", "Send to", h("select", { id: "send-target", name: "target" },
      targets.map((t) => h("option", { value: t, selected: t === e.path }, t)))),
    h("div", { className: "wide" }, field("send-body", "Body", h("textarea", { id: "send-body", name: "body" }, draftText))),
    field("send-content-type", "Content type", h("input", { id: "send-content-type", name: "contentType", list: "content-types", placeholder: "application/json", value: sys.ContentType || "" })),
    field("send-message-id", "Message id", h("input", { id: "send-message-id", name: "messageId", placeholder: "generated when empty" }),
      "Cleared after each send, so that the next message gets its own id."),
    field("send-subject", "Subject", h("input", { id: "send-subject", name: "subject", value: sys.Subject || "" })),
    field("send-session", "Session id" + (e.requiresSession ? " (required)" : ""),
      h("input", { id: "send-session", name: "sessionId", required: e.requiresSession, value: sys.SessionId || "" })),
    field("send-correlation", "Correlation id", h("input", { id: "send-correlation", name: "correlationId", value: sys.CorrelationId || "" })),
    field("send-ttl", "Time to live (seconds)", h("input", { id: "send-ttl", name: "ttl", type: "number", min: "1", step: "any" }),
      "Empty: the entity's default."),
    field("send-scheduled", "Scheduled enqueue time (local time)", h("input", { id: "send-scheduled", name: "scheduled", type: "datetime-local", step: "1" }),
      "Empty: enqueue now."),
    h("div", { className: "wide" },
      h("h3", {}, "Application properties"),
      h("div", { className: "scroll" }, h("table", { className: "props-editor" }, rows)),
      h("button", { type: "button", className: "secondary", id: "add-property", onclick: () => {
        const row = propertyRow(); rows.append(row); row.querySelector("input").focus();
      } }, "Add property")),
    h("div", { className: "wide" }, h("button", { type: "submit", id: "send-button" }, "Send message")),
    h("datalist", { id: "content-types" }, ["application/json", "text/plain", "application/xml", "application/octet-stream"].map((v) => h("option", { value: v }))));
  for (const p of draft ? draft.applicationProperties : []) {
    const row = propertyRow();
    row.querySelector(".prop-name").value = p.name;
    row.querySelector(".prop-value").value = p.value === null ? "" : String(p.value);
    const type = { long: "int", int: "int", double: "double", boolean: "boolean" }[p.type] || "string";
    row.querySelector(".prop-type").value = type;
    rows.append(row);
  }
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
  const target = f.target.value || e.path;
  const body = {
    path: target, body: f.body.value, contentType: f.contentType.value, messageId: f.messageId.value,
    subject: f.subject.value, sessionId: f.sessionId.value, correlationId: f.correlationId.value,
    timeToLiveSeconds: f.ttl.value || null,
    scheduledEnqueueTimeUtc: f.scheduled.value ? new Date(f.scheduled.value).toISOString() : null,
    applicationProperties: props,
  };
  try {
    const result = await api("send", { method: "POST", body });
    f.messageId.value = "";  // a second send must not reuse the id (duplicate detection would drop it)
    say(`Sent message ${result.messageId} to ${target}${result.scheduled ? " (scheduled)" : ""}.`);
    if (target === e.path) {
      const fresh = await api("entity", { query: { path: e.path } });
      renderCounts(fresh);
    }
  } catch (err) { fail(err); }
}

// ---------------------------------------------------------------- receive and settle
function renderReceive(e) {
  const sessions = e.requiresSession;
  const form = h("form", { id: "receive-form", className: "form-grid", onsubmit: (ev) => onReceive(ev, e) },
    field("receive-mode", "Receive mode", h("select", { id: "receive-mode", name: "mode" },
      h("option", { value: "peeklock" }, "Peek-lock (settle each message)"),
      h("option", { value: "receiveanddelete" }, "Receive and delete"))),
    field("receive-from", "From", h("select", { id: "receive-from", name: "subQueue" },
      h("option", { value: "active" }, "The entity"), h("option", { value: "deadletter" }, "Its dead-letter queue"))),
    field("receive-count", "Number of messages", h("input", { id: "receive-count", name: "count", type: "number", min: "1", max: "50", value: "1" })),
    sessions ? field("receive-session", "Session id", h("input", { id: "receive-session", name: "sessionId" }),
      "Empty: the next session with available messages.") : null,
    h("div", { className: "wide" }, h("button", { type: "submit", id: "receive-button" }, "Receive")));
  const intro = h("p", { className: "muted" },
    "Receiving takes messages as an SDK receiver does: in peek-lock mode they are locked (until the time shown) and their delivery count rises; " +
    "settle each one below. Receive and delete removes them at once.");
  return [intro, form, h("div", { id: "received" })];
}

async function onReceive(event, e) {
  event.preventDefault();
  clearMessages();
  const f = event.target;
  const body = { path: e.path, mode: f.mode.value, subQueue: f.subQueue.value, count: Number(f.count.value) || 1,
    sessionId: f.sessionId ? f.sessionId.value : null };
  try {
    const result = await api("receive", { method: "POST", body });
    state.received = result;
    renderReceived(e);
    const n = result.messages.length;
    say(n ? `Received ${n} message${n === 1 ? "" : "s"}` + (result.sessionId ? ` of session ${result.sessionId}` : "") +
      (result.mode === "peeklock" ? ": settle them before their locks lapse." : " (removed).") : "No message was available.");
    renderCounts(await api("entity", { query: { path: e.path } }));
  } catch (err) { fail(err); }
}

function renderReceived(e) {
  const result = state.received;
  const box = $("#received");
  if (!box || !result) return;
  if (!result.messages.length) { box.replaceChildren(h("p", { className: "empty" }, "No message was available.")); return; }
  box.replaceChildren(h("h2", {}, "Received"), h("ul", { className: "messages", "aria-label": "Received messages" },
    result.messages.map((m) => {
      const actions = m.lockToken ? settleControls(m, e, result) : h("p", { className: "muted" }, "Removed from the entity (receive and delete).");
      const item = messageItem(m, false, actions);
      if (m.lockedUntil) item.querySelector("summary").append(h("span", { className: "muted" }, "locked until " + formatTime(m.lockedUntil)));
      return item;
    })));
}

function settleControls(m, e, result) {
  const n = m.sequenceNumber;
  const reason = h("input", { id: "dl-reason-" + n, placeholder: "e.g. InvalidOrder" });
  const description = h("input", { id: "dl-description-" + n });
  const deadLetterBox = h("div", { className: "dead-letter-box", hidden: true },
    field("dl-reason-" + n, "Dead-letter reason", reason), field("dl-description-" + n, "Dead-letter description", description),
    h("button", { type: "button", className: "danger", onclick: () => settle(m, e, result, "deadletter", reason.value, description.value) },
      "Dead-letter #" + n));
  return h("div", { className: "settle" },
    h("div", { className: "toolbar" },
      h("button", { type: "button", onclick: () => settle(m, e, result, "complete") }, "Complete #" + n),
      h("button", { type: "button", className: "secondary", onclick: () => settle(m, e, result, "abandon") }, "Abandon #" + n),
      h("button", { type: "button", className: "secondary", onclick: () => settle(m, e, result, "defer") }, "Defer #" + n),
      h("button", { type: "button", className: "secondary", "aria-expanded": "false", onclick: (ev) => {
        deadLetterBox.hidden = !deadLetterBox.hidden;
        ev.target.setAttribute("aria-expanded", String(!deadLetterBox.hidden));
        if (!deadLetterBox.hidden) reason.focus();
      } }, "Dead-letter… #" + n)),
    deadLetterBox);
}

const SETTLED = { complete: "Completed", abandon: "Abandoned", defer: "Deferred", deadletter: "Dead-lettered" };

async function settle(m, e, result, action, reason, description) {
  clearMessages();
  try {
    await api("settle", { method: "POST", body: { path: e.path, subQueue: result.subQueue, lockToken: m.lockToken, action,
      sessionId: result.sessionId, reason: reason || null, description: description || null } });
    result.messages = result.messages.filter((x) => x !== m);
    renderReceived(e);
    say(`${SETTLED[action]} message #${m.sequenceNumber}.`);
    const heading = document.querySelector("#received h2") || $("#receive-button");
    if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus(); }
    renderCounts(await api("entity", { query: { path: e.path } }));
  } catch (err) { fail(err); }
}

// ---------------------------------------------------------------- entities and rules
const KIND_LABELS = { queue: "queue", topic: "topic", subscription: "subscription" };

async function showNewEntity(r) {
  show("edit-view");
  if (!KIND_LABELS[r.kind]) throw new Error(`Unknown entity kind '${r.kind}'.`);
  $("#edit-title").textContent = r.kind === "subscription" ? `New subscription of ${r.topic}` : `New ${r.kind}`;
  $("#edit-body").replaceChildren(await renderEntityForm(r.kind, null, r.topic));
}

function propertyInput(p, value, editing) {
  const id = "prop-" + p.name;
  const disabled = editing && p.immutable;
  let input;
  if (p.type === "bool") {
    input = h("input", { id, type: "checkbox", "data-prop": p.name, checked: value === true, disabled });
    return h("div", { className: "check" }, h("label", { className: "inline", for: id }, input, p.name),
      disabled ? h("p", { className: "help" }, "Fixed once the entity exists.") : null);
  }
  if (p.type === "status") {
    input = h("select", { id, "data-prop": p.name }, p.choices.map((c) => h("option", { value: c, selected: c === value }, c)));
  } else {
    const shown = value === null || value === undefined ? "" : String(value);
    input = h("input", { id, "data-prop": p.name, value: shown, disabled, type: p.type === "int" ? "number" : "text",
      placeholder: p.default === null || p.default === undefined ? "" : String(p.default),
      "aria-describedby": id + "-help" });
  }
  const help = [p.type === "duration" ? "ISO 8601 (PT5M) or TimeSpan (00:05:00); 'unlimited' for none." : "",
    p.bounds ? p.bounds.charAt(0).toUpperCase() + p.bounds.slice(1) + "." : "",
    disabled ? "Fixed once the entity exists." : ""].filter(Boolean).join(" ");
  return field(id, p.name, input, help || "Empty: " + (p.default === null ? "none" : String(p.default)) + ".");
}

async function renderEntityForm(kind, e, topic) {
  const schema = await api("schema", { query: { kind } });
  const editing = e !== null;
  const values = editing ? e.properties : {};
  const nameInput = h("input", { id: "entity-name", name: "name", required: true, disabled: editing, spellcheck: "false",
    value: editing ? e.name : "" });
  const form = h("form", { id: "entity-form", className: "form-grid", onsubmit: (ev) => onSaveEntity(ev, kind, e, topic) },
    field("entity-name", KIND_LABELS[kind].charAt(0).toUpperCase() + KIND_LABELS[kind].slice(1) + " name", nameInput),
    ...schema.properties.map((p) => propertyInput(p, editing ? values[p.name] : (p.type === "bool" ? p.default : null), editing)),
    h("div", { className: "wide toolbar" },
      h("button", { type: "submit", id: "save-entity" }, editing ? "Save changes" : "Create " + KIND_LABELS[kind]),
      editing ? h("button", { type: "button", className: "danger", id: "delete-entity", onclick: () => onDeleteEntity(e) },
        "Delete " + KIND_LABELS[kind]) : null));
  return form;
}

async function onSaveEntity(event, kind, e, topic) {
  event.preventDefault();
  clearMessages();
  const f = event.target;
  const properties = {};
  for (const input of f.querySelectorAll("[data-prop]")) {
    properties[input.dataset.prop] = input.type === "checkbox" ? input.checked : input.value.trim();
  }
  const name = e ? e.name : f.name.value.trim();
  try {
    const result = await api(e ? "update-entity" : "create-entity", { method: "POST",
      body: { kind, name, topic: topic || null, properties } });
    const message = `${e ? "Saved" : "Created"} ${kind} ${result.path}.`;
    if (e) { await route(); say(message); } else { state.flash = message; location.hash = entityHref(result.path); }
  } catch (err) { fail(err); }
}

async function onDeleteEntity(e) {
  if (!confirm(`Delete the ${e.kind} ${e.path} and every message in it? This cannot be undone.`)) return;
  clearMessages();
  try {
    await api("delete-entity", { method: "POST", body: { path: e.path } });
    state.flash = `Deleted ${e.kind} ${e.path}.`;
    location.hash = e.kind === "subscription" ? entityHref(e.topic) : "#/";
  } catch (err) { fail(err); }
}

function ruleForm(e, rule) {
  const editing = !!rule;
  const filterType = h("select", { id: "rule-type", name: "filterType" },
    ["Sql", "Correlation"].map((t) => h("option", { value: t, selected: rule ? rule.filterType === t : t === "Sql" }, t)));
  const sqlBox = h("div", { className: "wide", id: "rule-sql-box" },
    field("rule-sql", "SQL filter", h("input", { id: "rule-sql", name: "sqlExpression", spellcheck: "false",
      value: rule && rule.filterType === "Sql" ? rule.filter : "", placeholder: "1=1" })));
  const corr = (rule && rule.correlation) || {};
  const corrBox = h("div", { className: "wide form-grid", id: "rule-corr-box" },
    ["CorrelationId", "MessageId", "Label", "SessionId", "ReplyTo", "ReplyToSessionId", "To", "ContentType"].map((k) =>
      field("rule-c-" + k, k === "Label" ? "Label (subject)" : k, h("input", { id: "rule-c-" + k, "data-corr": k, value: corr[k] || "" }))),
    h("div", { className: "wide" }, field("rule-c-props", "Application properties (name=value, one a line)",
      h("textarea", { id: "rule-c-props", className: "short" },
        Object.entries(corr.Properties || {}).map(([k, v]) => `${k}=${v}`).join("\n")))));
  const sync = () => { const sql = filterType.value === "Sql"; sqlBox.hidden = !sql; corrBox.hidden = sql; };
  filterType.addEventListener("change", sync);
  sync();
  return h("form", { id: "rule-form", className: "form-grid card", onsubmit: (ev) => onSaveRule(ev, e, rule) },
    h("h3", { className: "wide" }, editing ? `Edit rule ${rule.name}` : "Add a rule"),
    field("rule-name", "Rule name", h("input", { id: "rule-name", name: "name", required: true, disabled: editing,
      value: editing ? rule.name : "" })),
    field("rule-type", "Filter type", filterType),
    sqlBox, corrBox,
    h("div", { className: "wide" }, field("rule-action", "SQL action (optional)", h("input", { id: "rule-action", name: "action",
      spellcheck: "false", value: rule && rule.action ? rule.action : "", placeholder: "SET Priority = 'High'" }))),
    h("div", { className: "wide" }, h("button", { type: "submit", id: "save-rule" }, editing ? "Save rule" : "Add rule")));
}

async function onSaveRule(event, e, rule) {
  event.preventDefault();
  clearMessages();
  const f = event.target;
  const correlation = {};
  for (const input of f.querySelectorAll("[data-corr]")) if (input.value.trim()) correlation[input.dataset.corr] = input.value.trim();
  correlation.Properties = f.querySelector("#rule-c-props").value.split("\n").map((line) => line.trim()).filter(Boolean)
    .map((line) => { const at = line.indexOf("="); return { name: at < 0 ? line : line.slice(0, at).trim(), value: at < 0 ? "" : line.slice(at + 1).trim(), type: "string" }; });
  const name = rule ? rule.name : f.name.value.trim();
  try {
    await api(rule ? "update-rule" : "create-rule", { method: "POST", body: { path: e.path, name,
      filterType: f.filterType.value, sqlExpression: f.sqlExpression.value, correlation, action: f.action.value } });
    await route();
    say(`${rule ? "Saved" : "Added"} rule ${name} on ${e.path}.`);
  } catch (err) { fail(err); }
}

async function onDeleteRule(e, name) {
  if (!confirm(`Delete the rule ${name} of ${e.path}?`)) return;
  clearMessages();
  try {
    await api("delete-rule", { method: "POST", body: { path: e.path, name } });
    await route();
    say(`Deleted rule ${name} of ${e.path}.`);
  } catch (err) { fail(err); }
}

// ---------------------------------------------------------------- start
async function start() {
  $("#login-form").addEventListener("submit", onLogin);
  $("#signout").addEventListener("click", onSignOut);
  $("#purge-all").addEventListener("click", () => purge("all"));
  $("#download-snapshot").addEventListener("click", downloadSnapshot);
  $("#import-snapshot").addEventListener("change", importSnapshot);
  $("#clock-form").addEventListener("submit", onAdvanceClock);
  $("#fault-form").addEventListener("submit", onAddFault);
  $("#clear-faults").addEventListener("click", () => clearFault(null));
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
