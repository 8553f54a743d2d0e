"use strict";
(function () {
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const page = document.body.dataset.page;

  async function getJSON(path) {
    const response = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (response.status === 401) { location.href = "/console/login?ended=1"; throw new Error("signed out"); }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) { throw new Error((body.error && body.error.message) || ("HTTP " + response.status)); }
    return body;
  }
  function field(object, path) {
    return path.split(".").reduce((value, key) => (value == null ? undefined : value[key]), object);
  }

  // Overview: numbers and charts from GET /v1/overview, readiness from GET /ready.
  function drawChart(canvas, minutes) {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth, height = canvas.clientHeight;
    canvas.width = width * ratio; canvas.height = height * ratio;
    const g = canvas.getContext("2d");
    g.scale(ratio, ratio);
    g.clearRect(0, 0, width, height);
    const series = [["webhooks", "#2458d6"], ["delivered", "#167c3a"]];
    const max = Math.max(1 / 60, ...minutes.map(m => Math.max(m.webhooks, m.delivered) / 60));
    const top = 14, bottom = height - 14;
    g.strokeStyle = "#dde1e8"; g.lineWidth = 1;
    g.beginPath(); g.moveTo(0, bottom + .5); g.lineTo(width, bottom + .5); g.stroke();
    g.fillStyle = "#5b6475"; g.font = "11px system-ui, sans-serif";
    g.fillText(max.toFixed(max < 10 ? 2 : 0) + "/s", 2, 10);
    g.fillText("60 min ago", 2, height - 2);
    g.fillText("now", width - 24, height - 2);
    for (const [name, color] of series) {
      g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
      minutes.forEach((m, i) => {
        const x = minutes.length > 1 ? (i * width) / (minutes.length - 1) : 0;
        const y = bottom - ((m[name] / 60) / max) * (bottom - top);
        if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
      });
      g.stroke();
    }
  }
  async function refreshOverview() {
    try {
      const ready = await fetch("/ready", { credentials: "same-origin" });
      const readiness = await ready.json().catch(() => ({}));
      const badge = document.getElementById("ready");
      badge.textContent = ready.ok ? "ready" : "not ready: " + ((readiness.error && readiness.error.message) || ready.status);
      badge.className = "badge " + (ready.ok ? "ok" : "bad");
      if (readiness.schema_version) document.getElementById("schema-version").textContent = readiness.schema_version;
      const overview = await getJSON("/v1/overview");
      document.getElementById("generated-at").textContent = overview.generated_at.replace("T", " ").replace("Z", " UTC");
      for (const app of overview.apps) {
        const section = document.querySelector('section.app[data-app="' + CSS.escape(app.app) + '"]');
        if (!section) { location.reload(); return; }
        const previous = app.minutes[app.minutes.length - 2] || { webhooks: 0, delivered: 0 };
        const rate = count => { const perSecond = count / 60; return perSecond.toFixed(perSecond < 10 ? 2 : 0); };
        const values = Object.assign({}, app, { rate: { webhooks: rate(previous.webhooks), pushes: rate(previous.delivered) } });
        section.querySelectorAll("[data-field]").forEach(element => {
          const value = field(values, element.dataset.field);
          if (value !== undefined) element.textContent = value;
        });
        drawChart(section.querySelector("canvas.chart"), app.minutes);
      }
      document.body.dataset.refreshed = String(Date.now());
    } catch (error) {
      console.warn("overview refresh failed", error);
    }
  }

  // Jobs: start one by uploading a file to the API; follow progress.
  function jobRate(job) {
    if (!job.started_at || !job.processed) return "–";
    const end = job.finished_at ? Date.parse(job.finished_at) : Date.now();
    const seconds = (end - Date.parse(job.started_at)) / 1000;
    // Under a second (or clocks a little apart) gives no meaningful rate.
    if (seconds < 1) return job.finished_at ? "done in under a second" : "–";
    return Math.round(job.processed / seconds).toLocaleString() + " tokens/s";
  }
  async function refreshJobs() {
    try {
      const list = await getJSON("/v1/admin/jobs?limit=20");
      for (const job of list.jobs) {
        const row = document.querySelector('tr[data-job="' + CSS.escape(job.id) + '"]');
        if (!row) { location.reload(); return; }
        row.dataset.status = job.status;
        const state = row.querySelector(".state .status");
        state.textContent = job.status; state.className = "status " + job.status;
        const bar = row.querySelector("progress");
        bar.max = Math.max(1, job.total); bar.value = job.processed;
        row.querySelector(".progress-text").textContent = job.processed + " / " + job.total;
        row.querySelector(".counts").textContent = "removed " + job.removed + " · not found " + job.not_found + " · failed " + job.failed + " · forwarded " + job.forwarded;
        row.querySelector(".rate").textContent = jobRate(job);
        if (job.status !== "queued" && job.status !== "running") { const cancel = row.querySelector("form"); if (cancel) cancel.remove(); }
      }
      document.body.dataset.refreshed = String(Date.now());
    } catch (error) {
      console.warn("jobs refresh failed", error);
    }
  }
  function setUpJobForm() {
    const form = document.getElementById("job-form");
    if (!form) return;
    form.addEventListener("submit", async event => {
      event.preventDefault();
      const message = document.getElementById("job-message");
      const file = document.getElementById("job-file").files[0];
      if (!file) { message.textContent = "Choose a file of tokens first."; return; }
      const app = document.getElementById("job-app").value;
      const propagate = document.getElementById("job-propagate").checked;
      const type = file.name.toLowerCase().endsWith(".csv") ? "text/csv" : "text/plain";
      message.textContent = "Uploading " + file.name + "…";
      const response = await fetch("/v1/admin/apps/" + encodeURIComponent(app) + "/devices/bulk-unregister?propagate_to_zendesk=" + propagate, {
        method: "POST", credentials: "same-origin", body: file, headers: { "Content-Type": type, "X-CSRF-Token": csrf },
      });
      const body = await response.json().catch(() => ({}));
      if (response.ok) {
        message.textContent = "Job " + body.job_id + " started with " + body.total + " tokens.";
        location.reload();
      } else {
        message.textContent = "Refused: " + ((body.error && body.error.message) || ("HTTP " + response.status));
      }
    });
  }

  if (page === "overview") { refreshOverview(); setInterval(refreshOverview, 5000); }
  if (page === "jobs" && document.getElementById("jobs")) { setUpJobForm(); refreshJobs(); setInterval(refreshJobs, 1500); }
})();
