// The status page: reads v1/status once a second and redraws the tables in place (no reload).
// The API key the user types is kept in sessionStorage and sent as a bearer token.
"use strict";

const KEY = "sie-status-key";
const $ = (id) => document.getElementById(id);
let showAll = false;
let last = null;

function headers() {
  const key = sessionStorage.getItem(KEY);
  return key ? { Authorization: "Bearer " + key } : {};
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

const mib = (n) => (n / 2 ** 20).toFixed(1) + " MiB";
const fixed = (v, d) => (v === null || v === undefined ? "–" : Number(v).toFixed(d));
const pct = (v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(0) + "%");

function bar(fraction, cls) {
  const width = Math.max(0, Math.min(1, fraction)) * 100;
  return el("span", { class: "bar " + (cls || "") }, el("span", { style: "width:" + width.toFixed(1) + "%" }));
}

function queued(map) {
  const parts = Object.entries(map || {}).filter(([, n]) => n > 0).map(([p, n]) => p + " " + n);
  return parts.length ? parts.join(", ") : "0";
}

function banner(text) {
  $("banner").textContent = text || "";
  $("banner").classList.toggle("show", Boolean(text));
}

async function act(model, action) {
  banner(action + " " + model + "…");
  try {
    const r = await fetch("v1/models/" + model + "/" + action, { method: "POST", headers: headers() });
    const body = await r.json().catch(() => ({}));
    banner(r.ok ? "" : action + " " + model + ": " + (body.detail ? body.detail.code + ": " + body.detail.message : r.status));
  } catch (e) {
    banner(action + " " + model + ": " + e);
  }
  refresh();
}

function actions(m, role) {
  const cell = el("td", {});
  const button = (label, action) => el("button", { "data-action": action, onclick: () => act(m.id, action) }, label);
  if (m.state === "failed") cell.append(button("reload", "reload"));
  else if (m.state === "loaded") cell.append(button("evict", "evict"));
  else if (m.state === "available") cell.append(button("load", "load"));
  return cell;
}

function stateCell(m) {
  let text = m.state;
  if (m.state === "loading" && m.loading_s !== null) text += " " + m.loading_s.toFixed(1) + " s";
  if (m.state === "loaded" && m.load_seconds !== null) text += " (" + m.load_seconds.toFixed(1) + " s)";
  const cell = el("td", { class: "state state-" + m.state }, text);
  if (m.error) cell.append(el("div", { class: "err" }, m.error));
  return cell;
}

function modelRow(m, report) {
  const budget = report.memory ? report.memory.budget_bytes : 0;
  const mem = el("td", {});
  if (budget) mem.append(bar(m.charge_bytes / budget), " " + mib(m.charge_bytes));
  else mem.append(m.loaded_on !== null ? m.loaded_on + " of " + m.workers + " workers" : "–");
  const row = el(
    "tr",
    { "data-model": m.id, "data-state": m.state },
    el("td", {}, m.id),
    stateCell(m),
    mem,
    el("td", { class: "num rps" }, fixed(m.requests_per_s, 2)),
    el("td", { class: "num p50" }, fixed(m.p50_ms, 1)),
    el("td", { class: "num p99" }, fixed(m.p99_ms, 1)),
    el("td", {}, queued(m.queued)),
    el("td", { class: "num" }, pct(m.batch_fill)),
    el("td", { class: "num" }, fixed(m.padding_ratio, 2)),
    el("td", { class: "num" }, m.generator ? fixed(m.decode_tokens_per_s, 1) : "")
  );
  row.append(actions(m, report.role) || el("td", {}));
  return row;
}

function draw(report) {
  $("meta").textContent =
    report.role + " " + report.version + " · up " + Math.round(report.uptime_s) + " s · last " + Math.round(report.window_s) + " s · " +
    new Date().toLocaleTimeString();
  const mem = report.memory;
  $("memory-section").hidden = !mem;
  if (mem) {
    $("memory").replaceChildren(
      el("div", { class: "bar membar" }, el("span", { style: "width:" + ((100 * mem.used_bytes) / mem.budget_bytes).toFixed(1) + "%" })),
      el("div", {}, mib(mem.used_bytes) + " used of " + mib(mem.budget_bytes) + " (models " + mib(mem.charged_bytes) + ", untracked " +
        mib(mem.untracked_bytes) + ", free " + mib(mem.free_bytes) + ")")
    );
  }
  const active = (m) => showAll || m.state !== "available" || m.requests > 0;
  $("models").tBodies[0].replaceChildren(...report.models.filter(active).map((m) => modelRow(m, report)));
  const b = report.batches;
  $("batches-section").hidden = !b;
  if (b) {
    $("batches").textContent =
      b.in_progress + " batches in progress · " + b.lines_in_flight + " of " + b.inflight_limit + " lines in flight · " +
      b.lines_done + " lines done, " + b.lines_failed + " failed · " + b.lines_per_s.toFixed(1) + " lines/s";
  }
  $("pools-section").hidden = report.role !== "gateway";
  $("pools").tBodies[0].replaceChildren(
    ...report.pools.map((p) =>
      el(
        "tr",
        { "data-pool": p.name },
        el("td", {}, p.name),
        el("td", {}, ...p.workers.map((w) =>
          el("div", {}, w.id + (w.stopping ? " (stopping)" : "") + ": " + w.inflight + " in flight; " +
            Object.entries(w.models).filter(([, s]) => s !== "available").map(([id, s]) => id + " " + s).join(", "))
        ), p.workers.length ? "" : "no live worker"),
        el("td", {}, queued(p.pending)),
        el("td", { class: "num" }, p.dead_letters === null ? "?" : p.dead_letters)
      )
    )
  );
  $("errors").tBodies[0].replaceChildren(
    ...(report.errors.length
      ? report.errors.map((e) =>
          el("tr", {}, el("td", {}, e.at ? new Date(e.at * 1000).toLocaleTimeString() : "–"), el("td", {}, e.model),
            el("td", {}, e.code), el("td", { class: "err" }, e.message))
        )
      : [el("tr", {}, el("td", { class: "muted", colspan: "4" }, "none"))])
  );
}

async function refresh() {
  try {
    const r = await fetch("v1/status", { headers: headers(), cache: "no-store" });
    if (r.status === 401 || r.status === 403) {
      $("meta").textContent = "this server needs an API key: type it above";
      return;
    }
    last = await r.json();
    draw(last);
  } catch (e) {
    $("meta").textContent = "server unreachable (" + e + ")";
  }
}

$("key").value = sessionStorage.getItem(KEY) || "";
$("key").addEventListener("change", (ev) => {
  sessionStorage.setItem(KEY, ev.target.value.trim());
  refresh();
});
$("all").addEventListener("change", (ev) => {
  showAll = ev.target.checked;
  if (last) draw(last);
});
refresh();
setInterval(refresh, 1000);
