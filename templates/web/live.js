// Live updates: when the server says something changed, re-fetch this page's live part.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.EventSource || !live.hasAttribute("data-live")) return;
  var timer = null;
  function refresh() {
    var url = new URL(window.location.href);
    url.searchParams.set("partial", "1");
    url.searchParams.delete("n"); // a one-time notice is not part of the live view
    fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var ticked = Array.prototype.map.call(
          live.querySelectorAll("input[name=rid]:checked"), function (box) { return box.value; });
        live.innerHTML = html;
        live.querySelectorAll("input[name=rid]").forEach(function (box) {
          box.checked = ticked.indexOf(box.value) >= 0; // the queue's ticks survive a refresh
        });
        var state = live.querySelector("[data-status]");
        var actions = document.querySelector("[data-actions]");
        if (state && actions && state.getAttribute("data-status") !== "pending") {
          actions.hidden = true; // decided elsewhere: the buttons would only be refused
        }
        document.dispatchEvent(new CustomEvent("live:refreshed"));
      });
  }
  var source = new EventSource("/console/events");
  // A change made between this page's render and the stream's (re)connection sent no event.
  source.addEventListener("open", refresh);
  source.addEventListener("changed", function () {
    clearTimeout(timer);
    timer = setTimeout(refresh, 50);
  });
})();
