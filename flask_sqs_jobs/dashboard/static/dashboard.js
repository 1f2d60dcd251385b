/* flask-sqs-jobs dashboard: live queue counts and "select all". No dependencies.
   Text from the server is only ever set with textContent, never parsed as HTML. */
"use strict";

(function () {
  var REFRESH_MS = 5000;

  function refreshQueues() {
    // Only the counts change every few seconds: the charts are not read again.
    var url = new URL(window.location.href);
    url.searchParams.set("charts", "no");
    fetch(url.toString(), {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
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
    if (document.body.getAttribute("data-page") === "queues") {
      window.setInterval(refreshQueues, REFRESH_MS);
    }
  });
})();
