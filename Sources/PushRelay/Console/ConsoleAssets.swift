/// The console's stylesheet and script, served from the binary at `/console/static/…`.
///
/// The script only makes the live parts live: the Overview refreshes from `GET /v1/overview` and
/// `GET /ready` and draws its charts on a canvas; the Jobs page uploads a token file straight to
/// the bulk-unregister API (with the session's CSRF token) and follows its jobs' progress through
/// `GET /v1/admin/jobs`. Everything else is plain HTML forms.
enum ConsoleAssets {
    static let css = """
        :root { --fg: #1d2330; --muted: #5b6475; --bg: #f5f6f8; --card: #fff; --line: #dde1e8; --accent: #2458d6;
                --ok: #167c3a; --bad: #b3261e; --warn: #9a5b00; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
        * { box-sizing: border-box; }
        body { margin: 0; background: var(--bg); color: var(--fg); font-size: 15px; line-height: 1.45; }
        header.top { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1.5rem; padding: .6rem 1rem; background: #1d2330; color: #fff; }
        header.top a { color: #fff; text-decoration: none; }
        .brand { font-weight: 700; letter-spacing: .02em; }
        nav { display: flex; flex-wrap: wrap; gap: .25rem; }
        nav a { padding: .3rem .6rem; border-radius: 4px; }
        nav a[aria-current="page"], nav a:hover { background: rgba(255,255,255,.15); }
        .who { margin-left: auto; font-size: .85rem; color: #cfd5e2; display: flex; gap: .5rem; align-items: center; }
        main { max-width: 1100px; margin: 0 auto; padding: 1rem; }
        h1 { font-size: 1.5rem; margin: .5rem 0 1rem; }
        h2 { font-size: 1.15rem; margin: .2rem 0 .6rem; }
        h3 { font-size: .95rem; margin: .4rem 0; }
        .card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 1rem; margin-bottom: 1rem; }
        .card.narrow { max-width: 480px; margin: 2rem auto; }
        .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(200px, 1fr)); gap: 1rem; }
        dl { display: grid; grid-template-columns: auto 1fr; gap: .2rem 1rem; margin: 0; }
        dt { color: var(--muted); }
        dd { margin: 0; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
        form.search { display: flex; flex-wrap: wrap; gap: .6rem; align-items: flex-end; margin-bottom: 1rem; }
        form.inline { display: inline; margin: 0; }
        label { display: flex; flex-direction: column; gap: .2rem; font-size: .85rem; color: var(--muted); }
        label.grow { flex: 1 1 240px; }
        label.check { flex-direction: row; align-items: center; }
        input, select, button, .button { font: inherit; padding: .45rem .6rem; border: 1px solid var(--line); border-radius: 5px; background: #fff; color: var(--fg); }
        button, .button { background: var(--accent); border-color: var(--accent); color: #fff; cursor: pointer; text-decoration: none; display: inline-block; }
        button.link { background: none; border: none; color: #cfd5e2; text-decoration: underline; padding: 0; }
        .danger { background: var(--bad); border-color: var(--bad); color: #fff; }
        .flash { padding: .6rem .8rem; border-radius: 6px; background: #e8f0fe; }
        .flash.ok { background: #e6f4ea; color: var(--ok); }
        .flash.bad { background: #fce8e6; color: var(--bad); }
        .badge, .status { display: inline-block; padding: .05rem .45rem; border-radius: 10px; font-size: .8rem; background: #eceff4; }
        .badge.ok, .status.delivered, .status.succeeded { background: #e6f4ea; color: var(--ok); }
        .badge.bad, .status.failed, .status.dead_token, .status.expired { background: #fce8e6; color: var(--bad); }
        .status.pending, .status.sending, .status.queued, .status.running { background: #fef7e0; color: var(--warn); }
        .rates { display: flex; gap: 1.5rem; align-items: baseline; }
        .rates b { font-size: 1.4rem; }
        canvas.chart { width: 100%; height: 120px; display: block; margin: .5rem 0 .2rem; }
        .legend { font-size: .8rem; color: var(--muted); margin: 0 0 .6rem; }
        .key { display: inline-block; width: .8rem; height: .25rem; vertical-align: middle; margin-left: .5rem; }
        .key.webhooks { background: #2458d6; } .key.pushes { background: #167c3a; }
        .table-wrap { overflow-x: auto; }
        table { border-collapse: collapse; width: 100%; background: var(--card); }
        th, td { text-align: left; padding: .4rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { font-size: .8rem; color: var(--muted); font-weight: 600; }
        progress { width: 140px; }
        .delivery { border-top: 1px solid var(--line); padding-top: .5rem; margin-top: .5rem; }
        .delivery h3 { font-weight: 500; }
        ol.timeline { list-style: none; padding-left: 1rem; margin: .3rem 0; border-left: 2px solid var(--line); }
        ol.timeline li { position: relative; padding: .1rem 0 .1rem .6rem; }
        ol.timeline li::before { content: ""; position: absolute; left: -1.38rem; top: .55rem; width: .6rem; height: .6rem; border-radius: 50%; background: var(--line); }
        .when { color: var(--muted); font-size: .85rem; margin-right: .4rem; font-variant-numeric: tabular-nums; }
        code { font-size: .85em; overflow-wrap: anywhere; }
        .meta { color: var(--muted); }
        @media (max-width: 600px) { .who { margin-left: 0; width: 100%; } main { padding: .6rem; } th:nth-child(5), td:nth-child(5) { display: none; } }
        """

    static let javascript = """
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
        """
}
