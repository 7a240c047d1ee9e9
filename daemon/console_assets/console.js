// The cairn console's only script, served from the binary (the CSP allows
// no other). Pages work without it; it adds live relative times and checks a
// signal's JSON payload before the form is sent. It reads data from the
// page's attributes and writes text only (textContent), never markup.
"use strict";

(function () {
  function durationText(ms) {
    var s = Math.abs(ms) / 1000;
    if (s < 1) return Math.round(Math.abs(ms)) + " ms";
    if (s < 60) return s.toFixed(1) + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " min " + Math.floor(s % 60) + " s";
    var h = Math.floor(m / 60);
    if (h < 24) return h + " h " + (m % 60) + " min";
    return Math.floor(h / 24) + " d " + (h % 24) + " h";
  }

  // The server rendered "3 min ago" against database time; keep counting
  // from there with the browser's clock, whose offset is measured once.
  var serverNow = Number(document.body.getAttribute("data-now-ms"));
  var skew = serverNow ? Date.now() - serverNow : 0;
  function refreshTimes() {
    var now = Date.now() - skew;
    document.querySelectorAll("time[data-ms]").forEach(function (el) {
      var diff = now - Number(el.getAttribute("data-ms"));
      el.textContent = diff >= 0 ? durationText(diff) + " ago" : "in " + durationText(diff);
    });
  }
  setInterval(refreshTimes, 15000);

  // Signal payloads: JSON, checked as it is typed; the button waits for it.
  document.querySelectorAll("textarea[data-json]").forEach(function (area) {
    var form = area.form;
    var problem = form.querySelector(".json-problem");
    var button = form.querySelector("button[type=submit]");
    function check() {
      try {
        JSON.parse(area.value);
        problem.textContent = "";
        button.disabled = false;
        return true;
      } catch (e) {
        problem.textContent = "Not valid JSON: " + e.message;
        button.disabled = true;
        return false;
      }
    }
    area.addEventListener("input", check);
    form.addEventListener("submit", function (event) {
      if (!check()) event.preventDefault();
    });
    check();
  });
})();
