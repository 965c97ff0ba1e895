// gpuscope serve --web: polls /snapshot (the JSON `gpuscope --json` prints)
// and draws it. Every string from the snapshot reaches the page through
// textContent, never as markup: a process names itself, and its name must
// not become script. The token lives in this tab's sessionStorage only
// (never localStorage, never a URL) and travels as the bearer header the
// exporter checks (src/serve/auth.rs).
"use strict";
(() => {
  const KEY = "gpuscope-token";
  const $ = (id) => document.getElementById(id);
  let period = 1000;
  let timer = 0;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // Binary units, as the dashboard shows them; null is n/a, never 0.
  function bytes(n) {
    if (none(n)) return "n/a";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = n, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return i === 0 ? v + " B" : v.toFixed(1) + " " + units[i];
  }
  const none = (v) => v === null || v === undefined;
  const pct = (v) => (none(v) ? "n/a" : Math.round(v) + " %");
  const or = (v, unit) => (none(v) ? "n/a" : v + (unit || ""));

  function status(text, bad) {
    const s = $("status");
    s.textContent = text;
    s.classList.toggle("bad", !!bad);
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, period);
  }

  function ask(why) {
    clearTimeout(timer);
    $("view").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = why;
    status("waiting for the token", false);
    $("token").focus();
  }

  async function poll() {
    const token = sessionStorage.getItem(KEY);
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token;
    let r;
    try {
      r = await fetch("snapshot", { headers, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" });
    } catch (e) {
      status("cannot reach gpuscope: " + e.message, true);
      return schedule();
    }
    if (r.status === 401) {
      sessionStorage.removeItem(KEY);
      return ask(token ? "That token was refused." : "");
    }
    if (!r.ok) {
      // 503 before the first collection: the server's own sentence.
      status((await r.text()).trim() || "HTTP " + r.status, true);
      return schedule();
    }
    let snap;
    try {
      snap = await r.json();
    } catch (e) {
      status("/snapshot is not JSON: " + e.message, true);
      return schedule();
    }
    // The server's --interval: asking faster would only see the same snapshot.
    period = Math.max(250, Number(snap.interval_ms) || 1000);
    render(snap);
    schedule();
  }

  function render(snap) {
    $("login").hidden = true;
    $("view").hidden = false;
    const host = snap.host || {};
    const drv = snap.driver || {};
    $("host").textContent = host.hostname || "";
    const about = $("about");
    about.replaceChildren();
    if (snap.simulated) about.append(el("span", "sim", "simulated GPUs (--demo): every figure is made up"), " · ");
    about.append("driver " + or(drv.driver_version) + " · CUDA " + or(drv.cuda_driver_version));
    const when = new Date(snap.time_unix_ms);
    // Which snapshot is on screen, for tests and for the curious.
    document.body.dataset.time = snap.time_unix_ms;
    status("updated " + when.toLocaleTimeString() + ", every " + period / 1000 + " s", false);
    document.title = "gpuscope " + (host.hostname || "");
    alerts(snap.alerts || []);
    $("gpus").replaceChildren(...(snap.gpus || []).map(gpu));
    processes(snap.processes || []);
  }

  function alerts(list) {
    $("alerts-section").hidden = list.length === 0;
    $("alerts").replaceChildren(...list.map((a) => {
      const li = el("li", a.severity === "critical" ? "critical" : "warning");
      li.append(el("span", "sev", a.severity), el("span", "msg", a.message));
      if (a.hint) li.append(el("p", "hint", a.hint));
      return li;
    }));
  }

  function fig(dl, label, value) {
    const d = el("div");
    d.append(el("dt", "", label), el("dd", "", value));
    dl.append(d);
  }

  function gpu(g) {
    const card = el("article", "gpu");
    card.dataset.gpu = g.index;
    const h = el("h3");
    h.append(el("span", "idx", g.index), el("span", "name", g.name || "name n/a"));
    card.append(h);
    if (g.state && g.state !== "ok") {
      h.append(el("span", "state", g.state));
      if (g.error) card.append(el("p", "crit", g.error));
      return card;
    }
    const dl = el("dl", "figs");
    const act = g.activity || {};
    fig(dl, "util", pct(g.utilization && g.utilization.gpu));
    fig(dl, "SM active", pct(act.sm_active));
    fig(dl, "mem util", pct(g.utilization && g.utilization.memory));
    fig(dl, "temp", or(g.temperature_c, " °C"));
    const watts = (w) => (none(w) ? "n/a" : Math.round(w));
    fig(dl, "power", watts(g.power_draw_w) + " / " + watts(g.power_limit_w) + " W");
    card.append(dl, memory(g));
    return card;
  }

  // The dashboard's bar (src/tui/render/bar.rs): allocated | cached |
  // other (overhead, processes without a probe, the driver's share) |
  // free; used | free without allocator figures.
  function memory(g) {
    const box = el("div", "memory");
    const m = g.memory || {};
    const total = m.total;
    if (none(total) || total === 0) {
      box.append(el("p", "na", "memory n/a"));
      return box;
    }
    const free = !none(m.free) ? m.free : none(m.used) ? null : Math.max(0, total - m.used);
    if (none(free)) {
      box.append(el("p", "na", "memory n/a"));
      return box;
    }
    const inUse = Math.max(0, total - free);
    let parts;
    const a = g.allocator;
    if (a) {
      const allocated = Math.min(a.allocated || 0, inUse);
      const cached = Math.min(a.cached || 0, inUse - allocated);
      parts = [["allocated", "alloc", allocated], ["cached", "cached", cached],
        ["other", "other", inUse - allocated - cached], ["free", "free", free]];
    } else {
      parts = [["in use", "other", inUse], ["free", "free", free]];
    }
    const bar = el("div", "bar");
    bar.setAttribute("role", "img");
    bar.setAttribute("aria-label", "memory: " + parts.map((p) => p[0] + " " + bytes(p[2])).join(", ") + " of " + bytes(total));
    const legend = el("ul", "legend");
    for (const [label, cls, value] of parts) {
      const seg = el("span", "seg " + cls);
      // CSSOM, not a style attribute: the Content-Security-Policy allows it.
      seg.style.width = (100 * value / total).toFixed(2) + "%";
      seg.title = label + " " + bytes(value);
      bar.append(seg);
      const li = el("li", "");
      li.dataset.part = label;
      li.append(el("span", "swatch " + cls), label + " " + bytes(value));
      legend.append(li);
    }
    let line = bytes(m.used) + " used of " + bytes(total);
    if (m.driver_reserved) line += ", " + bytes(m.driver_reserved) + " kept by the driver";
    box.append(bar, legend, el("p", "na", line));
    return box;
  }

  function cell(tr, value, cls) {
    const td = el("td", cls || "", none(value) ? "n/a" : value);
    if (none(value)) td.classList.add("na");
    tr.append(td);
  }

  function processes(list) {
    const rows = [];
    for (const p of list) {
      const devices = (p.allocator && p.allocator.devices) || [];
      for (const use of p.gpus || []) {
        const d = devices.find((x) => x.gpu === use.index && (none(x.mig_device) || x.mig_device === use.mig_device));
        const tr = el("tr", "proc");
        tr.dataset.pid = p.pid;
        cell(tr, p.pid, "num");
        cell(tr, none(use.mig_device) ? use.index : use.index + ":" + use.mig_device);
        cell(tr, p.user);
        cell(tr, p.name);
        cell(tr, none(use.used_memory) ? null : bytes(use.used_memory), "num");
        cell(tr, d ? bytes(d.allocated) : null, "num");
        cell(tr, d ? bytes(d.reserved) : null, "num");
        cell(tr, d && !none(d.fragmentation) ? pct(100 * d.fragmentation) : null, "num");
        cell(tr, d ? bytes(d.allocated_peak) : null, "num");
        const al = p.allocator;
        cell(tr, al && !none(al.rank) ? al.rank + "/" + or(al.world_size) : null);
        cell(tr, p.command, "wide mono");
        rows.push(tr);
      }
    }
    $("no-procs").hidden = rows.length > 0;
    $("procs").tBodies[0].replaceChildren(...rows);
  }

  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("token");
    const token = input.value.trim();
    input.value = "";
    // What the server accepts (src/serve/auth.rs); anything else could not
    // travel in a header.
    if (!/^[\x21-\x7e]+$/.test(token)) {
      $("login-error").textContent = "A token is visible ASCII, without spaces.";
      return;
    }
    sessionStorage.setItem(KEY, token);
    $("login").hidden = true;
    status("connecting…", false);
    poll();
  });

  poll();
})();
