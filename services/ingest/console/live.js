// The console's one script (docs/console.md, "Live updates"): a run in flight follows its
// event stream (/console/runs/{id}/events, the same events as GET /v1/runs/{id}/events)
// and shows what happens as it happens; when the run ends the page reloads, so what stays is
// the server's page. Every page reads without it. Text goes in as text, never as markup.
(function () {
  "use strict";
  var list = document.querySelector("[data-live-events]");
  if (!list || !window.EventSource) {
    return;
  }
  var answer = document.querySelector("[data-live-answer]");
  var source = new EventSource(list.getAttribute("data-live-events"));
  var ends = ["run.completed", "run.failed", "run.cancelled"];
  var shown = ["run.queued", "run.running", "tool.started", "tool.completed", "run.stopping"];
  function add(text) {
    var item = document.createElement("li");
    item.textContent = new Date().toISOString().slice(11, 19) + " " + text;
    list.appendChild(item);
  }
  function read(e) {
    try {
      return JSON.parse(e.data);
    } catch (_) {
      return {};
    }
  }
  shown.forEach(function (name) {
    source.addEventListener(name, function (e) {
      var data = read(e);
      add(name + (data.name ? " " + data.name : ""));
    });
  });
  source.addEventListener("message.delta", function (e) {
    if (answer) {
      answer.textContent += read(e).delta || "";
    }
  });
  ends.forEach(function (name) {
    source.addEventListener(name, function () {
      add(name);
      source.close();
      window.location.reload();
    });
  });
})();
