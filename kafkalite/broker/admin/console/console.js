// The kafkalite console: plain JavaScript on the admin API (/v1/), no build step, no dependencies.
//
// Every page is built with DOM calls: text goes in as text nodes (el() below), never as HTML, so
// record keys, values and headers, topic names, client ids (all chosen by clients) show as the
// characters they are. The server's Content-Security-Policy allows only this file's script anyway.
"use strict";

const SERIES = [
  { key: "bytes_in", label: "bytes in/s", color: "#2458d3" },
  { key: "bytes_out", label: "bytes out/s", color: "#1e7a3c" },
  { key: "records", label: "records/s", color: "#c2410c" },
];
const PLOT_POINTS = 120;
let timers = [];

// building the page ------------------------------------------------------------------------------
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function link(text, hash) {
  return el("a", { href: hash }, text);
}

function table(headers, rows, attributes) {
  const numeric = headers.map((header) => header.endsWith("#"));
  return el("table", attributes,
    el("thead", {}, el("tr", {}, headers.map((header, i) => el("th", { class: numeric[i] ? "num" : null },
      header.replace(/#$/, ""))))),
    el("tbody", {}, rows.map((row) => el("tr", {}, row.map((cell, i) => el("td", { class: numeric[i] ? "num" : null },
      cell === null || cell === undefined ? "–" : cell))))));
}

function show(...children) {
  const view = document.getElementById("view");
  view.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined));
}

function every(milliseconds, action) {
  action();
  timers.push(setInterval(action, milliseconds));
}

function bytes(count) {
  if (count === null || count === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = count, unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return (unit === 0 ? value : value.toFixed(1)) + " " + units[unit];
}

function when(milliseconds) {
  return milliseconds >= 0 ? new Date(milliseconds).toISOString().replace("T", " ").replace("Z", "") : "–";
}

// talking to the API -----------------------------------------------------------------------------
async function api(path, options) {
  const response = await fetch("/v1/" + path, options);
  const text = await response.text();
  const body = text ? JSON.parse(text) : null;
  if (!response.ok) throw new Error((body && body.error) || response.statusText);
  return body;
}

function failure(error) {
  return el("p", { class: "error", "data-testid": "error" }, String(error.message || error));
}

// record contents: text, pretty JSON, or binary shown as hex ---------------------------------------
function hexDump(base64, size) {
  const raw = atob(base64);
  const lines = [];
  for (let offset = 0; offset < raw.length && offset < 256; offset += 16) {
    const chunk = raw.slice(offset, offset + 16);
    const hex = Array.from(chunk, (c) => c.charCodeAt(0).toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(chunk, (c) => (c.charCodeAt(0) >= 32 && c.charCodeAt(0) < 127 ? c : ".")).join("");
    lines.push(offset.toString(16).padStart(6, "0") + "  " + hex.padEnd(48) + "  " + ascii);
  }
  if (size > 256) lines.push("… " + (size - 256) + " more bytes");
  return lines.join("\n");
}

function contents(value) {
  if (value === null) return el("span", { class: "muted" }, "null");
  const note = value.truncated ? el("span", { class: "muted" }, " (first 64 KiB of " + bytes(value.size) + ")") : null;
  if (value.text === null) {
    return el("div", { class: "binary" }, el("span", { class: "tag binary" }, "binary, " + value.size + " bytes"),
      note, el("pre", {}, hexDump(value.base64, value.size)));
  }
  if (value.json) {
    let pretty = value.text;
    try { pretty = JSON.stringify(JSON.parse(value.text), null, 2); } catch (ignored) { /* shown as it is */ }
    return el("div", { class: "json" }, el("span", { class: "tag json" }, "JSON"), el("pre", {}, pretty));
  }
  return el("div", { class: "text" }, el("pre", {}, value.text), note);
}

// pages --------------------------------------------------------------------------------------------
async function overviewPage() {
  const broker = await api("broker");
  const cards = el("div", { class: "cards" });
  const canvas = el("canvas", { class: "plot", width: 900, height: 260, "data-testid": "throughput" });
  const legend = el("div", { class: "legend" }, SERIES.map((series) => {
    const swatch = el("i");
    swatch.style.background = series.color;
    return el("span", {}, swatch, series.label);
  }));
  show(el("h1", {}, "Broker ", String(broker.node_id)),
    el("p", { class: "muted" }, "cluster ", broker.cluster_id, " · kafkalite ", broker.version, " · ",
      broker.storage, " storage · listeners ", broker.listeners.map((l) => l.name + "://" + l.host + ":" + l.port)
        .join(", ")),
    cards, el("h2", {}, "Throughput"), legend, canvas);
  const history = [];
  let previous = null;
  every(1000, async () => {
    let stats;
    try { stats = await api("stats"); } catch (error) { return; }
    if (previous !== null) {
      const seconds = Math.max(0.001, (stats.time_ms - previous.time_ms) / 1000);
      const point = {};
      for (const series of SERIES) point[series.key] = Math.max(0, (stats[series.key] - previous[series.key]) / seconds);
      history.push(point);
      if (history.length > PLOT_POINTS) history.shift();
    }
    previous = stats;
    cards.replaceChildren(...[
      ["requests", stats.requests.toLocaleString()], ["records", stats.records.toLocaleString()],
      ["bytes in", bytes(stats.bytes_in)], ["bytes out", bytes(stats.bytes_out)],
      ["connections", String(stats.connections)], ["event-loop lag", stats.event_loop_lag_ms.toFixed(1) + " ms"],
    ].map(([label, value]) => el("div", { class: "card" }, el("div", { class: "muted" }, label),
      el("div", { class: "value", "data-testid": "stat-" + label.replace(/ /g, "-") }, value))));
    plot(canvas, history);
  });
}

function plot(canvas, history) {
  const context = canvas.getContext("2d");
  const width = canvas.width, height = canvas.height, margin = 40;
  context.clearRect(0, 0, width, height);
  context.strokeStyle = "#dfe3ea";
  context.fillStyle = "#6b7384";
  context.font = "11px system-ui, sans-serif";
  let top = 1;
  for (const point of history) for (const series of SERIES) top = Math.max(top, point[series.key]);
  for (let line = 0; line <= 4; line += 1) {
    const y = height - margin / 2 - (height - margin) * line / 4;
    context.beginPath(); context.moveTo(margin, y); context.lineTo(width - 8, y); context.stroke();
    context.fillText(compact(top * line / 4), 2, y + 4);
  }
  const step = (width - margin - 8) / (PLOT_POINTS - 1);
  for (const series of SERIES) {
    context.strokeStyle = series.color;
    context.lineWidth = 2;
    context.beginPath();
    history.forEach((point, i) => {
      const x = margin + (PLOT_POINTS - history.length + i) * step;
      const y = height - margin / 2 - (height - margin) * point[series.key] / top;
      if (i === 0) context.moveTo(x, y); else context.lineTo(x, y);
    });
    context.stroke();
  }
  context.lineWidth = 1;
}

function compact(value) {
  if (value >= 1e9) return (value / 1e9).toFixed(1) + "G";
  if (value >= 1e6) return (value / 1e6).toFixed(1) + "M";
  if (value >= 1e3) return (value / 1e3).toFixed(1) + "k";
  return value.toFixed(value < 10 ? 1 : 0);
}

async function topicsPage() {
  const topics = await api("topics");
  show(el("h1", {}, "Topics"), table(["Topic", "Partitions#", "Records#", "Size#", "Internal"],
    topics.map((t) => [link(t.name, "#/topics/" + encodeURIComponent(t.name)), t.partitions, t.records.toLocaleString(),
      bytes(t.size_bytes), t.internal ? "yes" : ""]), { "data-testid": "topics" }));
}

async function topicPage(name) {
  const topic = await api("topics/" + encodeURIComponent(name));
  const partitions = table(["Partition#", "Log start#", "High watermark#", "Last stable#", "Segments#", "Size#",
    "Producers#"], topic.partition_details.map((p) => [p.partition, p.log_start_offset, p.high_watermark,
    p.last_stable_offset, p.segments, bytes(p.size_bytes), p.producers]), { "data-testid": "partitions" });
  const configs = Object.entries(topic.configs);
  const partition = el("select", { name: "partition" },
    topic.partition_details.map((p) => el("option", { value: p.partition }, String(p.partition))));
  const from = el("select", { name: "from" }, el("option", { value: "start" }, "log start"),
    el("option", { value: "offset" }, "offset"), el("option", { value: "timestamp" }, "time"),
    el("option", { value: "end" }, "latest"));
  const offset = el("input", { name: "offset", type: "number", min: 0, value: 0, size: 8 });
  const time = el("input", { name: "timestamp", type: "datetime-local", step: 1 });
  const limit = el("input", { name: "limit", type: "number", min: 1, max: 1000, value: 50, size: 5 });
  const results = el("div", { "data-testid": "records" });
  const browse = async (event) => {
    if (event) event.preventDefault();
    const chosen = topic.partition_details[Number(partition.value)];
    const query = new URLSearchParams({ limit: limit.value });
    if (from.value === "offset") query.set("offset", offset.value || "0");
    if (from.value === "end") query.set("offset", String(Math.max(0, chosen.high_watermark - Number(limit.value))));
    if (from.value === "timestamp" && time.value) query.set("timestamp", String(new Date(time.value).getTime()));
    try {
      const page = await api("topics/" + encodeURIComponent(name) + "/partitions/" + chosen.partition + "/records?" + query);
      results.replaceChildren(el("p", { class: "muted" }, page.records.length + " records from offset " + page.start_offset +
        " (high watermark " + page.high_watermark + ")"),
        table(["Offset#", "Timestamp", "Key", "Value", "Headers"], page.records.map((r) => [r.offset, when(r.timestamp),
          contents(r.key), contents(r.value),
          r.headers.length ? el("div", {}, r.headers.map((h) => el("div", {}, el("b", {}, h.key), ": ", contents(h.value))))
            : null]), { "data-testid": "record-table" }));
    } catch (error) {
      results.replaceChildren(failure(error));
    }
  };
  show(el("h1", {}, "Topic ", el("span", { "data-testid": "topic-name" }, topic.name)),
    el("p", { class: "muted" }, "id ", topic.topic_id, " · ", String(topic.partitions), " partitions · ",
      bytes(topic.size_bytes)),
    el("h2", {}, "Partitions"), partitions,
    configs.length ? [el("h2", {}, "Config overrides"), table(["Key", "Value"], configs)] : null,
    el("h2", {}, "Messages"),
    el("form", { class: "inline", onsubmit: browse, "data-testid": "browse" },
      el("label", {}, "partition", partition), el("label", {}, "from", from), el("label", {}, "offset", offset),
      el("label", {}, "time (local)", time), el("label", {}, "limit", limit),
      el("button", { class: "primary", type: "submit" }, "Show")),
    results);
  await browse();
}

async function groupsPage() {
  const groups = await api("groups");
  show(el("h1", {}, "Consumer groups"), groups.length === 0 ? el("p", { class: "muted" }, "No groups yet.") :
    table(["Group", "Type", "State", "Members#", "Lag#"], groups.map((g) => [
      link(g.group_id, "#/groups/" + encodeURIComponent(g.group_id)), g.type, g.state, g.members, g.lag]),
    { "data-testid": "groups" }));
}

async function groupPage(groupId) {
  const group = await api("groups/" + encodeURIComponent(groupId));
  show(el("h1", {}, "Group ", el("span", { "data-testid": "group-name" }, group.group_id)),
    el("p", {}, el("span", { class: "tag", "data-testid": "group-state" }, group.state), " ", group.type,
      " · protocol ", group.protocol || "–", " · generation ", String(group.generation), " · total lag ",
      group.lag === null ? "–" : String(group.lag)),
    el("h2", {}, "Members"),
    group.members.length === 0 ? el("p", { class: "muted" }, "No members.") :
      table(["Member", "Client id", "Host", "Assignment"], group.members.map((m) => [m.member_id, m.client_id, m.client_host,
        m.assignment.map((a) => a.topic + ": " + a.partitions.join(", ")).join("; ")]), { "data-testid": "members" }),
    el("h2", {}, "Offsets and lag"),
    table(["Topic", "Partition#", "Committed#", "High watermark#", "Lag#"], group.offsets.map((o) => [o.topic, o.partition,
      o.committed_offset, o.high_watermark, o.lag]), { "data-testid": "offsets" }));
}

async function connectionsPage() {
  const connections = await api("connections");
  show(el("h1", {}, "Connections"), table(["Id#", "Peer", "Client id", "Software", "Requests#", "In flight#", "APIs used"],
    connections.map((c) => [c.connection_id, c.peer, c.client_id,
      c.client_software_name ? c.client_software_name + " " + (c.client_software_version || "") : null,
      c.requests, c.in_flight,
      c.api_versions.map((a) => a.api + " v" + a.versions.join(",")).join(" · ")]), { "data-testid": "connections" }));
}

async function requestsPage() {
  const holder = el("div");
  show(el("h1", {}, "Recent requests"), holder);
  every(2000, async () => {
    const rows = await api("requests?limit=200");
    holder.replaceChildren(table(["Time", "Client id", "API", "Version#", "Latency ms#", "Error", "Fault"],
      rows.map((r) => [when(r.time_ms), r.client_id, r.api, r.api_version, r.latency_ms.toFixed(3),
        el("span", { class: r.error === "NONE" ? "ok" : "error" }, r.error), r.fault_id]), { "data-testid": "requests" }));
  });
}

const FAULT_FIELDS = [
  ["kind", "select", ["error", "disk_full", "latency", "stall", "drop_before", "drop_after", "leader_unavailable"]],
  ["api", "text", "Produce"], ["error", "text", "NOT_LEADER_OR_FOLLOWER"], ["count", "number", ""],
  ["probability", "number", ""], ["delay_ms", "number", ""], ["duration_ms", "number", "60000"],
  ["topic", "text", ""], ["partition", "number", ""], ["client_id", "text", ""],
];

async function faultsPage() {
  const listHolder = el("div", { "data-testid": "fault-list" });
  const message = el("p", { "data-testid": "fault-message" });
  const inputs = {};
  const fields = FAULT_FIELDS.map(([name, type, initial]) => {
    const input = type === "select" ? el("select", { name }, initial.map((kind) => el("option", { value: kind }, kind)))
      : el("input", { name, type, value: initial, size: type === "number" ? 7 : 18, step: name === "probability" ? "0.01" : null });
    inputs[name] = input;
    return el("label", {}, name, input);
  });
  const refresh = async () => {
    const faults = await api("faults");
    listHolder.replaceChildren(faults.length === 0 ? el("p", { class: "muted" }, "No faults in force.") :
      table(["Id#", "Kind", "API", "Error", "Delay ms#", "Target", "Remaining#", "Applied#", "Expires in", ""],
        faults.map((f) => [f.id, f.kind, f.api, f.error, f.delay_ms || null,
          [f.topic === null ? "" : f.topic + (f.partition === null ? "" : "-" + f.partition),
            f.client_id === null ? "" : "client " + f.client_id].filter(Boolean).join(", ") || "all",
          f.remaining === null ? "every" : f.remaining, f.applied, (f.expires_in_ms / 1000).toFixed(1) + " s",
          el("button", { type: "button", onclick: async () => { await api("faults/" + f.id, { method: "DELETE" }); refresh(); } },
            "Remove")])));
  };
  const inject = async (event) => {
    event.preventDefault();
    const body = {};
    for (const [name, type] of FAULT_FIELDS) {
      const value = inputs[name].value.trim();
      if (value === "") continue;
      body[name] = type === "number" ? Number(value) : value;
    }
    if (!["error"].includes(body.kind)) delete body.error;
    if (["leader_unavailable", "disk_full"].includes(body.kind)) delete body.api;
    try {
      const fault = await api("faults", { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body) });
      message.className = "ok";
      message.textContent = "Injected fault " + fault.id + ".";
    } catch (error) {
      message.className = "error";
      message.textContent = error.message;
    }
    refresh();
  };
  const clear = async () => {
    const answer = await api("faults", { method: "DELETE" });
    message.className = "ok";
    message.textContent = "Cleared " + answer.cleared + " faults.";
    refresh();
  };
  show(el("h1", {}, "Fault injection"),
    el("p", { class: "muted" }, "Every fault expires by itself (duration_ms, 60 s unless said)."),
    el("form", { class: "inline", onsubmit: inject, "data-testid": "fault-form" }, fields,
      el("button", { class: "primary", type: "submit" }, "Inject")),
    message, listHolder, el("button", { type: "button", onclick: clear, "data-testid": "clear-faults" }, "Clear all"));
  every(2000, refresh);
}

// routing ----------------------------------------------------------------------------------------
const ROUTES = [
  [/^#?\/?$/, "overview", overviewPage],
  [/^#\/topics$/, "topics", topicsPage],
  [/^#\/topics\/(.+)$/, "topics", topicPage],
  [/^#\/groups$/, "groups", groupsPage],
  [/^#\/groups\/(.+)$/, "groups", groupPage],
  [/^#\/connections$/, "connections", connectionsPage],
  [/^#\/requests$/, "requests", requestsPage],
  [/^#\/faults$/, "faults", faultsPage],
];

async function route() {
  timers.forEach(clearInterval);
  timers = [];
  const hash = location.hash || "#/";
  for (const [pattern, section, page] of ROUTES) {
    const match = hash.match(pattern);
    if (!match) continue;
    document.querySelectorAll("header nav a").forEach((a) => a.classList.toggle("active", a.dataset.nav === section));
    document.body.dataset.page = section;
    try {
      await page(...match.slice(1).map(decodeURIComponent));
    } catch (error) {
      show(failure(error));
    }
    document.body.dataset.ready = hash;
    return;
  }
  show(failure(new Error("no such page: " + hash)));
}

async function brokerLine() {
  try {
    const broker = await api("broker");
    document.getElementById("broker-line").textContent = "node " + broker.node_id + " · " + broker.topics + " topics · up " +
      Math.round(broker.uptime_s) + " s";
  } catch (ignored) { /* the page says what failed */ }
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => { route(); brokerLine(); });
