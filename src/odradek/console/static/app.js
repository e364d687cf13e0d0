// odradek console front end: hash routes, one view at a time, data from the JSON API under /api/.
// Every value from the cluster goes into the page as text (never as HTML).

const main = document.getElementById("view");
let view = null; // the current page's root: a stale timer of a previous page writes into a detached one
let cleanups = []; // timers of the current view, stopped when the route changes

// ---- helpers ---------------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "testid") el.dataset.testid = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

async function api(path, options = {}) {
  const init = { ...options, headers: { "Accept": "application/json" } };
  if (options.body !== undefined) {
    init.body = JSON.stringify(options.body);
    init.headers["Content-Type"] = "application/json";
  }
  const res = await fetch(`/api${path}`, init);
  let data = null;
  try { data = await res.json(); } catch { data = null; }
  if (!res.ok) throw new Error(data?.error || `${res.status} ${res.statusText}`);
  return data;
}

function toast(message, error = false) {
  const note = h("div", { class: error ? "note error" : "note", testid: "toast" }, message);
  document.getElementById("toast").append(note);
  setTimeout(() => note.remove(), error ? 8000 : 4000);
}

function every(ms, fn) {
  const id = setInterval(fn, ms);
  cleanups.push(() => clearInterval(id));
}

const fmt = new Intl.NumberFormat();
const num = (n) => (n === null || n === undefined ? "–" : fmt.format(n));
const rate = (v) => (v >= 100 ? fmt.format(Math.round(v)) : v.toFixed(v >= 10 ? 1 : 2));
const enc = encodeURIComponent;
const time = (ms) => (ms > 0 ? new Date(ms).toLocaleString() : "–");

function sparkline(points, width = 120, height = 28) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("class", "spark");
  const vals = points.map((p) => p.v);
  if (vals.length < 2) return svg;
  const max = Math.max(...vals, 1e-9);
  const xy = vals.map((v, i) => [(i / (vals.length - 1)) * width, height - 2 - (v / max) * (height - 4)]);
  const line = xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
  const area = document.createElementNS(NS, "path");
  area.setAttribute("d", `M0,${height} L${line.replaceAll(" ", " L")} L${width},${height} Z`);
  const poly = document.createElementNS(NS, "polyline");
  poly.setAttribute("points", line);
  svg.append(area, poly);
  return svg;
}

// A line chart with a y axis: series = [{name, points: [{t, v}]}] sharing one time axis.
function chart(series, testid) {
  const NS = "http://www.w3.org/2000/svg";
  const W = 900, H = 200, L = 44, B = 18;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "chart spark");
  if (testid) svg.dataset.testid = testid;
  const all = series.flatMap((s) => s.points);
  if (all.length < 2) {
    const t = document.createElementNS(NS, "text");
    t.setAttribute("x", L); t.setAttribute("y", H / 2);
    t.textContent = "collecting samples…";
    svg.append(t);
    return svg;
  }
  const t0 = Math.min(...all.map((p) => p.t)), t1 = Math.max(...all.map((p) => p.t));
  const max = Math.max(...all.map((p) => p.v), 1);
  const x = (t) => L + ((t - t0) / Math.max(t1 - t0, 1e-9)) * (W - L - 6);
  const y = (v) => H - B - (v / max) * (H - B - 8);
  for (const frac of [0, 0.5, 1]) {
    const g = document.createElementNS(NS, "line");
    g.setAttribute("x1", L); g.setAttribute("x2", W); g.setAttribute("y1", y(max * frac)); g.setAttribute("y2", y(max * frac));
    g.setAttribute("class", "gridline");
    const label = document.createElementNS(NS, "text");
    label.setAttribute("x", 2); label.setAttribute("y", y(max * frac) + 4);
    label.textContent = num(Math.round(max * frac));
    svg.append(g, label);
  }
  const span = document.createElementNS(NS, "text");
  span.setAttribute("x", L); span.setAttribute("y", H - 3);
  span.textContent = `last ${Math.round(t1 - t0)} s`;
  svg.append(span);
  for (const s of series) {
    if (s.points.length < 2) continue;
    const poly = document.createElementNS(NS, "polyline");
    poly.setAttribute("points", s.points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" "));
    const title = document.createElementNS(NS, "title");
    title.textContent = s.name;
    poly.append(title);
    svg.append(poly);
  }
  return svg;
}

function table(headers, rows, { testid, empty = "Nothing here yet." } = {}) {
  const head = h("tr", {}, headers.map((c) => (typeof c === "string" ? h("th", {}, c) : h("th", { class: c.cls }, c.label))));
  const body = rows.length ? rows : [h("tr", {}, h("td", { class: "empty", colspan: headers.length }, empty))];
  return h("table", { testid }, h("thead", {}, head), h("tbody", {}, body));
}

function errorBox(err) {
  return h("div", { class: "error-box", testid: "error" }, String(err.message || err));
}

// Bytes from base64, shown as text, pretty JSON (falling back to text) or hex.
function size(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

function bytes(b64) {
  if (b64 === null || b64 === undefined) return null;
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
const decoder = new TextDecoder("utf-8");
function render(b64, mode) {
  const data = bytes(b64);
  if (data === null) return "null";
  if (mode === "hex") {
    const parts = [];
    for (let i = 0; i < data.length; i += 16) {
      const row = Array.from(data.slice(i, i + 16), (b) => b.toString(16).padStart(2, "0")).join(" ");
      parts.push(`${i.toString(16).padStart(6, "0")}  ${row}`);
    }
    return parts.join("\n");
  }
  const text = decoder.decode(data);
  if (mode === "json") {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
  }
  return text;
}

// ---- views -----------------------------------------------------------------------------------------

async function overview() {
  const root = view;
  const draw = async () => {
    let d;
    try { d = await api("/overview"); } catch (e) { root.replaceChildren(errorBox(e)); return; }
    const tp = d.throughput.total;
    const last = tp.length ? tp[tp.length - 1].v : 0;
    const card = (label, value, cls = "", testid) =>
      h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: `value ${cls}`, testid }, value));
    root.replaceChildren(
      h("div", { class: "page-head" },
        h("div", {}, h("h1", {}, "Overview"), h("div", { class: "muted" }, `cluster ${d.cluster_id || "–"}`))),
      h("div", { class: "cards", testid: "overview-cards" },
        card("Brokers", num(d.brokers.length), "", "brokers-count"),
        card("Controller", d.controller ?? "–"),
        card("Topics", num(d.topics), "", "topics-count"),
        card("Partitions", num(d.partitions), "", "partitions-count"),
        card("Under-replicated", num(d.under_replicated), d.under_replicated ? "bad" : "good", "urp-count"),
        card("Messages / s", rate(last))),
      h("div", { class: "panel" }, h("h2", {}, "Throughput, all topics (messages per second)"),
        chart([{ name: "all topics", points: tp }], "throughput-chart"),
        d.throughput.error ? h("div", { class: "status-line" }, `last sample failed: ${d.throughput.error}`) : null),
      h("div", { class: "panel" }, h("h2", {}, "Topics by throughput (messages per second)"),
        table(["Topic", { label: "Now", cls: "num" }, "Last samples"], Object.entries(d.throughput.topics)
          .map(([name, pts]) => [name, pts, pts.length ? pts[pts.length - 1].v : 0])
          .sort((a, b) => b[2] - a[2] || a[0].localeCompare(b[0])).slice(0, 10)
          .map(([name, pts, now]) => h("tr", { testid: "busy-topic" }, h("td", {}, h("a", { href: `#/topics/${enc(name)}` }, name)),
            h("td", { class: "num" }, rate(now)), h("td", {}, sparkline(pts.slice(-40), 220, 28))) ),
        { empty: "No topics yet." })),
      h("div", { class: "panel" }, h("h2", {}, "Brokers"),
        table(["Id", "Host", "Port", "Role"], d.brokers.map((b) => h("tr", {},
          h("td", {}, b.id), h("td", { class: "mono" }, b.host), h("td", {}, b.port),
          h("td", {}, b.controller ? h("span", { class: "badge ok" }, "controller") : "")) ), { testid: "brokers" })));
  };
  await draw();
  every(5000, draw);
}

async function topicsList() {
  const root = view;
  let filter = new URLSearchParams(location.hash.split("?")[1] || "").get("q") || "";
  let rows = [];
  const tbody = h("tbody");
  const count = h("span", { class: "muted" });
  const fill = () => {
    const shown = rows.filter((t) => t.name.toLowerCase().includes(filter.toLowerCase()));
    count.textContent = `${shown.length} of ${rows.length} topics`;
    tbody.replaceChildren(...(shown.length ? shown.map((t) => h("tr", { testid: "topic-row" },
      h("td", {}, h("a", { href: `#/topics/${enc(t.name)}` }, t.name)),
      h("td", { class: "num" }, t.partitions), h("td", { class: "num" }, t.replication),
      h("td", {}, t.under_replicated ? h("span", { class: "badge warn" }, `${t.under_replicated} under-replicated`)
        : h("span", { class: "badge ok" }, "in sync")),
      h("td", {}, sparkline(t.throughput)))) : [h("tr", {}, h("td", { class: "empty", colspan: 5 }, "No topics match."))]));
  };
  const load = async () => {
    try { rows = await api("/topics"); fill(); } catch (e) { toast(e.message, true); }
  };
  const form = h("form", { class: "inline", testid: "create-topic", onsubmit: async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const configs = {};
    for (const line of String(f.get("configs") || "").split(/[\n,]/)) {
      const [k, ...rest] = line.split("=");
      if (k.trim()) configs[k.trim()] = rest.join("=").trim();
    }
    try {
      await api("/topics", { method: "POST", body: { name: f.get("name"), partitions: Number(f.get("partitions")),
        replication_factor: Number(f.get("replication")), configs } });
      toast(`Created topic ${f.get("name")}`);
      ev.target.reset();
      await load();
    } catch (e) { toast(e.message, true); }
  } },
    h("label", {}, "Name", h("input", { name: "name", required: true, placeholder: "orders", pattern: "[a-zA-Z0-9._\\-]+" })),
    h("label", {}, "Partitions", h("input", { name: "partitions", type: "number", min: 1, value: 1, style: "width:90px" })),
    h("label", {}, "Replication", h("input", { name: "replication", type: "number", min: -1, value: -1, style: "width:90px",
      title: "-1: the broker's default" })),
    h("label", {}, "Configs (k=v, comma separated)", h("input", { name: "configs", placeholder: "retention.ms=86400000" })),
    h("button", { type: "submit" }, "Create topic"));
  const search = h("input", { type: "search", class: "search", placeholder: "Search topics", value: filter, testid: "topic-search",
    oninput: (ev) => { filter = ev.target.value; fill(); } });
  root.replaceChildren(
    h("div", { class: "page-head" }, h("div", {}, h("h1", {}, "Topics"), count), search),
    h("div", { class: "panel" }, h("h2", {}, "Create a topic"), form),
    h("div", { class: "panel" }, h("table", { testid: "topics" },
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", { class: "num" }, "Partitions"),
        h("th", { class: "num" }, "Replication"), h("th", {}, "Replicas"), h("th", {}, "Messages / s"))), tbody)));
  await load();
  every(5000, load);
}

async function topicPage(name, tab) {
  const root = view;
  const base = `#/topics/${enc(name)}`;
  const tabs = h("div", { class: "tabs" },
    [["partitions", "Partitions"], ["messages", "Messages"], ["configs", "Configs"]].map(([k, label]) =>
      h("a", { href: `${base}/${k}`, class: k === tab ? "active" : "", testid: `tab-${k}` }, label)));
  const body = h("div");
  const del = h("button", { class: "danger", testid: "delete-topic", onclick: async () => {
    if (!confirm(`Delete topic ${name} and all its messages?`)) return;
    try { await api(`/topics/${enc(name)}`, { method: "DELETE" }); toast(`Deleted topic ${name}`); location.hash = "#/topics"; }
    catch (e) { toast(e.message, true); }
  } }, "Delete topic");
  const produceLink = h("a", { href: `#/produce?topic=${enc(name)}` }, "Produce a message");
  root.replaceChildren(
    h("div", { class: "page-head" },
      h("div", {}, h("div", { class: "muted" }, h("a", { href: "#/topics" }, "Topics"), " /"), h("h1", { testid: "topic-name" }, name)),
      h("div", { class: "controls" }, produceLink, del)),
    tabs, body);
  if (tab === "messages") return messageBrowser(name, body);
  if (tab === "configs") return topicConfigs(name, body);
  return topicPartitions(name, body);
}

async function topicPartitions(name, body) {
  const draw = async () => {
    let d;
    try { d = await api(`/topics/${enc(name)}`); } catch (e) { body.replaceChildren(errorBox(e)); return; }
    body.replaceChildren(
      h("div", { class: "cards" },
        h("div", { class: "card" }, h("div", { class: "label" }, "Partitions"), h("div", { class: "value" }, d.partitions.length)),
        h("div", { class: "card" }, h("div", { class: "label" }, "Messages retained"), h("div", { class: "value", testid: "topic-messages" }, num(d.messages))),
        h("div", { class: "card" }, h("div", { class: "label" }, "Messages / s"), sparkline(d.throughput, 160, 34))),
      h("div", { class: "panel" }, table(["Partition", "Leader", "Replicas", "ISR", { label: "Low", cls: "num" },
        { label: "High", cls: "num" }, { label: "Messages", cls: "num" }, { label: "Size", cls: "num" }, "Status"],
      d.partitions.map((p) => h("tr", { testid: "partition-row" },
        h("td", {}, p.partition), h("td", {}, p.leader < 0 ? h("span", { class: "badge bad" }, "none") : p.leader),
        h("td", { class: "mono" }, p.replicas.join(", ")), h("td", { class: "mono" }, p.isr.join(", ")),
        h("td", { class: "num" }, num(p.low)), h("td", { class: "num", testid: "partition-high" }, num(p.high)),
        h("td", { class: "num" }, num(Math.max(p.high - p.low, 0))),
        h("td", { class: "num", testid: "partition-size" }, p.size < 0 ? "–" : size(p.size)),
        h("td", {}, p.leader < 0 ? h("span", { class: "badge bad" }, "offline")
          : p.under_replicated ? h("span", { class: "badge warn" }, "under-replicated") : h("span", { class: "badge ok" }, "in sync")))),
      { testid: "partitions" })));
  };
  await draw();
  every(5000, draw);
}

async function topicConfigs(name, body) {
  try {
    const rows = await api(`/topics/${enc(name)}/configs`);
    const showAll = h("input", { type: "checkbox" });
    const tbl = h("div");
    const fill = () => tbl.replaceChildren(table(["Name", "Value", "Source"],
      rows.filter((c) => showAll.checked || !c.default).map((c) => h("tr", {},
        h("td", { class: "mono" }, c.name), h("td", { class: "mono" }, c.sensitive ? "(sensitive)" : c.value ?? "null"),
        h("td", {}, h("span", { class: c.default ? "badge" : "badge ok" }, c.source)))),
      { testid: "configs", empty: "Every config has its default value (tick the box to list them)." }));
    showAll.addEventListener("change", fill);
    fill();
    body.replaceChildren(h("div", { class: "panel" },
      h("label", { class: "check" }, showAll, "Show defaults too"), h("br"), tbl));
  } catch (e) { body.replaceChildren(errorBox(e)); }
}

async function messageBrowser(name, body) {
  let info;
  try { info = await api(`/topics/${enc(name)}`); } catch (e) { body.replaceChildren(errorBox(e)); return; }
  let records = [];
  let next = null;
  let tailing = null;
  const f = {
    partition: h("select", { name: "partition", testid: "mb-partition" }, h("option", { value: "" }, "All"),
      info.partitions.map((p) => h("option", { value: p.partition }, p.partition))),
    start: h("select", { name: "start", testid: "mb-start" }, [["end", "Newest"], ["beginning", "From beginning"],
      ["offset", "From offset"], ["timestamp", "From time"]].map(([v, l]) => h("option", { value: v }, l))),
    offset: h("input", { name: "offset", type: "number", min: 0, placeholder: "offset", style: "width:110px", testid: "mb-offset" }),
    timestamp: h("input", { name: "timestamp", type: "datetime-local", step: 1, testid: "mb-timestamp" }),
    limit: h("input", { name: "limit", type: "number", min: 1, max: 500, value: 50, style: "width:80px" }),
    key: h("input", { name: "key", type: "search", placeholder: "key contains", testid: "mb-key" }),
    value: h("input", { name: "value", type: "search", placeholder: "value contains", testid: "mb-value" }),
    format: h("select", { name: "format", testid: "mb-format" }, [["text", "Text"], ["json", "JSON"], ["hex", "Hex"]]
      .map(([v, l]) => h("option", { value: v }, l))),
    tail: h("input", { type: "checkbox", testid: "mb-tail" }),
  };
  const status = h("div", { class: "status-line", testid: "mb-status" });
  const tbody = h("tbody", { testid: "messages" });
  const showStartInputs = () => {
    f.offset.parentElement.hidden = f.start.value !== "offset";
    f.timestamp.parentElement.hidden = f.start.value !== "timestamp";
  };
  const query = (positions) => {
    const q = new URLSearchParams({ limit: f.limit.value || "50" });
    if (f.partition.value !== "") q.set("partition", f.partition.value);
    if (f.key.value) q.set("key", f.key.value);
    if (f.value.value) q.set("value", f.value.value);
    if (positions) {
      q.set("positions", Object.entries(positions).map(([p, o]) => `${p}:${o}`).join(","));
      return q;
    }
    q.set("start", f.start.value);
    if (f.start.value === "offset") q.set("offset", f.offset.value || "0");
    if (f.start.value === "timestamp" && f.timestamp.value) q.set("timestamp", String(new Date(f.timestamp.value).getTime()));
    return q;
  };
  const draw = () => {
    const mode = f.format.value;
    tbody.replaceChildren(...(records.length ? records.map((r) => h("tr", { testid: "message-row" },
      h("td", { class: "num" }, r.partition), h("td", { class: "num" }, r.offset),
      h("td", { style: "white-space:nowrap" }, time(r.timestamp)),
      h("td", { class: "msg-key", testid: "message-key" }, r.key === null ? h("span", { class: "muted" }, "null") : render(r.key, mode === "hex" ? "hex" : "text")),
      h("td", {}, h("pre", { class: "msg-value", testid: "message-value" }, render(r.value, mode))),
      h("td", { class: "mono" }, r.headers.map((x) => h("div", {}, `${x.key}: ${render(x.value, "text")}`)))))
      : [h("tr", {}, h("td", { class: "empty", colspan: 6 }, "No messages."))]));
  };
  const load = async () => {
    status.textContent = "Loading…";
    try {
      const d = await api(`/topics/${enc(name)}/messages?${query()}`);
      records = d.records;
      next = d.next;
      status.textContent = `${records.length} message(s), ${d.scanned} read${d.complete ? "" : " (stopped early)"}`;
      draw();
    } catch (e) { status.textContent = ""; toast(e.message, true); }
  };
  const tailOnce = async () => {
    if (!next) return;
    try {
      const d = await api(`/topics/${enc(name)}/messages?${query(next)}`);
      next = d.next;
      if (d.records.length) {
        const limit = Number(f.limit.value) || 50;
        records = records.concat(d.records).slice(-limit);
        draw();
      }
      status.textContent = `live: ${records.length} message(s) shown, last poll ${new Date().toLocaleTimeString()}`;
    } catch (e) { status.textContent = `live tail: ${e.message}`; }
  };
  f.start.addEventListener("change", showStartInputs);
  f.format.addEventListener("change", draw);
  f.tail.addEventListener("change", async () => {
    if (tailing) { clearInterval(tailing); tailing = null; }
    if (f.tail.checked) {
      if (!next) await load();
      tailing = setInterval(tailOnce, 1500);
      cleanups.push(() => clearInterval(tailing));
    }
  });
  const form = h("form", { class: "controls", testid: "message-browser", onsubmit: (ev) => { ev.preventDefault(); load(); } },
    h("label", {}, "Partition", f.partition), h("label", {}, "Start", f.start),
    h("label", {}, "Offset", f.offset), h("label", {}, "Time", f.timestamp), h("label", {}, "Limit", f.limit),
    h("label", {}, "Key filter", f.key), h("label", {}, "Value filter", f.value), h("label", {}, "Show as", f.format),
    h("button", { type: "submit", testid: "mb-load" }, "Load"), h("label", { class: "check" }, f.tail, "Live tail"));
  body.replaceChildren(h("div", { class: "panel" }, form, status),
    h("div", { class: "panel" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", { class: "num" }, "Partition"),
      h("th", { class: "num" }, "Offset"), h("th", {}, "Timestamp"), h("th", {}, "Key"), h("th", {}, "Value"),
      h("th", {}, "Headers"))), tbody)));
  showStartInputs();
  await load();
}

async function groupsList() {
  const root = view;
  const draw = async () => {
    let rows;
    try { rows = await api("/groups"); } catch (e) { root.replaceChildren(errorBox(e)); return; }
    root.replaceChildren(
      h("div", { class: "page-head" }, h("div", {}, h("h1", {}, "Consumer groups"), h("span", { class: "muted" }, `${rows.length} groups`))),
      h("div", { class: "panel" }, table(["Group", "Type", "State", { label: "Lag", cls: "num" }, "Lag over time"],
        rows.map((g) => h("tr", { testid: "group-row" }, h("td", {}, h("a", { href: `#/groups/${enc(g.group)}` }, g.group)),
          h("td", { testid: "group-type" }, g.type), h("td", {}, stateBadge(g.state)), h("td", { class: "num" }, num(g.lag)),
          h("td", {}, sparkline(g.lag_history)))),
        { testid: "groups", empty: "No consumer groups." })));
  };
  await draw();
  every(5000, draw);
}

function stateBadge(state) {
  const cls = { STABLE: "ok", EMPTY: "", DEAD: "bad", PREPARING_REBALANCING: "warn", COMPLETING_REBALANCING: "warn" }[state] ?? "";
  return h("span", { class: `badge ${cls}`, testid: "group-state" }, state.toLowerCase().replaceAll("_", " "));
}

async function groupPage(name) {
  const root = view;
  const resetForm = h("form", { class: "inline", testid: "reset-offsets", onsubmit: async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const to = f.get("to");
    if (!confirm(`Reset the offsets of ${name}${f.get("topic") ? ` on ${f.get("topic")}` : ""} to ${to === "offset" ? f.get("offset") : to}?`)) return;
    try {
      const d = await api(`/groups/${enc(name)}/reset`, { method: "POST", body: { topic: f.get("topic"), to, offset: f.get("offset") } });
      toast(`Reset ${d.reset.length} partition(s) of ${name}`);
      await draw();
    } catch (e) { toast(e.message, true); }
  } },
    h("label", {}, "Topic (empty: all of the group's)", h("input", { name: "topic", placeholder: "every topic" })),
    h("label", {}, "To", h("select", { name: "to", testid: "reset-to" }, h("option", { value: "earliest" }, "Earliest"),
      h("option", { value: "latest" }, "Latest"), h("option", { value: "offset" }, "Offset"))),
    h("label", {}, "Offset", h("input", { name: "offset", type: "number", min: 0, style: "width:110px" })),
    h("button", { type: "submit", testid: "reset-submit" }, "Reset offsets"));
  const resetPanel = h("div", { class: "panel" }, h("h2", {}, "Reset offsets"), resetForm,
    h("div", { class: "status-line", testid: "reset-note" }));
  const body = h("div");
  root.replaceChildren(
    h("div", { class: "page-head" }, h("div", {}, h("div", { class: "muted" }, h("a", { href: "#/groups" }, "Consumer groups"), " /"),
      h("h1", { testid: "group-name" }, name))), body, resetPanel);
  const draw = async () => {
    let d;
    try { d = await api(`/groups/${enc(name)}`); } catch (e) { body.replaceChildren(errorBox(e)); return; }
    if (d.type === "share") { resetPanel.hidden = true; body.replaceChildren(...sharePage(d)); return; }
    const active = d.members.length > 0;
    resetForm.querySelector("button").disabled = active;
    resetPanel.querySelector("[data-testid=reset-note]").textContent = active
      ? `The group has ${d.members.length} active member(s): Kafka only lets a group without members have its offsets reset.`
      : "The group has no members: its offsets can be reset.";
    const hist = d.lag_history;
    body.replaceChildren(
      groupCards(d, `assignor ${d.assignor || "–"}`),
      h("div", { class: "grid2" },
        h("div", { class: "panel" }, h("h2", {}, "Lag over time"), chart([{ name: "total", points: hist.total }], "lag-chart"),
          h("div", { class: "status-line" }, `sampled every ${d.sample_interval} s`)),
        membersPanel(d)),
      h("div", { class: "panel" }, h("h2", {}, "Partitions"), table(["Topic", "Partition", { label: "Committed", cls: "num" },
        { label: "End", cls: "num" }, { label: "Lag", cls: "num" }, "Lag over time", "Member"],
      d.partitions.map((p) => h("tr", { testid: "group-partition-row" },
        h("td", {}, h("a", { href: `#/topics/${enc(p.topic)}` }, p.topic)), h("td", {}, p.partition),
        h("td", { class: "num", testid: "committed" }, num(p.committed)), h("td", { class: "num" }, num(p.end)),
        h("td", { class: "num", testid: "lag" }, num(p.lag)),
        h("td", {}, sparkline(hist.partitions[`${p.topic}:${p.partition}`] || [])),
        h("td", { class: "mono" }, p.member || "–"))), { testid: "group-partitions", empty: "No committed offsets." })));
  };
  await draw();
  every(2000, draw);
}

// The cards at the top of a group's page (consumer or share group): `note` goes under the coordinator.
function groupCards(d, note) {
  return h("div", { class: "cards" },
    h("div", { class: "card" }, h("div", { class: "label" }, "State"), h("div", { class: "value" }, stateBadge(d.state))),
    h("div", { class: "card" }, h("div", { class: "label" }, "Members"), h("div", { class: "value", testid: "members-count" }, d.members.length)),
    h("div", { class: "card" }, h("div", { class: "label" }, "Total lag"), h("div", { class: "value", testid: "group-lag" }, num(d.lag))),
    h("div", { class: "card" }, h("div", { class: "label" }, "Coordinator"), h("div", { class: "mono" }, d.coordinator || "–"),
      h("div", { class: "muted" }, note)));
}

function membersPanel(d) {
  return h("div", { class: "panel" }, h("h2", {}, "Members"), table(["Member", "Client", "Host", "Assignment"],
    d.members.map((m) => h("tr", { testid: "member-row" }, h("td", { class: "mono" }, m.member_id), h("td", {}, m.client_id),
      h("td", { class: "mono" }, m.host), h("td", { class: "mono" }, m.assignment.map((a) => `${a.topic}:${a.partition}`).join(", ") || "–"))),
    { testid: "members", empty: "No active members." }));
}

// A share group (KIP-932) commits no offsets: per partition it has a start offset (everything below is
// acknowledged or archived) and a lag (records not finished yet), and members share partitions.
function sharePage(d) {
  return [
    groupCards(d, `share group, assignor ${d.assignor || "–"}`),
    membersPanel(d),
    h("div", { class: "panel" }, h("h2", {}, "Partitions"), table(["Topic", "Partition", { label: "Start offset", cls: "num" },
      { label: "Lag", cls: "num" }, "Members"],
    d.partitions.map((p) => h("tr", { testid: "group-partition-row" },
      h("td", {}, h("a", { href: `#/topics/${enc(p.topic)}` }, p.topic)), h("td", {}, p.partition),
      h("td", { class: "num", testid: "start-offset" }, num(p.start_offset)), h("td", { class: "num", testid: "lag" }, num(p.lag)),
      h("td", { class: "mono" }, p.member || "–"))), { testid: "group-partitions", empty: "No share state yet." }))];
}

async function producePage() {
  const root = view;
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  let topics = [];
  try { topics = await api("/topics"); } catch (e) { toast(e.message, true); }
  const topicSelect = h("select", { name: "topic", required: true, testid: "produce-topic" },
    topics.map((t) => h("option", { value: t.name, selected: t.name === params.get("topic") }, t.name)));
  const headers = h("div", { class: "headers-list" });
  const addHeader = () => headers.append(h("div", { class: "row" },
    h("input", { placeholder: "header name", class: "hk" }), h("input", { placeholder: "value", class: "hv" }),
    h("button", { type: "button", class: "secondary", onclick: (ev) => ev.target.parentElement.remove() }, "Remove")));
  const result = h("div", { class: "status-line", testid: "produce-result" });
  const form = h("form", { testid: "produce-form", onsubmit: async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const hs = [...headers.querySelectorAll(".row")].map((r) => [r.querySelector(".hk").value, r.querySelector(".hv").value])
      .filter(([k]) => k);
    try {
      const d = await api(`/topics/${enc(f.get("topic"))}/messages`, { method: "POST",
        body: { key: f.get("key"), value: f.get("value"), headers: hs, partition: f.get("partition") } });
      result.replaceChildren("Delivered to ", h("a", { href: `#/topics/${enc(d.topic)}/messages` }, d.topic),
        ` partition ${d.partition} at offset ${d.offset}`);
      toast(`Delivered at ${d.topic}[${d.partition}]@${d.offset}`);
    } catch (e) { result.textContent = ""; toast(e.message, true); }
  } },
    h("div", { class: "form-grid" },
      h("label", {}, "Topic", topicSelect),
      h("label", {}, "Partition (empty: the partitioner picks)", h("input", { name: "partition", type: "number", min: 0, testid: "produce-partition" })),
      h("label", { class: "wide" }, "Key (empty: none)", h("input", { name: "key", testid: "produce-key" })),
      h("label", { class: "wide" }, "Value", h("textarea", { name: "value", testid: "produce-value", placeholder: '{"hello": "world"}' })),
      h("div", { class: "wide" }, h("label", {}, "Headers"), headers,
        h("button", { type: "button", class: "secondary", onclick: addHeader, testid: "add-header", style: "margin-top:6px" }, "Add header"))),
    h("p", {}, h("button", { type: "submit", testid: "produce-submit" }, "Produce")), result);
  root.replaceChildren(h("div", { class: "page-head" }, h("h1", {}, "Produce a message")),
    h("div", { class: "panel" }, topics.length ? form : h("p", { class: "muted" }, "No topics yet: create one first.")));
}

// ---- routing ---------------------------------------------------------------------------------------

async function route() {
  for (const stop of cleanups) stop();
  cleanups = [];
  view = h("div");
  main.replaceChildren(view);
  const path = location.hash.replace(/^#/, "").split("?")[0] || "/";
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const section = parts[0] || "overview";
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.nav === section);
  document.body.dataset.page = section + (parts.length > 1 ? "-detail" : "");
  try {
    if (section === "topics" && parts[1]) await topicPage(parts[1], parts[2] || "partitions");
    else if (section === "topics") await topicsList();
    else if (section === "groups" && parts[1]) await groupPage(parts[1]);
    else if (section === "groups") await groupsList();
    else if (section === "produce") await producePage();
    else await overview();
  } catch (e) {
    view.replaceChildren(errorBox(e));
  }
}

window.addEventListener("hashchange", route);
api("/health").then((d) => { document.getElementById("cluster").textContent = d.bootstrap; }).catch(() => {});
route();
