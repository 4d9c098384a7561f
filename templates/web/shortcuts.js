// Keyboard shortcuts (press ?) on the queue and a request's page, and the queue's ticks for
// its bulk answer. Nothing here decides by itself: a key presses the page's own buttons.
(function () {
  "use strict";
  var overlay = document.getElementById("shortcuts");
  var bulk = document.getElementById("bulk");
  var actions = document.querySelector("[data-actions]");
  var allBox = document.querySelector("[data-select-all]");
  var onRequestPage = /^\/console\/requests\/[^/]+$/.test(window.location.pathname);
  var selected = null; // the data-rid of the queue's selected row

  var NOT_TYPED = ["checkbox", "radio", "button", "submit", "reset"];

  function typing(target) {
    if (!target || !target.closest) return false;
    if (target.closest("textarea, select, [contenteditable]")) return true;
    var input = target.closest("input");
    return !!input && NOT_TYPED.indexOf(input.type) < 0; // a ticked box is no typing
  }

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("#live tr[data-rid]"));
  }

  function boxes() {
    return Array.prototype.slice.call(document.querySelectorAll("#live input[name=rid]"));
  }

  function boxOf(row) {
    return row ? row.querySelector("input[name=rid]") : null;
  }

  function selectedRow() {
    return rows().filter(function (row) { return row.getAttribute("data-rid") === selected; })[0];
  }

  function mark() {
    rows().forEach(function (row) {
      var on = row.getAttribute("data-rid") === selected;
      row.classList.toggle("selected", on);
      if (on) row.setAttribute("aria-current", "true"); else row.removeAttribute("aria-current");
    });
  }

  function move(step) {
    var all = rows();
    if (!all.length) return;
    var at = all.indexOf(selectedRow());
    if (at < 0) at = step > 0 ? 0 : all.length - 1;
    else at = Math.min(Math.max(at + step, 0), all.length - 1);
    selected = all[at].getAttribute("data-rid");
    mark();
    all[at].scrollIntoView({ block: "nearest" });
  }

  // With nothing ticked, a and r act on the selected row.
  function ticked() {
    var any = boxes().some(function (box) { return box.checked; });
    if (!any && !(allBox && allBox.checked)) {
      var box = boxOf(selectedRow());
      if (!box) return false;
      box.checked = true;
    }
    return true;
  }

  function press(container, value) {
    var button = container && container.querySelector('button[name=action][value="' + value + '"]');
    if (button) button.click();
  }

  function onQueue(key, event) {
    if (key === "j") move(1);
    else if (key === "k") move(-1);
    else if (key === "x") { var box = boxOf(selectedRow()); if (box) box.checked = !box.checked; }
    else if (key === "Enter" && event.target === document.body && selectedRow()) {
      window.location.href = selectedRow().querySelector("a").href;
    }
    else if (key === "a") { if (ticked()) press(bulk, "approve"); }
    else if (key === "r") { if (ticked()) bulk.querySelector("[data-bulk-reason]").focus(); }
    else return false;
    return true;
  }

  function onRequest(key) {
    if ((key === "j" || key === "k") && onRequestPage) {
      window.location.href = window.location.pathname + "/neighbour?step=" + (key === "j" ? 1 : -1);
      return true;
    }
    if (!actions || actions.hidden) return false; // decided: nothing to answer
    if (key === "a") press(actions, "approve");
    else if (key === "r") {
      var reason = actions.querySelector("textarea[name=reason]");
      if (!reason) return false;
      reason.focus();
    }
    else return false;
    return true;
  }

  function toggle(show) {
    if (overlay) overlay.hidden = !show;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    if (typing(event.target)) return;
    var key = event.key;
    var open = overlay && !overlay.hidden;
    var handled = true;
    if (key === "?") toggle(!open);
    else if (key === "Escape" && open) toggle(false);
    else if (open) handled = false;
    else if (bulk) handled = onQueue(key, event);
    else handled = onRequest(key);
    if (handled) event.preventDefault(); // r must not type an "r" into the field it focused
  });

  if (overlay) {
    overlay.addEventListener("click", function (event) {
      if (event.target === overlay) toggle(false);
    });
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.matches("[data-check-page], [data-select-all]")) {
      boxes().forEach(function (box) { box.checked = target.checked; });
    }
  });

  // The live queue re-renders its rows: keep the selection, and "all matching" ticks new ones.
  document.addEventListener("live:refreshed", function () {
    mark();
    if (allBox && allBox.checked) boxes().forEach(function (box) { box.checked = true; });
  });
})();
