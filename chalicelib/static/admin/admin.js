// The shop owner's dashboard (docs/ADMIN.md, "Pages"). Signs in against admin/api/session, keeps the id token in
// sessionStorage (gone when the tab closes) and sends it as a Bearer token on every call; a 401 returns to the
// sign-in form. Every piece of data reaches the page through textContent or an attribute, never as HTML.

import { barChart, columnChart, funnelChart, redrawAll } from "./charts.js";

const API = "admin/api/";
const TOKEN_KEY = "bisn-admin-token";
const DAY_MS = 86_400_000;
const CHART_ROWS = 10;

const $ = (id) => document.getElementById(id);

// --- DOM building: strings become text nodes, so nothing from the API is ever parsed as markup.

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) {
      continue;
    }
    if (name === "text") {
      node.textContent = String(value);
    } else if (name.startsWith("on")) {
      node.addEventListener(name.slice(2), value);
    } else if (value === true) {
      node.setAttribute(name, "");
    } else {
      node.setAttribute(name, String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function say(message) {
  $("status").textContent = message;
}

function warn(message) {
  const alert = $("alert");
  alert.textContent = message || "";
  alert.hidden = !message;
}

// --- the session

function session() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(TOKEN_KEY) || "null");
    if (saved && typeof saved.token === "string" && saved.expires_at > Date.now()) {
      return saved;
    }
  } catch (error) {
    // a damaged entry is the same as none
  }
  sessionStorage.removeItem(TOKEN_KEY);
  return null;
}

function keepSession(answer) {
  const expiresIn = Number(answer.expires_in) || 3600;
  const saved = { token: answer.id_token, expires_at: Date.now() + expiresIn * 1000, email: answer.email, role: answer.role };
  sessionStorage.setItem(TOKEN_KEY, JSON.stringify(saved));
  return saved;
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

class SignedOut extends Error {}

// A body is sent as JSON, unless a content type is named: then it goes as it is (a file's bytes, for an import).
async function call(method, path, body, contentType) {
  const current = session();
  if (!current) {
    showSignIn("Please sign in.");
    throw new SignedOut();
  }
  const init = { method, headers: { Authorization: "Bearer " + current.token, Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = contentType || "application/json";
    init.body = contentType ? body : JSON.stringify(body);
  }
  const response = await fetch(API + path, init);
  return answer(response);
}

async function answer(response) {
  if (response.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    showSignIn("Your session has ended. Please sign in again.");
    throw new SignedOut();
  }
  let data = null;
  try {
    data = await response.json();
  } catch (error) {
    data = null;
  }
  if (!response.ok) {
    const code = data && typeof data.error === "string" ? data.error : "error";
    let message = data && typeof data.message === "string" ? data.message : `The server answered ${response.status}.`;
    if (response.status === 403) {
      message = "Your role may not do this. " + message;
    }
    throw new ApiError(response.status, code, message);
  }
  return data || {};
}

// Runs an action, showing what went wrong in the alert; returns undefined when it failed.
async function attempt(action) {
  warn("");
  try {
    return await action();
  } catch (error) {
    if (!(error instanceof SignedOut)) {
      warn(error instanceof ApiError ? error.message : "The dashboard could not reach the server. Try again.");
    }
    return undefined;
  }
}

// --- CSV: fetched with the token, then handed to the browser as a file.

async function downloadCsv(path, filename) {
  const current = session();
  if (!current) {
    showSignIn("Please sign in.");
    return;
  }
  await attempt(async () => {
    const response = await fetch(API + path, { headers: { Authorization: "Bearer " + current.token, Accept: "text/csv" } });
    if (!response.ok) {
      await answer(response);
    }
    saveBlob(await response.blob(), filename);
    say(`Downloaded ${filename}.`);
  });
}

function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const link = el("a", { href: url, download: filename, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// A spreadsheet must not run a cell as a formula: a cell that starts like one is written with a leading quote, and so
// is the text after a `,`, `;` or line break (where a spreadsheet that guesses another separator starts a new
// cell), as the API's CSV is (chalicelib/admin/csvs.py).
function csvCell(value) {
  const escaped = (piece) => {
    const start = piece.replace(/^ +/, "");
    const number = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/.test(start);
    return /^[=+\-@\t\r]/.test(start) && !number ? piece.slice(0, piece.length - start.length) + "'" + start : piece;
  };
  let text = value === null || value === undefined ? "" : String(value);
  text = text.split(/([,;\r\n])/).map((part, i) => (i % 2 ? part : escaped(part))).join("");
  if (text.startsWith("\r")) {
    text = "'" + text;
  }
  return /[",;\r\n\t]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

function csvLink(label, path, filename) {
  return el("a", {
    class: "csv", href: API + path, download: filename,
    onclick: (event) => { event.preventDefault(); downloadCsv(path, filename); },
  }, label);
}

// For a table the API has no CSV of (it is part of a larger answer): the table's own rows.
function csvButton(label, columns, rows, filename) {
  return el("button", {
    type: "button", class: "csv",
    onclick: () => {
      const lines = [columns.map((c) => csvCell(c.label)).join(",")];
      for (const row of rows) {
        lines.push(columns.map((c) => csvCell(row[c.key])).join(","));
      }
      saveBlob(new Blob([lines.join("\r\n") + "\r\n"], { type: "text/csv" }), filename);
      say(`Downloaded ${filename}.`);
    },
  }, label);
}

// --- tables

function table(caption, columns, rows, { id, rowAttrs, cellFor, empty: none = "Nothing in this period." } = {}) {
  const head = el("tr", {}, columns.map((c) => el("th", { scope: "col", class: c.numeric ? "num" : null }, c.label)));
  const body = rows.map((row) => el("tr", rowAttrs ? rowAttrs(row) : {},
    columns.map((c, index) => {
      const content = cellFor ? cellFor(c, row) : undefined;
      const value = content !== undefined ? content : cellValue(c, row[c.key]);
      return el(index === 0 ? "th" : "td", { scope: index === 0 ? "row" : null, class: c.numeric ? "num" : null }, value);
    })));
  const empty = rows.length ? null : el("tr", {}, el("td", { colspan: columns.length, class: "empty" }, none));
  return el("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": caption },
    el("table", { id }, el("caption", {}, caption), el("thead", {}, head), el("tbody", {}, body, empty)));
}

function show(value) {
  if (value === null || value === undefined || value === "") {
    return "—";
  }
  return String(value);
}

function cellValue(column, value) {
  if (column.time) {
    return timeEl(value);
  }
  if (column.day) {
    return dayEl(value);
  }
  return column.withTimes ? withTimes(show(value)) : show(value);
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) {
    return "not sold out";
  }
  const s = Number(seconds);
  if (s < 60) {
    return `${s} s`;
  }
  if (s < 3600) {
    return `${Math.round(s / 60)} min`;
  }
  if (s < 172_800) {
    return `${(s / 3600).toFixed(1)} h`;
  }
  return `${(s / 86_400).toFixed(1)} days`;
}

// With no currency from the catalogue the amount is shown bare: a made-up symbol would claim a currency.
function money(amount, currency) {
  const value = Number(amount);
  if (!currency) {
    return value.toFixed(2);
  }
  try {
    return new Intl.NumberFormat(undefined, { style: "currency", currency }).format(value);
  } catch (error) {
    return `${value.toFixed(2)} ${currency}`;
  }
}

function percent(rate) {
  return `${Math.round(Number(rate) * 1000) / 10}%`;
}

// Moments are shown in the staff member's own time zone (the browser's), in their locale's words; the API's ISO
// string stays in the <time> element's datetime and title, to the second.
const TIME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone;

function when(iso) {
  if (!iso) {
    return "—";
  }
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function timeEl(iso) {
  if (!iso || Number.isNaN(new Date(iso).getTime())) {
    return show(iso);
  }
  return el("time", { datetime: iso, title: `${iso} (UTC)`, class: "moment" }, when(iso));
}

// The period's days are UTC days (the API counts joins per UTC day): a day is shown as that day, never shifted.
function day(iso, style) {
  const date = new Date(`${iso}T00:00:00Z`);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleDateString(undefined, { ...style, timeZone: "UTC" });
}

function dayEl(iso) {
  return el("time", { datetime: iso, title: `${iso} (UTC day)` }, day(iso, { dateStyle: "medium" }));
}

// Text the support desk writes names moments as ISO strings (2026-11-30T08:25:29Z): each becomes a <time>.
const ISO_MOMENT = /(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z)/;

function withTimes(text) {
  const parts = String(text).split(ISO_MOMENT);
  if (parts.length === 1) {
    return text;
  }
  const span = el("span", {});
  parts.forEach((part, i) => span.append(i % 2 ? timeEl(part) : part));
  return span;
}

function figure(caption, drawInto, tableNode, extra) {
  const chart = el("div", { class: "chart-box" });
  const node = el("figure", { class: "figure" }, el("figcaption", {}, caption), chart, tableNode, extra);
  return { node, chart, draw: () => drawInto(chart) };
}

function stat(label, value, id) {
  return el("div", { class: "stat" }, el("dt", {}, label), el("dd", { id }, show(value)));
}

// A destructive action asks once more: a second button beside the first, which does it; Cancel or Escape backs off.
function confirmStep(anchor, question, yesLabel, action) {
  const existing = anchor.parentElement.querySelector(".confirm");
  if (existing) {
    existing.remove();
  }
  const box = el("div", { class: "confirm", role: "group", "aria-label": question });
  const cancel = () => { box.remove(); anchor.focus(); };
  const yes = el("button", { type: "button", class: "danger", onclick: async () => { box.remove(); await action(); } }, yesLabel);
  box.append(el("p", {}, question), yes, el("button", { type: "button", onclick: cancel }, "Cancel"));
  box.addEventListener("keydown", (event) => { if (event.key === "Escape") { cancel(); } });
  anchor.after(box);
  yes.focus();
}

// --- the period

function isoDay(date) {
  return date.toISOString().slice(0, 10);
}

function period() {
  return { from: $("period-from").value, to: $("period-to").value };
}

function periodQuery(extra) {
  const { from, to } = period();
  const params = new URLSearchParams({ from, to, ...(extra || {}) });
  return params.toString();
}

// --- Demand

async function showDemand(body) {
  const data = await call("GET", "demand?" + periodQuery());
  const skus = Array.isArray(data.skus) ? data.skus : [];
  const daily = Array.isArray(data.daily) ? data.daily : [];
  const waiting = skus.reduce((sum, s) => sum + Number(s.waiting || 0), 0);
  const unconfirmed = skus.reduce((sum, s) => sum + Number(s.unconfirmed || 0), 0);
  const fresh = daily.reduce((sum, d) => sum + Number(d.new || 0), 0);
  const columns = [
    { key: "name", label: "Product" }, { key: "sku", label: "SKU" },
    { key: "waiting", label: "Waiting now", numeric: true },
    { key: "unconfirmed", label: "Of them, email not confirmed", numeric: true },
    { key: "new_in_period", label: "New in period", numeric: true },
    { key: "advice", label: "What a restock tells" },
  ];
  const top = skus.slice(0, CHART_ROWS);
  const wanted = figure(
    `Most-wanted products: people waiting now (top ${top.length})`,
    (box) => barChart(box, { title: "People waiting now, by product", items: top.map((s) => ({ label: s.name || s.sku, value: Number(s.waiting) })), unit: "waiting" }),
    table("People waiting, by product", columns, skus, { id: "demand-table" }),
    el("p", { class: "downloads" }, csvLink("Download CSV", "demand?" + periodQuery({ format: "csv" }), `demand-${data.from || period().from}-${data.to || period().to}.csv`)),
  );
  const dayColumns = [{ key: "date", label: "Date", day: true }, { key: "new", label: "New requests", numeric: true }];
  const perDay = figure(
    "New requests per day",
    (box) => columnChart(box, { title: "New requests per day", items: daily.map((d) => ({ label: day(d.date, { day: "numeric", month: "short" }), value: Number(d.new) })), unit: "new" }),
    table("New requests per day (UTC days)", dayColumns, daily, { id: "daily-table" }),
    el("p", { class: "downloads" }, csvButton("Download CSV", dayColumns, daily, `new-per-day-${period().from}-${period().to}.csv`)),
  );
  body.replaceChildren(
    el("dl", { class: "stats" }, stat("People waiting now", waiting, "demand-waiting"),
      stat("Of them, email not confirmed", unconfirmed, "demand-unconfirmed"), stat("New in this period", fresh, "demand-new"),
      stat("Products with a line", skus.length, "demand-skus")),
    el("p", { class: "hint", id: "demand-rule" }, "A restock tells people only when the stock level rises from below the product’s notify threshold to at least it; each unit then tells one person, oldest place first. Email places not confirmed yet are passed over until their address confirms, so someone behind them gets the unit."),
    wanted.node, perDay.node,
  );
  wanted.draw();
  perDay.draw();
}

// --- Restocks

const RESTOCK_COLUMNS = [
  { key: "name", label: "Product" }, { key: "opened_at", label: "Opened", time: true },
  { key: "units", label: "Units", numeric: true }, { key: "notified", label: "Notified", numeric: true },
  { key: "held", label: "Held", numeric: true }, { key: "bought", label: "Bought", numeric: true },
  { key: "lapsed", label: "Lapsed", numeric: true }, { key: "expired", label: "Expired", numeric: true },
  { key: "sell_out", label: "Time to sell out" }, { key: "revenue_text", label: "Revenue recovered", numeric: true },
  { key: "funnel", label: "Funnel" },
];

async function showRestocks(body) {
  const data = await call("GET", "restocks?" + periodQuery());
  const restocks = (Array.isArray(data.restocks) ? data.restocks : []).map((r) => ({
    ...r, sell_out: duration(r.sold_out_seconds), revenue_text: money(r.revenue, r.currency),
  }));
  const channels = Array.isArray(data.by_channel) ? data.by_channel : [];
  const detail = el("div", { id: "restock-detail", class: "detail", tabindex: "-1" });
  const list = table("Restocks in this period", RESTOCK_COLUMNS, restocks, {
    id: "restocks-table",
    rowAttrs: (r) => ({ "data-restock": r.restock_id }),
    cellFor: (column, r) => (column.key === "funnel"
      ? el("button", { type: "button", onclick: () => showFunnel(r.restock_id, detail) }, "Show funnel", el("span", { class: "visually-hidden" }, ` for ${r.name || r.sku}, ${when(r.opened_at)}`))
      : undefined),
  });
  const channelColumns = [
    { key: "channel", label: "Channel" }, { key: "notified", label: "Notified", numeric: true },
    { key: "bought", label: "Bought", numeric: true }, { key: "rate_text", label: "Conversion", numeric: true },
  ];
  const channelRows = channels.map((c) => ({ ...c, rate_text: percent(c.rate) }));
  const byChannel = figure(
    "Conversion rate by channel",
    (box) => barChart(box, { title: "Conversion rate by channel", items: channels.map((c) => ({ label: c.channel, value: Math.round(Number(c.rate) * 1000) / 10 })), format: (v) => `${v}%` }),
    table("Conversion rate by channel", channelColumns, channelRows, { id: "channels-table" }),
    el("p", { class: "downloads" }, csvButton("Download CSV", channelColumns, channelRows, `conversion-by-channel-${period().from}-${period().to}.csv`)),
  );
  body.replaceChildren(
    el("section", { "aria-labelledby": "restocks-heading" }, el("h3", { id: "restocks-heading" }, "Restocks"), list,
      el("p", { class: "downloads" }, csvLink("Download CSV", "restocks?" + periodQuery({ format: "csv" }), `restocks-${period().from}-${period().to}.csv`))),
    detail,
    byChannel.node,
  );
  byChannel.draw();
}

async function showFunnel(restockId, detail) {
  await attempt(async () => {
    const r = await call("GET", "restocks/" + encodeURIComponent(restockId));
    const stages = (Array.isArray(r.funnel) ? r.funnel : []).map((s) => ({ label: s.stage, value: Number(s.count) }));
    const columns = [{ key: "label", label: "Stage" }, { key: "value", label: "People", numeric: true }];
    const name = r.name || r.sku;
    const funnel = figure(
      `Funnel of the restock of ${name} opened ${when(r.opened_at)}: ${r.units} units`,
      (box) => funnelChart(box, { title: `Restock funnel: ${name}`, stages }),
      table(`Funnel of the restock of ${name}`, columns, stages, { id: "funnel-table" }),
      el("p", { class: "downloads" }, csvButton("Download CSV", columns, stages, `restock-${restockId}-funnel.csv`)),
    );
    detail.replaceChildren(el("h3", { id: "funnel-heading" }, `Funnel: ${name}`),
      el("dl", { class: "stats" }, stat("Units", r.units), stat("Lapsed", r.lapsed), stat("Expired", r.expired),
        stat("Time to sell out", duration(r.sold_out_seconds)), stat("Revenue recovered", money(r.revenue, r.currency))),
      funnel.node);
    funnel.draw();
    detail.focus();
  });
}

// --- Waiting list

async function showWaiting(body, sku) {
  const form = el("form", { class: "inline-form", id: "waiting-form", method: "post", action: "#" },
    el("div", {}, el("label", { for: "waiting-sku" }, "Product SKU"),
      el("input", { id: "waiting-sku", name: "sku", required: true, autocomplete: "off", list: "waiting-skus", spellcheck: "false" })),
    el("button", { type: "submit" }, "Show waiting list"));
  const options = el("datalist", { id: "waiting-skus" });
  const result = el("div", { id: "waiting-result" });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const sku = $("waiting-sku").value.trim();
    if (sku) {
      attempt(() => loadWaiting(sku, null, result));
    }
  });
  const owner = (session() || {}).role === "owner";
  body.replaceChildren(form, options, result, ...(owner ? [importSection()] : []));
  if (sku) {
    $("waiting-sku").value = sku;
    await loadWaiting(sku, null, result);
  }
  // Suggest the products that have a line in this period (a failure here only loses the suggestions).
  try {
    const demand = await call("GET", "demand?" + periodQuery());
    options.replaceChildren(...(demand.skus || []).map((s) => el("option", { value: s.sku }, s.name || s.sku)));
  } catch (error) {
    if (error instanceof SignedOut) {
      throw error;
    }
  }
}

const WAITING_COLUMNS = [
  { key: "position", label: "Place", numeric: true }, { key: "contact", label: "Contact" },
  { key: "channel", label: "Channel" }, { key: "state", label: "State" },
  { key: "joined", label: "Joined" }, { key: "action", label: "Action" },
];

async function loadWaiting(sku, cursor, result) {
  const path = "waiting/" + encodeURIComponent(sku) + (cursor ? "?cursor=" + encodeURIComponent(cursor) : "");
  const data = await call("GET", path);
  const entries = Array.isArray(data.entries) ? data.entries : [];
  let tbody = cursor ? result.querySelector("tbody") : null;
  if (!tbody) {
    const heading = el("h3", { id: "waiting-heading" }, `${data.name || sku} (${data.sku || sku})`);
    const wrap = table(`Waiting list of ${data.name || sku}, in the order people asked`, WAITING_COLUMNS, [], { id: "waiting-table" });
    wrap.querySelector("tbody").replaceChildren();
    const note = el("p", { class: "hint", id: "waiting-unconfirmed", hidden: true });
    result.replaceChildren(heading, backorderSection(data.sku || sku, data), note, wrap,
      el("p", { class: "downloads" }, csvLink("Download CSV", "waiting/" + encodeURIComponent(sku) + "?format=csv", `waiting-${sku}.csv`)));
    tbody = result.querySelector("tbody");
  }
  for (const entry of entries) {
    tbody.append(waitingRow(sku, entry, result));
  }
  if (!tbody.children.length) {
    tbody.append(el("tr", {}, el("td", { colspan: WAITING_COLUMNS.length, class: "empty" }, "Nobody is waiting.")));
  }
  // Said once above the list: an unconfirmed place keeps its number, and the units go past it.
  const passedOver = tbody.querySelectorAll("tr[data-unconfirmed]").length;
  const note = result.querySelector("#waiting-unconfirmed");
  const why = entries.find((e) => e.unconfirmed && e.note)?.note || note.dataset.why || "";
  note.dataset.why = why;
  note.hidden = passedOver === 0;
  note.textContent = passedOver === 0 ? ""
    : `${passedOver === 1 ? "1 place shown is" : `${passedOver} places shown are`} marked “email not confirmed”. ${why}`;
  result.querySelector(".more")?.remove();
  if (data.next) {
    result.append(el("button", { type: "button", class: "more", onclick: () => attempt(() => loadWaiting(sku, data.next, result)) }, "Show more"));
  }
  say(`${tbody.querySelectorAll("tr[data-state]").length} shown for ${sku}.`);
}

function waitingRow(sku, entry, result) {
  const actionCell = el("td", {});
  if (entry.action === "remove") {
    const button = el("button", { type: "button" }, "Remove", el("span", { class: "visually-hidden" }, ` place ${show(entry.position)}`));
    button.addEventListener("click", () => confirmStep(button, `Remove place ${show(entry.position)} (${entry.contact}) from this list?`, "Yes, remove", () => attempt(async () => {
      await call("POST", "waiting/" + encodeURIComponent(sku) + "/remove", { ref: entry.ref });
      await loadWaiting(sku, null, result);
      say(`Place ${show(entry.position)} was removed.`);
    })));
    actionCell.append(button);
  } else {
    actionCell.append("—");
  }
  const state = entry.unconfirmed
    ? el("td", {}, show(entry.state), el("span", { class: "note" }, "email not confirmed"))
    : el("td", {}, show(entry.state));
  return el("tr", { "data-state": entry.state, "data-unconfirmed": entry.unconfirmed === true, class: entry.unconfirmed ? "unconfirmed" : null },
    el("th", { scope: "row", class: "num" }, show(entry.position)), el("td", {}, show(entry.contact)),
    el("td", {}, show(entry.channel)), state, el("td", {}, timeEl(entry.joined_at)), actionCell);
}

// --- What the widget offers while the store sells the product on backorder (any staff role; docs/ADMIN.md)

const BACKORDER_OFFERS = [
  { value: "notify", label: "Notify me", hint: "a place on its waiting list" },
  { value: "preorder", label: "Pre-order note", hint: "a note that it can be ordered now" },
  { value: "none", label: "Nothing", hint: "nothing (the widget stays hidden)" },
];

function backorderOffer(value) {
  return BACKORDER_OFFERS.find((o) => o.value === value) || { label: show(value), hint: show(value) };
}

function backorderState(answer) {
  return answer.backorder === true
    ? `The store sells it on backorder now: the widget offers ${backorderOffer(answer.backorder_offer).hint}.`
    : "The store does not sell it on backorder now, so this choice waits: it applies once the store does.";
}

function backorderSection(sku, data) {
  const state = el("p", { id: "backorder-state" }, backorderState(data));
  // The answer is announced when it changes.
  const outcome = el("p", { id: "backorder-answer", "aria-live": "polite" });
  const choices = BACKORDER_OFFERS.map((o) => el("div", { class: "check" },
    el("input", { type: "radio", id: `backorder-${o.value}`, name: "backorder-offer", value: o.value, checked: o.value === data.backorder_offer, "aria-describedby": `backorder-${o.value}-hint` }),
    el("div", {}, el("label", { for: `backorder-${o.value}` }, o.label), el("span", { class: "note", id: `backorder-${o.value}-hint` }, o.hint))));
  const form = el("form", { class: "inline-form", id: "backorder-form", method: "post", action: "#" },
    el("fieldset", {}, el("legend", {}, "What the widget offers while the store sells it on backorder"), choices),
    el("button", { type: "submit" }, "Save"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = form.querySelector("input[name=backorder-offer]:checked");
    if (!chosen) {
      warn("Choose what the widget offers first.");
      form.querySelector("input[name=backorder-offer]").focus();
      return;
    }
    attempt(async () => {
      outcome.textContent = "";
      const saved = await call("POST", "products/" + encodeURIComponent(sku) + "/backorder", { offer: chosen.value });
      state.textContent = backorderState({ backorder: saved.backorder, backorder_offer: saved.offer });
      outcome.textContent = `Saved: ${backorderOffer(saved.offer).label}. `
        + (saved.waiting_list_open === true ? "A tap on Notify me joins its waiting list now." : "A tap on Notify me does not join its waiting list now.");
    });
  });
  return el("section", { class: "backorder", "aria-labelledby": "backorder-heading" },
    el("h4", { id: "backorder-heading" }, "Sold on backorder"), state, form, outcome);
}

// --- Importing another app's waiting list (the owner's; docs/IMPORT.md)

const IMPORT_FORMATS = [
  { value: "generic", label: "Generic", hint: "Columns: sku, channel (email or sms), contact, joined_at, consent_source; optional confirmed (yes/no) and name." },
  { value: "klaviyo", label: "Klaviyo", hint: "Columns: Email or Phone Number, SKU (or Variant SKU), Timestamp (or Subscribed At, Datetime); optional First Name." },
  { value: "cwginstock", label: "Back In Stock Notifier (cwginstock)", hint: "Columns: Email, SKU, Subscribed on (or Date); optional Status, Phone, Name." },
  { value: "woo-waitlist", label: "WooCommerce Waitlist", hint: "Columns: Email (or User Email), SKU (or Product SKU), Date Added (or Joined, Date)." },
];

function importSection() {
  const file = el("input", { id: "import-file", name: "file", type: "file", accept: ".csv,text/csv", required: true, "aria-describedby": "import-file-hint" });
  const select = el("select", { id: "import-format", name: "format", "aria-describedby": "import-format-hint" },
    IMPORT_FORMATS.map((f) => el("option", { value: f.value }, f.label)));
  const hint = el("p", { class: "hint", id: "import-format-hint" });
  const showHint = () => { hint.textContent = IMPORT_FORMATS.find((f) => f.value === select.value).hint; };
  select.addEventListener("change", showHint);
  showHint();
  const dryRun = el("input", { id: "import-dry-run", name: "dry_run", type: "checkbox" });
  // The summary is announced when it changes; the tables below it are read at will.
  const summary = el("p", { id: "import-summary", "aria-live": "polite" });
  const result = el("div", { id: "import-result" });
  const form = el("form", { class: "inline-form", id: "import-form", method: "post", action: "#" },
    el("label", { for: "import-file" }, "CSV file"),
    el("p", { class: "hint", id: "import-file-hint" }, "Each person joins the product’s list at their original join time. A file too large for the dashboard goes through ",
      el("code", {}, "bisn import"), "."),
    file,
    el("label", { for: "import-format" }, "Exported by"),
    select, hint,
    el("div", { class: "check" }, dryRun, el("label", { for: "import-dry-run" }, "Check only (dry run): nothing is written")),
    el("button", { type: "submit" }, "Import"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = file.files[0];
    if (!chosen) {
      warn("Choose the CSV file to import first.");
      file.focus();
      return;
    }
    // No size check here: the server refuses a file over IMPORT_MAX_BYTES (413) and its message names `bisn import`.
    attempt(async () => {
      summary.textContent = "";
      result.replaceChildren();
      say(`Importing ${chosen.name}…`);
      const query = new URLSearchParams({ format: select.value, ...(dryRun.checked ? { dry_run: "true" } : {}) });
      // The bytes go as they are, so a file that is not UTF-8 is refused by the server rather than altered here.
      const report = await call("POST", "imports?" + query, await chosen.arrayBuffer(), "text/csv");
      showImport(report, summary, result);
    });
  });
  return el("section", { class: "import", "aria-labelledby": "import-heading" },
    el("h3", { id: "import-heading" }, "Import a waiting list"),
    el("p", { class: "hint" }, "From another back-in-stock app’s export. Rows already on a list are never imported twice."),
    form, summary, result);
}

function showImport(report, summary, result) {
  const refused = Array.isArray(report.refused) ? report.refused : [];
  const already = Array.isArray(report.already) ? report.already : [];
  const columns = [{ key: "line", label: "Line", numeric: true }, { key: "reason", label: "Reason" }];
  const dry = report.dry_run === true;
  summary.textContent = dry
    ? `Checked ${show(report.rows)} row(s): ${show(report.imported)} would be imported, ${refused.length} refused. Nothing was written.`
    : `Imported ${show(report.imported)} of ${show(report.rows)} row(s); ${refused.length} refused.`;
  result.replaceChildren(
    el("dl", { class: "stats" }, stat("Rows read", report.rows, "import-rows"),
      stat(dry ? "Would be imported" : "Imported", report.imported, "import-imported"),
      stat("Confirmation emails owed", report.confirmations_owed, "import-owed"),
      stat("Already on the list", already.length, "import-already"), stat("Refused", refused.length, "import-refused")),
    table("Refused rows", columns, refused, { id: "import-refused-table", empty: "No row was refused." }),
    table("Rows already on the list", columns, already, { id: "import-already-table", empty: "No row was on the list already." }),
  );
  say("");
}

// --- Support

function showSupport(body) {
  const owner = (session() || {}).role === "owner";
  const input = el("input", { id: "support-contact", name: "contact", required: true, autocomplete: "off", spellcheck: "false" });
  const result = el("div", { id: "support-result", tabindex: "-1" });
  const contact = () => input.value.trim();
  const needContact = () => {
    if (!contact()) {
      warn("Type the email address or phone number in full first.");
      input.focus();
      return false;
    }
    return true;
  };
  const act = (what, path, done) => () => {
    if (needContact()) {
      attempt(async () => done(await call("POST", path, { contact: contact() })));
    }
  };
  const form = el("form", { id: "support-form", method: "post", action: "#" },
    el("label", { for: "support-contact" }, "Email address or phone number, typed in full"),
    el("p", { class: "hint", id: "support-hint" }, "Contacts are never listed: type one to look it up."),
    input);
  input.setAttribute("aria-describedby", "support-hint");
  const explain = el("button", { type: "submit" }, "Explain");
  // Opting out takes them off every list and ends a live offer (its unit passes on): asked once more, as Remove is.
  const optOut = el("button", { type: "button" }, "Opt out…");
  optOut.addEventListener("click", () => {
    if (!needContact()) {
      return;
    }
    const typed = contact();
    confirmStep(optOut, `Opt out ${typed}? Nothing more is sent to them and they leave every waiting list: a notice link they have not used stops working and its unit passes to the next person (a unit they hold now stays theirs until its hold ends).`, "Yes, opt them out", () => attempt(async () => {
      await call("POST", "contacts/optout", { contact: typed });
      say("Opted out: nothing more will be sent to them.");
    }));
  });
  // The link goes to the person's own contact and never to staff: only the owner of the contact can press its button,
  // which alone lifts the opt-out.
  const optIn = el("button", {
    type: "button",
    onclick: act("optin", "contacts/optin", (data) => {
      const where = data.channel === "sms" ? "by SMS" : "by email";
      result.replaceChildren(
        el("h3", {}, "Opt-in link sent"),
        el("p", {}, `An opt-in link was sent to them ${where}; pressing its button opts them back in. It works once, until `, timeEl(data.expires_at), "."),
        ...(data.sms_stop ? [el("p", { class: "hint" }, "They replied STOP to a text: the link reaches them only once they text START to the shop's number.")] : []),
      );
      say(`Opt-in link sent ${where}.`);
    }),
  }, "Opt in…");
  const exportButton = el("button", {
    type: "button", hidden: !owner,
    onclick: act("export", "contacts/export", (data) => {
      saveBlob(new Blob([JSON.stringify(data, null, 2)], { type: "application/json" }), "contact-export.json");
      result.replaceChildren(el("h3", {}, `Export of ${show(data.contact)}`), el("pre", { class: "export" }, JSON.stringify(data.data, null, 2)));
      say("Exported: the file was downloaded.");
    }),
  }, "Export (GDPR)");
  const forget = el("button", { type: "button", class: "danger", hidden: !owner }, "Forget (GDPR)…");
  forget.addEventListener("click", () => {
    if (!needContact()) {
      return;
    }
    const typed = contact();
    confirmStep(forget, `Forget ${typed}? Everything about them is deleted and cannot be brought back.`, "Yes, forget them", () => attempt(async () => {
      await call("POST", "contacts/forget", { contact: typed, confirm: true });
      result.replaceChildren();
      say("Forgotten: nothing about them is kept.");
    }));
  });
  form.append(el("div", { class: "actions" }, explain, optOut, optIn, exportButton, forget));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (needContact()) {
      attempt(async () => showExplanation(await call("POST", "contacts/explain", { contact: contact() }), result));
    }
  });
  const note = owner ? [] : [el("p", { class: "hint" }, "Export and forget are for the shop's owner.")];
  body.replaceChildren(form, ...note, result);
}

function showExplanation(data, result) {
  const places = Array.isArray(data.places) ? data.places : [];
  const decisions = Array.isArray(data.decisions) ? data.decisions : [];
  const placeColumns = [{ key: "sku", label: "SKU" }, { key: "state", label: "State" }, { key: "position", label: "Place", numeric: true }];
  const decisionColumns = [{ key: "at", label: "When", time: true }, { key: "what", label: "What", withTimes: true }, { key: "why", label: "Why", withTimes: true }];
  result.replaceChildren(
    el("h3", { id: "explain-heading" }, `About ${show(data.contact)}`),
    el("p", { id: "explain-optout" }, data.opted_out ? "Opted out: nothing is sent to them." : "Not opted out."),
    table("Their places in line", placeColumns, places, {
      id: "places-table", empty: "In no line now.",
      rowAttrs: (p) => ({ "data-unconfirmed": p.unconfirmed === true }),
      cellFor: (column, p) => (column.key === "state" && p.unconfirmed
        ? `${show(p.state)}, email not confirmed: passed over at a restock until the address confirms`
        : undefined),
    }),
    el("p", { class: "downloads" }, csvButton("Download CSV", placeColumns, places, "contact-places.csv")),
    table("Every decision about them, oldest first", decisionColumns, decisions, { id: "decisions-table", empty: "No decision about them yet." }),
    el("p", { class: "downloads" }, csvButton("Download CSV", decisionColumns, decisions, "contact-decisions.csv")),
  );
  result.focus();
}

// --- Operations

async function showOperations(body) {
  const data = await call("GET", "operations");
  const queues = Array.isArray(data.queues) ? data.queues : [];
  const alarms = Array.isArray(data.alarms) ? data.alarms : [];
  const spend = data.sms_spend || {};
  const queueColumns = [{ key: "name", label: "Queue" }, { key: "dlq_depth", label: "Dead-letter depth", numeric: true }, { key: "redrive", label: "Redrive" }];
  const queueTable = table("Dead-letter queues", queueColumns, queues, {
    id: "queues-table",
    rowAttrs: (q) => ({ "data-queue": q.name }),
    cellFor: (column, q) => (column.key === "redrive"
      ? el("button", {
        type: "button", disabled: Number(q.dlq_depth) === 0,
        onclick: () => attempt(async () => {
          const moved = await call("POST", "operations/redrive", { queue: q.name });
          say(`Redrive of ${q.name}: ${Number(moved.moved) || 0} message(s) moved back.`);
          await showOperations(body);
        }),
      }, "Redrive", el("span", { class: "visually-hidden" }, ` ${q.name}`))
      : undefined),
  });
  const alarmColumns = [{ key: "name", label: "Alarm" }, { key: "state", label: "State" }];
  const limit = spend.limit_usd === null || spend.limit_usd === undefined ? null : Number(spend.limit_usd);
  const month = Number(spend.month_usd || 0);
  const spendText = limit === null ? `${money(month, "USD")} this month (no limit set)` : `${money(month, "USD")} of ${money(limit, "USD")} this month`;
  const meter = limit ? el("meter", { id: "sms-meter", min: 0, max: limit, low: limit * 0.7, high: limit * 0.9, optimum: 0, value: Math.min(month, limit), "aria-labelledby": "sms-spend-label" }) : null;
  const opsRows = [
    { measure: "Sends failed", value: data.sends_failed }, { measure: "Undeliverable", value: data.undeliverable },
    { measure: "SMS spend this month (USD)", value: month }, { measure: "SMS spend limit (USD)", value: limit === null ? "" : limit },
  ];
  const opsColumns = [{ key: "measure", label: "Measure" }, { key: "value", label: "Value", numeric: true }];
  body.replaceChildren(
    el("dl", { class: "stats" }, stat("Sends failed", data.sends_failed, "ops-failed"), stat("Undeliverable", data.undeliverable, "ops-undeliverable"),
      stat("Alarms in alarm", alarms.filter((a) => a.state === "ALARM").length, "ops-alarming")),
    el("section", { class: "spend", "aria-labelledby": "sms-spend-label" }, el("h3", { id: "sms-spend-label" }, "SMS spend"), el("p", { id: "sms-spend" }, spendText), meter,
      el("p", { class: "downloads" }, csvButton("Download CSV", opsColumns, opsRows, "operations.csv"))),
    el("section", { "aria-labelledby": "queues-heading" }, el("h3", { id: "queues-heading" }, "Queues"), queueTable,
      el("p", { class: "downloads" }, csvButton("Download CSV", queueColumns.slice(0, 2), queues, "dead-letter-queues.csv"))),
    el("section", { "aria-labelledby": "alarms-heading" }, el("h3", { id: "alarms-heading" }, "Alarms"),
      table("Alarms and their state", alarmColumns, alarms, { id: "alarms-table", empty: "This stage has no alarms.", rowAttrs: (a) => ({ "data-state": a.state }) }),
      el("p", { class: "downloads" }, csvButton("Download CSV", alarmColumns, alarms, "alarms.csv"))),
    storeSection(data.store),
  );
}

// The store's own set-up, on a platform that can check it (WooCommerce): what is wrong, and its webhooks' status.
function storeSection(store) {
  if (!store) return null;
  const problems = Array.isArray(store.problems) ? store.problems : [];
  const hooks = Array.isArray(store.webhooks) ? store.webhooks : [];
  const hookColumns = [{ key: "id", label: "Webhook" }, { key: "topic", label: "Topic" }, { key: "status", label: "Status" }];
  const credentials = store.credentials === "refused" ? "Credentials refused" : store.credentials === "ok" ? "Accepted" : "Not checked (no answer)";
  return el("section", { "aria-labelledby": "store-heading" }, el("h3", { id: "store-heading" }, "Store"),
    el("dl", { class: "stats" }, stat("API key", credentials, "store-credentials"), stat("Stock management", store.stock_management, "store-stock")),
    problems.length
      ? el("ul", { id: "store-problems", role: "alert" }, ...problems.map((problem) => el("li", {}, problem)))
      : el("p", { id: "store-problems" }, "Nothing to fix."),
    table("The store's webhooks to this app", hookColumns, hooks, { id: "store-webhooks", empty: "No webhook delivers to this app.", rowAttrs: (h) => ({ "data-status": h.status }) }));
}

// --- tabs

const VIEWS = { demand: showDemand, restocks: showRestocks, waiting: showWaiting, support: showSupport, operations: showOperations };
const USES_PERIOD = new Set(["demand", "restocks"]);
let currentTab = "demand";

// The address's fragment names the tab (#restocks), or a product's waiting list (#waiting/SKU), so a link can open
// either and a reload stays where it was. A fragment is never sent to the server.
function fromFragment() {
  const [name, ...rest] = decodeURIComponent(location.hash.slice(1)).split("/");
  return VIEWS[name] ? { name, arg: rest.join("/") || undefined } : { name: currentTab, arg: undefined };
}

async function openTab(name, { focus = false, arg } = {}) {
  currentTab = name;
  const fragment = "#" + name + (arg ? "/" + encodeURIComponent(arg) : "");
  if (location.hash !== fragment) {
    history.replaceState(null, "", fragment);
  }
  for (const tab of document.querySelectorAll('[role="tab"]')) {
    const chosen = tab.dataset.tab === name;
    tab.setAttribute("aria-selected", String(chosen));
    tab.tabIndex = chosen ? 0 : -1;
    if (chosen && focus) {
      tab.focus();
    }
    $("panel-" + tab.dataset.tab).hidden = !chosen;
  }
  $("period").hidden = !USES_PERIOD.has(name);
  $("time-zone").hidden = !USES_PERIOD.has(name);
  const body = $("body-" + name);
  body.setAttribute("aria-busy", "true");
  say("Loading…");
  await attempt(() => VIEWS[name](body, arg));
  body.removeAttribute("aria-busy");
  if ($("status").textContent === "Loading…") {
    say("");
  }
  redrawAll();
}

function wireTabs() {
  const tabs = Array.from(document.querySelectorAll('[role="tab"]'));
  tabs.forEach((tab, index) => {
    tab.addEventListener("click", () => openTab(tab.dataset.tab));
    tab.addEventListener("keydown", (event) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
      if (step) {
        event.preventDefault();
        openTab(tabs[(index + step + tabs.length) % tabs.length].dataset.tab, { focus: true });
      } else if (event.key === "Home" || event.key === "End") {
        event.preventDefault();
        openTab(tabs[event.key === "Home" ? 0 : tabs.length - 1].dataset.tab, { focus: true });
      }
    });
  });
  $("period").addEventListener("submit", (event) => {
    event.preventDefault();
    const { from, to } = period();
    if (!from || !to || from > to) {
      warn("Choose a From date on or before the To date.");
      return;
    }
    openTab(currentTab);
  });
}

// --- signing in

let pending = null;  // {email, session, challenge} while Cognito asks for more

const CHALLENGES = {
  NEW_PASSWORD_REQUIRED: { text: "Choose a new password to finish signing in.", label: "New password", type: "password", autocomplete: "new-password", inputmode: "text" },
  SOFTWARE_TOKEN_MFA: { text: "Enter the six-digit code from your authenticator app.", label: "Code from your authenticator app", type: "text", autocomplete: "one-time-code", inputmode: "numeric" },
  // A pool with MFA on gives no token to a member without an authenticator: the key is added here, once.
  MFA_SETUP: { text: "Staff sign in with an authenticator app. Add this key to yours (as a time-based key), then enter the six-digit code it shows.", label: "Code from your authenticator app", type: "text", autocomplete: "one-time-code", inputmode: "numeric" },
};

function showSignIn(message) {
  $("dashboard").hidden = true;
  $("who").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-form").hidden = false;
  $("challenge-form").hidden = true;
  pending = null;
  warn("");
  say(message || "");
  $("sign-in-email").focus();
}

function showChallenge(email, reply) {
  const kind = CHALLENGES[reply.challenge];
  if (!kind) {
    warn("This account needs a sign-in step the dashboard does not offer.");
    return;
  }
  pending = { email, session: reply.session, challenge: reply.challenge };
  $("challenge-text").textContent = kind.text;
  $("challenge-label").textContent = kind.label;
  // Grouped in fours so it can be read off and typed into a phone.
  $("challenge-secret").textContent = reply.secret ? reply.secret.match(/.{1,4}/g).join(" ") : "";
  $("challenge-key").hidden = !reply.secret;
  const answerInput = $("challenge-answer");
  answerInput.value = "";
  answerInput.type = kind.type;
  answerInput.autocomplete = kind.autocomplete;
  answerInput.inputMode = kind.inputmode;
  $("sign-in-form").hidden = true;
  $("challenge-form").hidden = false;
  answerInput.focus();
}

async function signInWith(path, payload, email) {
  warn("");
  let reply;
  try {
    const response = await fetch(API + path, { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" }, body: JSON.stringify(payload) });
    reply = await response.json().catch(() => ({}));
    if (!response.ok) {
      warn(response.status === 401 ? "That email and password did not match an account." : reply.message || `Sign-in failed (${response.status}).`);
      return;
    }
  } catch (error) {
    warn("The dashboard could not reach the server. Try again.");
    return;
  }
  if (reply.challenge) {
    showChallenge(email, reply);
    return;
  }
  keepSession({ ...reply, email: reply.email || email });
  $("sign-in-password").value = "";
  $("challenge-answer").value = "";
  showDashboard();
}

function showDashboard() {
  const current = session();
  $("sign-in").hidden = true;
  $("dashboard").hidden = false;
  $("who").hidden = false;
  $("who-email").textContent = current.email || "";
  $("who-role").textContent = current.role || "";
  const wanted = fromFragment();
  openTab(wanted.name, { arg: wanted.arg });
}

function wireSignIn() {
  $("sign-in-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const email = $("sign-in-email").value.trim();
    signInWith("session", { email, password: $("sign-in-password").value }, email);
  });
  $("challenge-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (pending) {
      signInWith("session/challenge", { ...pending, answer: $("challenge-answer").value }, pending.email);
    }
  });
  $("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    for (const name of Object.keys(VIEWS)) {
      $("body-" + name).replaceChildren();
    }
    showSignIn("Signed out.");
  });
}

function start() {
  const today = new Date();
  $("period-to").value = isoDay(today);
  $("period-from").value = isoDay(new Date(today.getTime() - 29 * DAY_MS));
  $("time-zone").textContent = `Times are shown in your time zone (${TIME_ZONE}). The period’s days, and the requests per day, run midnight to midnight UTC.`;
  wireTabs();
  wireSignIn();
  window.addEventListener("hashchange", () => {
    if (session() && !$("dashboard").hidden) {
      const wanted = fromFragment();
      openTab(wanted.name, { arg: wanted.arg });
    }
  });
  if (session()) {
    showDashboard();
  } else {
    showSignIn("");
  }
}

start();
