/* flask-sqs-jobs dashboard: live queue counts, live job statuses and "select all".
   No dependencies.
   Text from the server is only ever set with textContent, never parsed as HTML. */
"use strict";

(function () {
  var REFRESH_MS = 5000;

  function getJSON(url) {
    // A page's own JSON answer (same origin, its session cookie), never cached.
    return fetch(url, {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    }).then(function (response) {
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      return response.json();
    });
  }

  function refreshQueues() {
    // Only the counts change every few seconds: the charts are not read again.
    var url = new URL(window.location.href);
    url.searchParams.set("charts", "no");
    getJSON(url.toString())
      .then(function (data) {
        var rows = document.querySelectorAll("tr[data-queue]");
        var byName = {};
        data.queues.forEach(function (q) { byName[q.queue] = q; });
        rows.forEach(function (row) {
          var q = byName[row.getAttribute("data-queue")];
          if (!q || q.error) { return; }
          ["visible", "in_flight", "delayed"].forEach(function (key) {
            var cell = row.querySelector('[data-field="' + key + '"]');
            if (cell) { cell.textContent = String(q[key]); }
          });
          var dlq = row.querySelector('[data-field="dead_letter"]');
          if (dlq && q.dead_letter) {
            var d = q.dead_letter;
            dlq.textContent = String(d.visible + d.in_flight + d.delayed);
          }
        });
        var stamp = document.querySelector('[data-field="generated_at"]');
        if (stamp) {
          stamp.textContent = String(data.generated_at).replace("T", " ").slice(0, 19) + " UTC";
        }
        document.body.classList.remove("stale");
      })
      .catch(function () { document.body.classList.add("stale"); });
  }

  function refreshJobs() {
    // The same search as JSON: each listed job's status and attempts change in place.
    getJSON(window.location.href)
      .then(function (data) {
        var byId = {};
        (data.jobs || []).forEach(function (job) { byId[job.job_id] = job; });
        document.querySelectorAll("tr[data-job-id]").forEach(function (row) {
          var job = byId[row.getAttribute("data-job-id")];
          if (!job) { return; }
          var status = row.querySelector('[data-field="status"]');
          if (status && status.textContent !== String(job.status)) {
            status.textContent = String(job.status);
            status.className = "status status-" + String(job.status);
          }
          var attempts = row.querySelector('[data-field="attempts"]');
          if (attempts) { attempts.textContent = String(job.attempts); }
        });
        document.body.classList.remove("stale");
      })
      .catch(function () { document.body.classList.add("stale"); });
  }

  function wireSelectAll() {
    document.querySelectorAll("input[data-select-all]").forEach(function (box) {
      box.addEventListener("change", function () {
        var form = box.closest("form");
        form.querySelectorAll('input[name="message_id"]').forEach(function (item) {
          item.checked = box.checked;
        });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    wireSelectAll();
    var page = document.body.getAttribute("data-page");
    if (page === "queues") {
      window.setInterval(refreshQueues, REFRESH_MS);
    }
    if (page === "jobs" && document.querySelector("tr[data-job-id]")) {
      window.setInterval(refreshJobs, REFRESH_MS);
    }
  });
})();
