"use strict";
// The operator console: one page shell, a view per path, data from /console/api (JSON, SSE).
// DOM is built with h() (text nodes, never innerHTML) so no record content can inject markup.
(function () {
  const state = { me: null, source: null, timers: [] };
  const main = () => document.getElementById("main");

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "text") el.textContent = v;
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids.flat()) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }
  const svgNS = "http://www.w3.org/2000/svg";
  function s(tag, attrs, ...kids) {
    const el = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
    for (const kid of kids) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    return el;
  }

  function when(ms) {
    if (ms === null || ms === undefined || ms === 0) return h("span", { class: "muted" }, "never");
    const d = new Date(Number(ms));
    return h("time", { datetime: d.toISOString(), title: d.toISOString().replace("T", " ").replace("Z", " UTC") },
      d.toLocaleString());
  }
  const num = (x, d = 1) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));

  class ApiError extends Error { constructor(status, msg) { super(msg); this.status = status; } }
  async function api(method, path, body) {
    const opts = { method, credentials: "same-origin", headers: {} };
    if (body !== undefined) { opts.body = JSON.stringify(body); opts.headers["Content-Type"] = "application/json"; }
    if (method !== "GET" && state.me) opts.headers["X-CSRF-Token"] = state.me.csrf;
    const r = await fetch("/console/api" + path, opts);
    let data = null;
    try { data = await r.json(); } catch (e) { data = null; }
    if (!r.ok) {
      if (r.status === 401 && path !== "/login") { state.me = null; showLogin("Your session ended: log in again."); }
      throw new ApiError(r.status, (data && data.error) || r.statusText);
    }
    return data;
  }
  function banner(msg) {
    const b = document.getElementById("banner");
    b.textContent = msg || ""; b.hidden = !msg;
  }
  function errorState(err) {
    const down = err.status === 503 ? "Kafka is down or does not answer. " : "";
    return h("div", { class: "error-state", role: "alert" }, down + "Could not load: " + err.message);
  }
  const can = (cap) => state.me && state.me.capabilities.includes(cap);

  // --- charts ------------------------------------------------------------------------------
  function lineChart(series, label) {
    const W = 600, H = 140, P = 24;
    const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label });
    const all = series.flatMap((x) => x.points.map((p) => p[1]));
    const xs = series.flatMap((x) => x.points.map((p) => p[0]));
    if (!xs.length) { svg.append(s("text", { x: 10, y: 20, fill: "#5b6475" }, "no data yet")); return svg; }
    const max = Math.max(1, ...all), x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
    svg.append(s("text", { x: 4, y: 12, "font-size": 11, fill: "#5b6475" }, `${label} (max ${num(max)})`));
    const colors = ["#1f5fbf", "#1c7c3c", "#b3261e", "#9a6700", "#6b3fa0"];
    series.forEach((ser, i) => {
      const d = ser.points.map((p, j) => `${j ? "L" : "M"}${(P + (p[0] - x0) / (x1 - x0) * (W - 2 * P)).toFixed(1)},${(H - P - p[1] / max * (H - 2 * P)).toFixed(1)}`).join(" ");
      svg.append(s("path", { d, fill: "none", stroke: colors[i % colors.length], "stroke-width": 2 }));
      svg.append(s("text", { x: W - 140, y: 14 + 12 * i, "font-size": 11, fill: colors[i % colors.length] }, ser.name));
    });
    return svg;
  }
  function spark(points) {
    const svg = s("svg", { class: "spark", viewBox: "0 0 120 28", "aria-hidden": "true" });
    if (!points || points.length < 2) return svg;
    const vs = points.map((p) => p[1]), lo = Math.min(...vs), hi = Math.max(...vs, lo + 1e-9);
    const d = vs.map((v, i) => `${i ? "L" : "M"}${(i / (vs.length - 1) * 118 + 1).toFixed(1)},${(27 - (v - lo) / (hi - lo) * 26).toFixed(1)}`).join(" ");
    svg.append(s("path", { d, fill: "none", stroke: "#1f5fbf", "stroke-width": 1.5 }));
    return svg;
  }
  function table(head, rows, empty) {
    if (!rows.length) return h("div", { class: "empty" }, empty);
    return h("div", { class: "scroll" }, h("table", {},
      h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows)));
  }
  function card(label, value, id) {
    return h("div", { class: "card" }, h("div", { class: "label", id: id + "-label" }, label),
      h("div", { class: "value", id, "aria-labelledby": id + "-label" }, value));
  }

  // --- login -------------------------------------------------------------------------------
  function showLogin(note) {
    stopLive();
    document.getElementById("nav").hidden = true;
    document.getElementById("logout").hidden = true;
    document.getElementById("who").textContent = "";
    const msg = h("p", { id: "login-error", role: "alert", class: "down" }, note || "");
    const form = h("form", { id: "login-form" },
      h("h1", {}, "Log in"),
      h("label", { for: "login-name" }, "Account", h("input", { id: "login-name", name: "name", autocomplete: "username", required: true })),
      h("label", { for: "login-secret" }, "Secret", h("input", { id: "login-secret", name: "secret", type: "password", autocomplete: "current-password", required: true })),
      h("button", { id: "login-submit", type: "submit" }, "Log in"), msg);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      msg.textContent = "";
      try {
        state.me = await api("POST", "/login", { name: form.name.value, secret: form.secret.value });
        if (location.pathname.endsWith("/login")) history.replaceState(null, "", "/console/overview");
        start();
      } catch (err) { msg.textContent = err.status === 401 ? "Wrong account or secret." : "Login failed: " + err.message; }
    });
    main().replaceChildren(h("div", { class: "login" }, form));
    document.getElementById("login-name").focus();
  }

  // --- router ------------------------------------------------------------------------------
  function stopLive() {
    if (state.source) { state.source.close(); state.source = null; }
    state.timers.forEach(clearInterval); state.timers = [];
  }
  function go(path) { history.pushState(null, "", path); route(); }
  async function route() {
    stopLive(); banner("");
    const parts = location.pathname.replace(/^\/console\/?/, "").split("/").filter(Boolean);
    const page = parts[0] || "overview";
    document.querySelectorAll("nav a").forEach((a) => {
      a.hidden = a.dataset.cap ? !can(a.dataset.cap) : false;
      if (a.dataset.page === page || (page === "device" && a.dataset.page === "devices")) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    });
    const views = { overview, devices, device, commands, topics, "dead-letters": deadLetters, analytics, tenants };
    const view = views[page] || overview;
    const box = h("div", {});
    main().replaceChildren(box);
    try { await view(box, parts.slice(1).map(decodeURIComponent)); } catch (err) { box.replaceChildren(errorState(err)); }
  }
  async function start() {
    try { state.me = await api("GET", "/me"); } catch (err) { banner(err.message); return; }
    if (!state.me) return;
    document.getElementById("nav").hidden = false;
    document.getElementById("logout").hidden = false;
    document.getElementById("who").textContent = `${state.me.name} (${state.me.roles.join(", ")}${state.me.tenant ? ", tenant " + state.me.tenant : ""})`;
    route();
  }

  // --- overview ----------------------------------------------------------------------------
  async function overview(box) {
    const data = await api("GET", "/overview");
    const points = data.history.slice();
    const cards = h("div", { class: "cards", id: "overview-cards" });
    const services = h("div", { id: "services" });
    const charts = h("div", { class: "grid2", id: "charts" });
    const lag = h("div", { id: "lag" });
    const sites = h("div", { id: "sites" });
    box.append(h("h1", {}, "Overview"), h("p", { class: "muted", id: "live-note" }, "Live: updates every few seconds."),
      h("h2", {}, "Services"), services, h("h2", {}, "Edge sites"), sites, h("h2", {}, "Flow"), cards, charts,
      h("h2", {}, "Consumer lag"), lag);
    function draw(latest) {
      const p = points.length ? points[points.length - 1] : {};
      const up = p.up || {};
      const names = [...new Set([...data.services, "kafka", ...Object.keys(up)])];
      const full = p.disk_full || {};
      services.replaceChildren(h("div", { class: "cards" }, names.map((n) =>
        h("div", { class: "card", "data-service": n }, h("div", { class: "label" }, n),
          h("div", { class: "value " + (up[n] && !(n in full) ? "up" : "down") }, n in full ? "disk full" : up[n] ? "up" : "down")))),
        ...(Object.keys(full).length ? [h("div", { class: "error-state", role: "alert", id: "disk-full" },
          "Disk full: " + Object.entries(full).map(([n, free]) => `${n} (${num(free, 0)} bytes free)`).join(", ") +
          ". Kafka stops and the bridge acknowledges nothing until space returns; Mosquitto cannot save its store.")] : []));
      const dlqTotal = Object.values(p.dlq || {}).reduce((a, b) => a + b, 0);
      cards.replaceChildren(
        card("MQTT in, msgs/s", num(p.mqtt_in), "rate-mqtt-in"),
        card("HTTP in, msgs/s", num(p.http_in), "rate-http-in"),
        card("Kafka out, msgs/s", num(p.kafka_out), "rate-kafka-out"),
        card("Bridge pending", num(p.bridge_pending, 0), "bridge-pending"),
        card("Ack lag, ms", num(p.ack_lag_ms), "ack-lag"),
        card("Dead letters/s", num(dlqTotal, 2), "rate-dlq"),
        card("Commands succeeded/s", num((p.commands || {}).succeeded, 2), "cmd-ok"),
        card("Commands expired/s", num((p.commands || {}).expired, 2), "cmd-expired"));
      const t = (q) => q.at * 1000;
      const codes = [...new Set(points.flatMap((q) => Object.keys(q.dlq || {})))];
      charts.replaceChildren(
        lineChart([{ name: "MQTT in", points: points.map((q) => [t(q), q.mqtt_in || 0]) },
          { name: "HTTP in", points: points.map((q) => [t(q), q.http_in || 0]) },
          { name: "Kafka out", points: points.map((q) => [t(q), q.kafka_out || 0]) }], "messages/s, last minutes"),
        lineChart(codes.map((c) => ({ name: c, points: points.map((q) => [t(q), (q.dlq || {})[c] || 0]) })), "dead letters/s by code"));
      const l = latest || data.latest || {};
      const kafka = l.kafka || {};
      if (kafka.up === false) lag.replaceChildren(h("div", { class: "error-state", role: "alert" }, "Kafka is down: " + (kafka.error || "no answer")));
      else lag.replaceChildren(table(["group", "state", "lag"], (l.groups || []).map((g) =>
        h("tr", {}, h("td", {}, g.group), h("td", {}, g.state), h("td", {}, g.error ? `not read yet (${g.error})` : g.total_lag))), "No consumer groups."));
      if (!data.sites_watched) sites.replaceChildren(h("div", { class: "empty" }, "Edge sites are not watched (iot-api --console-sites-password-file)."));
      else if (l.sites_error) sites.replaceChildren(h("div", { class: "error-state", role: "alert" }, "Edge sites not read: " + l.sites_error));
      else sites.replaceChildren(table(["site", "tenant", "link", "last seen", "held messages"], (l.sites || []).map((x) =>
        h("tr", { "data-site": `${x.tenant}/${x.site}`, "data-link": x.link },
          h("td", {}, x.site), h("td", {}, x.tenant),
          h("td", { class: x.link === "up" ? "up" : x.link === "down" ? "down" : "muted" }, x.link),
          h("td", { class: "last-seen" }, x.last_seen_s === null ? "never" : `${num(x.last_seen_s, 0)} s ago`),
          h("td", { class: "held" }, x.held_messages ?? "–"))), "No edge site has reported yet."));
    }
    draw(data.latest);
    const src = new EventSource("/console/api/stream");
    state.source = src;
    src.addEventListener("overview", (ev) => {
      const latest = JSON.parse(ev.data);
      if (latest.point) { points.push(latest.point); if (points.length > 150) points.shift(); }
      draw(latest);
    });
  }

  // --- devices -----------------------------------------------------------------------------
  function secretNotice(user, secret) {
    return h("div", { class: "notice", role: "status", id: "secret-notice" },
      h("p", {}, "MQTT user name ", h("code", { id: "shown-username" }, user), " — secret (shown once, copy it now): "),
      h("p", {}, h("span", { class: "secret", id: "shown-secret" }, secret)));
  }
  async function devices(box) {
    const q = new URLSearchParams(location.search);
    let page = Number(q.get("page") || 1);
    const search = h("input", { id: "dev-search", type: "search", value: q.get("q") || "" });
    const stateSel = h("select", { id: "dev-state" }, ["", "online", "offline"].map((v) => h("option", { value: v }, v || "any")));
    stateSel.value = q.get("state") || "";
    const list = h("div", { id: "device-list" });
    const filter = h("form", { class: "row", role: "search" },
      h("label", { for: "dev-search" }, "Search device id", search),
      h("label", { for: "dev-state" }, "Presence", stateSel),
      h("button", { type: "submit" }, "Search"));
    filter.addEventListener("submit", (ev) => { ev.preventDefault(); page = 1; load(); });
    box.append(h("h1", {}, "Devices"), filter);
    if (can("manage_devices")) box.append(provisionForm());
    box.append(list);
    async function load() {
      try {
        const data = await api("GET", `/devices?q=${encodeURIComponent(search.value)}&state=${stateSel.value}&page=${page}&size=50`);
        const pages = Math.max(1, Math.ceil(data.total / data.size));
        const rows = data.rows.map((d) => h("tr", { "data-device": d.id },
          h("td", {}, h("a", { href: `/console/device/${encodeURIComponent(d.tenant)}/${encodeURIComponent(d.id)}`, "data-link": "1" }, d.id)),
          h("td", {}, d.tenant),
          h("td", {}, d.disabled ? h("span", { class: "down" }, "disabled") : d.online === null ? h("span", { class: "muted" }, "unknown") : h("span", { class: d.online ? "up" : "down" }, d.online ? "online" : "offline")),
          h("td", {}, when(d.last_seen)), h("td", {}, num(d.rate, 2)),
          h("td", {}, Object.entries(d.values || {}).slice(0, 3).map(([k, v]) => `${k}=${typeof v === "number" ? num(v, 2) : v}`).join(" ")),
          h("td", {}, spark(d.spark)), h("td", {}, d.groups.join(", "))));
        list.replaceChildren(
          h("p", { class: "muted", id: "device-count" }, `${data.total} devices, ${data.online} online`),
          table(["device", "tenant", "presence", "last seen", "msgs/s", "last values", "recent", "groups"], rows, "No devices match."),
          h("div", { class: "pager" },
            h("button", { type: "button", class: "secondary", disabled: page <= 1, onclick: () => { page--; load(); } }, "Previous"),
            h("span", {}, `page ${page} of ${pages}`),
            h("button", { type: "button", class: "secondary", disabled: page >= pages, onclick: () => { page++; load(); } }, "Next")));
      } catch (err) { list.replaceChildren(errorState(err)); }
    }
    await load();
    state.timers.push(setInterval(load, 5000));
  }
  function provisionForm() {
    const out = h("div", { id: "provision-result", "aria-live": "polite" });
    const form = h("form", { class: "row", id: "provision-form" },
      h("label", { for: "prov-id" }, "New device id", h("input", { id: "prov-id", required: true, pattern: "[A-Za-z0-9._-]+" })),
      state.me.tenant ? null : h("label", { for: "prov-tenant" }, "Tenant", h("input", { id: "prov-tenant", value: "default" })),
      h("label", { for: "prov-groups" }, "Groups (comma separated)", h("input", { id: "prov-groups" })),
      h("button", { type: "submit", id: "prov-submit" }, "Provision"));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        const t = document.getElementById("prov-tenant");
        const r = await api("POST", "/devices", { id: form.querySelector("#prov-id").value, tenant: t ? t.value : null, groups: form.querySelector("#prov-groups").value });
        out.replaceChildren(secretNotice(r.username, r.secret));
      } catch (err) { out.replaceChildren(errorState(err)); }
    });
    return h("section", { "aria-label": "Provision a device" }, h("h2", {}, "Provision"), form, out);
  }
  async function device(box, [tenant, id]) {
    const d = await api("GET", `/devices/${encodeURIComponent(tenant)}/${encodeURIComponent(id)}`);
    const out = h("div", { id: "device-action-result", "aria-live": "polite" });
    box.append(h("h1", {}, `Device ${d.id}`),
      h("p", {}, `tenant ${d.tenant} · `, d.disabled ? h("span", { class: "down" }, "disabled") : d.online ? h("span", { class: "up" }, "online") : h("span", { class: "down" }, d.online === null ? "presence unknown" : "offline"),
        " · last seen ", when(d.last_seen), ` · ${num(d.rate, 2)} msgs/s · groups: ${d.groups.join(", ") || "none"}`));
    if (can("manage_devices")) {
      const groupsIn = h("input", { id: "dev-groups-add" });
      box.append(h("div", { class: "row" },
        h("button", { type: "button", id: "dev-disable", class: "danger", onclick: async () => {
          try { await api("POST", `/devices/${encodeURIComponent(tenant)}/${encodeURIComponent(id)}/disable`, { disabled: !d.disabled }); route(); } catch (err) { out.replaceChildren(errorState(err)); } } }, d.disabled ? "Enable" : "Disable"),
        h("button", { type: "button", id: "dev-rotate", class: "secondary", onclick: async () => {
          try { const r = await api("POST", `/devices/${encodeURIComponent(tenant)}/${encodeURIComponent(id)}/rotate`, {}); out.replaceChildren(secretNotice(d.tenant === "default" ? d.id : `${d.tenant}/${d.id}`, r.secret)); } catch (err) { out.replaceChildren(errorState(err)); } } }, "Rotate secret"),
        h("label", { for: "dev-groups-add" }, "Add to group", groupsIn),
        h("button", { type: "button", class: "secondary", onclick: async () => {
          try { await api("POST", `/devices/${encodeURIComponent(tenant)}/${encodeURIComponent(id)}/groups`, { add: groupsIn.value }); route(); } catch (err) { out.replaceChildren(errorState(err)); } } }, "Add"),
        d.groups.map((g) => h("button", { type: "button", class: "secondary", onclick: async () => {
          await api("POST", `/devices/${encodeURIComponent(tenant)}/${encodeURIComponent(id)}/groups`, { remove: [g] }); route(); } }, `Leave ${g}`))), out);
    }
    const values = Object.entries(d.values || {});
    box.append(h("h2", {}, "Last values"), values.length ? h("table", { id: "last-values" }, h("tbody", {}, values.map(([k, v]) =>
      h("tr", {}, h("th", { scope: "row" }, k), h("td", { "data-metric": k }, String(v)))))) : h("div", { class: "empty", id: "last-values" }, "No telemetry seen yet."));
    const metricNames = [...new Set(d.points.flatMap((p) => Object.keys(p.metrics)))].slice(0, 4);
    if (metricNames.length) box.append(lineChart(metricNames.map((m) => ({ name: m, points: d.points.slice().reverse().filter((p) => typeof p.metrics[m] === "number").map((p) => [p.at, p.metrics[m]]) })), "recent telemetry"));
    box.append(h("h2", {}, "Recent telemetry"), table(["time", "metrics"], d.points.slice(0, 20).map((p) => h("tr", {}, h("td", {}, when(p.at)), h("td", {}, JSON.stringify(p.metrics)))), "No telemetry yet."));
    box.append(h("h2", {}, "Events"), table(["time", "event"], d.events.map((e) => h("tr", {}, h("td", {}, when(e.at)), h("td", {}, JSON.stringify(e)))), "No events."));
    box.append(h("h2", {}, "Commands"), commandTable(d.commands));
    if (can("view_dlq")) box.append(h("h2", {}, "Dead letters"), table(["received", "code", "detail"], d.dead_letters.map((x) => h("tr", {}, h("td", {}, when(x.received_at)), h("td", {}, x.code), h("td", {}, x.detail))), "No dead letters."));
  }

  // --- commands ----------------------------------------------------------------------------
  function scanNote(r) {  // where a search looked: memory, or how far back through Kafka
    if (r.source === "memory") return "";
    const back = r.oldest ? h("span", {}, " back to ", when(r.oldest)) : "";
    return h("span", {}, ` (searched ${r.scanned} records of ${r.source.replace("kafka:", "")}`, back,
      r.complete ? ", all of the range)" : "; older ones not searched: narrow the filter or the time)");
  }
  function commandTable(rows) {
    return table(["command", "target", "name", "state", "at", "reply"], rows.map((c) => h("tr", { "data-command": c.command_id },
      h("td", {}, h("code", {}, c.command_id.slice(0, 12))), h("td", {}, c.device_id || ""), h("td", {}, c.name || ""),
      h("td", { class: c.state === "succeeded" ? "up" : ["failed", "expired", "rejected"].includes(c.state) ? "down" : "" }, c.state || "sent to Kafka"),
      h("td", {}, when(c.at)), h("td", {}, c.replies.length ? JSON.stringify(c.replies[c.replies.length - 1]) : ""))), "No commands.");
  }
  async function commands(box) {
    box.append(h("h1", {}, "Commands"));
    const watch = h("div", { id: "cmd-watch", "aria-live": "polite" });
    if (can("send_commands")) {
      const kind = h("select", { id: "cmd-kind" }, h("option", { value: "device" }, "device"), state.me.tenant ? null : h("option", { value: "group" }, "group"));
      const form = h("form", { id: "cmd-form" },
        h("div", { class: "row" },
          h("label", { for: "cmd-kind" }, "Send to", kind),
          h("label", { for: "cmd-target" }, "Device id or group", h("input", { id: "cmd-target", required: true })),
          h("label", { for: "cmd-name" }, "Command", h("input", { id: "cmd-name", required: true, value: "reboot" })),
          h("label", { for: "cmd-timeout" }, "Timeout ms", h("input", { id: "cmd-timeout", type: "number", value: "10000", min: "100" }))),
        h("label", { for: "cmd-args" }, "Arguments (JSON object)", h("textarea", { id: "cmd-args" }, "{}")),
        h("div", { class: "row" }, h("button", { type: "submit", id: "cmd-send" }, "Send")));
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        let args;
        try { args = JSON.parse(form.querySelector("#cmd-args").value || "{}"); } catch (e) { watch.replaceChildren(h("div", { class: "error-state", role: "alert" }, "Arguments are not JSON.")); return; }
        try {
          const r = await api("POST", "/commands", { kind: kind.value, target: form.querySelector("#cmd-target").value, name: form.querySelector("#cmd-name").value, args, timeout_ms: Number(form.querySelector("#cmd-timeout").value) });
          follow(r.command_id);
        } catch (err) { watch.replaceChildren(errorState(err)); }
      });
      box.append(form);
    }
    function follow(cid) {
      const show = async () => {
        const c = await api("GET", `/commands/${cid}`);
        watch.replaceChildren(h("div", { class: "notice" },
          h("p", {}, "Command ", h("code", { id: "cmd-id" }, cid), ": ", h("strong", { id: "cmd-status", "data-state": c.state || "" }, c.state || "written, waiting for the command path")),
          h("ol", {}, (c.states || []).map((x) => h("li", {}, `${x.state} `, when(x.at), x.detail ? ` (${x.detail})` : ""))),
          c.replies && c.replies.length ? h("pre", { id: "cmd-reply" }, JSON.stringify(c.replies, null, 2)) : null));
        return c.state;
      };
      const timer = setInterval(async () => {
        try { const st = await show(); if (["succeeded", "failed", "expired", "rejected"].includes(st)) clearInterval(timer); } catch (e) { clearInterval(timer); }
      }, 700);
      state.timers.push(timer);
      show();
    }
    const filterTarget = h("input", { id: "hist-target" });
    const filterState = h("select", { id: "hist-state" }, ["", "accepted", "sent", "delivered", "succeeded", "failed", "expired", "rejected"].map((v) => h("option", { value: v }, v || "any")));
    const hist = h("div", { id: "cmd-history" });
    const hf = h("form", { class: "row" }, h("label", { for: "hist-target" }, "Target contains", filterTarget), h("label", { for: "hist-state" }, "State", filterState), h("button", { type: "submit" }, "Filter"));
    hf.addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
    box.append(watch, h("h2", {}, "History"), hf, hist);
    async function load() {
      try { const r = await api("GET", `/commands?target=${encodeURIComponent(filterTarget.value)}&state=${filterState.value}`); hist.replaceChildren(h("p", { class: "muted", id: "hist-note" }, `${r.rows.length} commands`, scanNote(r)), commandTable(r.rows)); } catch (err) { hist.replaceChildren(errorState(err)); }
    }
    await load();
    // live while unfiltered; a filtered search may read back through Kafka: on demand only
    state.timers.push(setInterval(() => { if (!filterTarget.value && !filterState.value) load(); }, 3000));
  }

  // --- topics ------------------------------------------------------------------------------
  async function topics(box) {
    const data = await api("GET", "/topics");
    const browse = h("div", { id: "records" });
    const topicSel = h("select", { id: "rec-topic" }, data.topics.map((t) => h("option", { value: t.name }, t.name)));
    const part = h("input", { id: "rec-partition", type: "number", min: "0" });
    const off = h("input", { id: "rec-offset", type: "number", min: "0" });
    const at = h("input", { id: "rec-time", type: "datetime-local" });
    const form = h("form", { class: "row" }, h("label", { for: "rec-topic" }, "Topic", topicSel), h("label", { for: "rec-partition" }, "Partition", part),
      h("label", { for: "rec-offset" }, "From offset", off), h("label", { for: "rec-time" }, "From time (your zone)", at), h("button", { type: "submit", id: "rec-load" }, "Show records"));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const p = new URLSearchParams();
      if (part.value !== "") p.set("partition", part.value);
      if (off.value !== "") p.set("offset", off.value);
      if (at.value) p.set("at", String(new Date(at.value).getTime()));
      try {
        const r = await api("GET", `/topics/${encodeURIComponent(topicSel.value)}/records?${p}`);
        browse.replaceChildren(table(["partition", "offset", "time", "key", "headers", "value"], r.records.map((x) => h("tr", {},
          h("td", {}, x.partition), h("td", {}, x.offset), h("td", {}, when(x.timestamp)), h("td", {}, x.key ?? ""),
          h("td", {}, h("pre", {}, JSON.stringify(x.headers, null, 1))), h("td", {}, h("pre", {}, x.value)))), "No records there."));
      } catch (err) { browse.replaceChildren(errorState(err)); }
    });
    box.append(h("h1", {}, "Topics"),
      table(["topic", "partitions", "records", "offsets (low–high per partition)"], data.topics.map((t) => h("tr", {},
        h("td", {}, t.name), h("td", {}, t.partitions.length), h("td", {}, t.records),
        h("td", {}, t.partitions.map((p) => `${p.partition}:${p.low}–${p.high}`).join("  ")))), "No topics."),
      h("h2", {}, "Consumer groups"),
      table(["group", "state", "lag per topic", "total lag"], data.groups.map((g) => h("tr", {}, h("td", {}, g.group), h("td", {}, g.state),
        h("td", {}, g.error ? `not read yet (${g.error})` : Object.entries(g.lag).map(([k, v]) => `${k}: ${v}`).join(", ")), h("td", {}, g.total_lag))), "No consumer groups."),
      h("h2", {}, "Browse records"), form, browse);
  }

  // --- dead letters ------------------------------------------------------------------------
  async function deadLetters(box) {
    const code = h("select", { id: "dlq-code" }, h("option", { value: "" }, "any"));
    const dev = h("input", { id: "dlq-device" });
    const since = h("input", { id: "dlq-since", type: "datetime-local", step: "1" });
    const until = h("input", { id: "dlq-until", type: "datetime-local", step: "1" });
    const status = h("select", { id: "dlq-status" }, ["", "new", "replayed", "discarded"].map((v) => h("option", { value: v }, v || "any")));
    const tenant = h("input", { id: "dlq-tenant", placeholder: "any" });
    const wide = !state.me.tenant;  // an appliance-wide account sees every tenant's letters
    const list = h("div", { id: "dlq-list" });
    const detail = h("div", { id: "dlq-detail", "aria-live": "polite" });
    const form = h("form", { class: "row" }, wide ? h("label", { for: "dlq-tenant" }, "Tenant", tenant) : null, h("label", { for: "dlq-code" }, "Error code", code), h("label", { for: "dlq-device" }, "Device", dev),
      h("label", { for: "dlq-since" }, "Since (your zone)", since), h("label", { for: "dlq-until" }, "Until (your zone)", until),
      h("label", { for: "dlq-status" }, "Status", status), h("button", { type: "submit", id: "dlq-filter" }, "Filter"));
    form.addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
    box.append(h("h1", {}, "Dead letters"), form, list, detail);
    function open(x) {
      const text = h("textarea", { id: "dlq-payload" }, x.payload);
      const out = h("div", { id: "dlq-result", role: "status" });
      const act = can("replay_dlq") ? h("div", { class: "row" },
        h("button", { type: "button", id: "dlq-replay", onclick: async () => {
          try { const r = await api("POST", `/dead-letters/${encodeURIComponent(x.ref)}/replay`, { payload: text.value }); out.textContent = `Replayed to ${r.topic} partition ${r.partition} offset ${r.offset}.`; load(); } catch (err) { out.replaceChildren(errorState(err)); } } }, "Replay fixed payload"),
        h("button", { type: "button", class: "danger", id: "dlq-discard", onclick: async () => {
          try { await api("POST", `/dead-letters/${encodeURIComponent(x.ref)}/discard`, {}); out.textContent = "Discarded."; load(); } catch (err) { out.replaceChildren(errorState(err)); } } }, "Discard")) : null;
      detail.replaceChildren(h("h2", {}, `Dead letter ${x.ref} (${x.code})`), h("p", {}, x.detail),
        h("h3", {}, "Headers"), h("pre", {}, JSON.stringify(x.headers, null, 2)),
        h("label", { for: "dlq-payload" }, can("replay_dlq") ? "Payload (fix it, then replay)" : "Payload", text), act, out);
      if (!can("replay_dlq")) text.setAttribute("readonly", "");
      text.focus();
    }
    async function load() {
      const p = new URLSearchParams({ code: code.value, device: dev.value, status: status.value });
      if (wide && tenant.value.trim()) p.set("tenant", tenant.value.trim());
      if (since.value) p.set("since", String(new Date(since.value).getTime()));
      if (until.value) p.set("until", String(new Date(until.value).getTime() + 999));
      try {
        const r = await api("GET", `/dead-letters?${p}`);
        const keep = code.value;
        code.replaceChildren(h("option", { value: "" }, "any"), ...Object.entries(r.codes).map(([c, n]) => h("option", { value: c }, `${c} (${n})`)));
        code.value = keep;
        list.replaceChildren(h("p", { class: "muted", id: "dlq-count" }, `${r.total} dead letters`, scanNote(r)), table(["received", ...(wide ? ["tenant"] : []), "device", "code", "MQTT topic", "status", ""], r.rows.map((x) => h("tr", { "data-ref": x.ref, "data-code": x.code, "data-tenant": x.tenant },
          h("td", {}, when(x.received_at)), wide ? h("td", { class: "tenant" }, x.tenant) : null, h("td", { class: "device" }, x.device ?? ""), h("td", {}, x.code), h("td", {}, x.mqtt_topic),
          h("td", {}, x.status + (x.by ? ` by ${x.by}` : "")), h("td", {}, h("button", { type: "button", class: "secondary", onclick: () => open(x) }, "Open")))), "No dead letters match."));
      } catch (err) { list.replaceChildren(errorState(err)); }
    }
    await load();
  }

  // --- analytics, tenants ------------------------------------------------------------------
  function rowsTable(t, empty) {
    if (t.missing) return h("div", { class: "empty" }, empty);
    return table(t.columns, t.rows.slice(0, 30).map((r) => h("tr", {}, r.map((v, i) => h("td", {}, t.columns[i].endsWith("_start") || t.columns[i].endsWith("_end") || t.columns[i].endsWith("_time") ? when(v) : v === null ? "" : typeof v === "number" ? String(Math.round(v * 1000) / 1000) : String(v))))), "No rows.");
  }
  async function analytics(box) {
    const d = await api("GET", "/analytics");
    box.append(h("h1", {}, "Analytics"),
      d.report ? h("p", {}, h("a", { href: d.report_url, id: "report-link" }, "Open the fleet report")) : h("p", { class: "muted", id: "report-link" }, "No fleet report yet (iot-analytics report --format html)."));
    const fm = d.fleet_minute;
    if (!fm.missing) {
      const i = fm.columns.indexOf("window_start"), m = fm.columns.indexOf("messages"), a = fm.columns.indexOf("active_devices");
      const rows = fm.rows.slice().reverse();
      box.append(lineChart([{ name: "messages/min", points: rows.map((r) => [r[i], r[m]]) }, { name: "active devices", points: rows.map((r) => [r[i], r[a]]) }], "fleet_minute"));
    }
    box.append(h("h2", {}, "fleet_minute"), rowsTable(fm, "No fleet_minute table yet: is the Spark job (iot-analytics stream) running?"),
      h("h2", {}, "Latest anomalies"), rowsTable(d.anomalies, "No anomalies table yet."));
  }
  async function tenants(box) {
    const d = await api("GET", "/tenants");
    const pct = (x) => (x === null || x === undefined ? "no quota" : `${Math.round(x * 100)} %`);
    const rows = () => d.tenants.map((t) => h("tr", { "data-tenant": t.id },
      h("td", {}, t.id), h("td", {}, t.disabled ? "disabled" : "enabled"), h("td", {}, t.device_count), h("td", {}, t.online),
      h("td", { class: "msgs-in" }, num(t.msgs_per_s, 2)),
      h("td", { class: "over-quota" }, num(t.over_quota_per_s, 2)),
      h("td", { class: "dlq-rate" }, Object.entries(t.dlq_per_s).map(([c, v]) => `${c} ${num(v, 2)}`).join(", ") || "0"),
      h("td", {}, t.quotas.devices ?? "unlimited"), h("td", {}, t.quotas.msgs_per_s ?? "unlimited"),
      h("td", { class: "quota-use" + (t.quota_use > 1 ? " down" : "") }, pct(t.quota_use)), h("td", {}, t.accounts)));
    const list = h("div", { id: "tenant-list" });
    const draw = () => list.replaceChildren(table(["tenant", "state", "devices", "online", "msgs/s in (bridges)", "over quota/s", "dead letters/s", "device quota", "msgs/s quota", "quota used", "accounts"], rows(), "No tenants."));
    box.append(h("h1", {}, "Tenants"), h("p", { class: "muted" }, "Rates from the bridges' per-tenant counters, mean of the last samples; refreshed every few seconds."), list);
    draw();
    state.timers.push(setInterval(async () => {
      try { Object.assign(d, await api("GET", "/tenants")); draw(); } catch (err) { list.replaceChildren(errorState(err)); }
    }, 3000));
  }

  // --- start -------------------------------------------------------------------------------
  document.addEventListener("click", (ev) => {
    const a = ev.target.closest("a");
    if (!a || !a.getAttribute("href") || !a.getAttribute("href").startsWith("/console/") || a.getAttribute("href").startsWith("/console/report")) return;
    if (ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
    ev.preventDefault(); go(a.getAttribute("href"));
  });
  window.addEventListener("popstate", route);
  document.addEventListener("DOMContentLoaded", () => {
    document.getElementById("logout").addEventListener("click", async () => {
      try { await api("POST", "/logout", {}); } catch (e) { /* gone already */ }
      state.me = null; history.pushState(null, "", "/console/login"); showLogin("Logged out.");
    });
    start().then(() => { if (!state.me) showLogin(""); });
  });
})();
