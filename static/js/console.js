// Small behaviours htmx does not cover. Payloads are never inserted as HTML here.
//
// The Content-Security-Policy allows no inline script and no eval, so nothing here is called from an
// attribute: buttons carry data- attributes read by delegated listeners, and htmx sections listen for
// plain events raised here (htmx runs with allowEval off, so hx-trigger filters like [cond()] are out).
(function () {
  "use strict";
  var KEY = "busconsole:autorefresh:" + location.pathname;
  var AUTOREFRESH_MS = 5000;

  function autorefreshOn(box) {
    return box.checked && document.visibilityState === "visible";
  }

  // A section refreshes itself after an operator action only while nobody is working in it: no box
  // ticked, no entry expanded, no focus inside (typing).
  function undisturbed(section) {
    if (section.querySelector("input:checked, details[open]")) return false;
    return !section.contains(document.activeElement) || document.activeElement === section;
  }

  // List pages with the "Auto-refresh every 5 s" box: their sections have hx-trigger="autorefresh from:body".
  function startAutorefresh() {
    var box = document.getElementById("autorefresh");
    if (!box) return;
    box.checked = localStorage.getItem(KEY) === "1";
    box.addEventListener("change", function () {
      localStorage.setItem(KEY, box.checked ? "1" : "0");
    });
    setInterval(function () {
      if (autorefreshOn(box)) document.body.dispatchEvent(new CustomEvent("autorefresh"));
    }, AUTOREFRESH_MS);
  }

  // metrics.js raises "stream-changed" / "job-progress" on <body> when the stream on screen changed;
  // each [data-stream-live] section left undisturbed gets "stream-refresh" (its hx-trigger).
  function relayStreamEvents() {
    function relay() {
      var sections = document.querySelectorAll("[data-stream-live]");
      for (var i = 0; i < sections.length; i++) {
        if (undisturbed(sections[i])) sections[i].dispatchEvent(new CustomEvent("stream-refresh"));
      }
    }
    document.body.addEventListener("stream-changed", relay);
    document.body.addEventListener("job-progress", relay);
    // A refresh asked for before the operator ticked a box or opened an entry, answered after, is
    // dropped: swapping it in would clear the selection (and with it the pending list's sticky bar).
    document.body.addEventListener("htmx:beforeSwap", function (event) {
      var target = event.detail.target;
      if (target && target.hasAttribute("data-stream-live") && !undisturbed(target)) event.detail.shouldSwap = false;
    });
  }

  // <button data-confirm="Question?">: the click (and so the form's submission) goes ahead only if
  // the person confirms. Delegated, so buttons swapped in by htmx are covered too.
  function confirmButtons() {
    document.addEventListener("click", function (event) {
      var button = event.target.closest ? event.target.closest("[data-confirm]") : null;
      if (button && !window.confirm(button.getAttribute("data-confirm"))) {
        event.preventDefault();
        event.stopImmediatePropagation();
      }
    }, true);
  }

  // <button data-requires="BOX" data-requires-message="Why.">: pressed while the checkbox BOX is not
  // ticked, it posts nothing; [data-requires-error="BOX"] says why and the box gets the focus. The
  // button skips the browser's own checks (formnovalidate: the form's other button needs fields this one
  // does not), and a refusal from the server would cost a round trip; it keeps the selection too.
  function requiredBoxes() {
    document.addEventListener("click", function (event) {
      var button = event.target.closest ? event.target.closest("[data-requires]") : null;
      if (!button) return;
      var boxId = button.getAttribute("data-requires");
      var box = document.getElementById(boxId);
      if (!box || box.checked) return;
      event.preventDefault();
      event.stopImmediatePropagation();
      var errors = document.querySelectorAll('[data-requires-error="' + boxId + '"]');
      for (var i = 0; i < errors.length; i++) {
        errors[i].textContent = button.getAttribute("data-requires-message") || "Tick the box first.";
        errors[i].hidden = false;
      }
      box.focus();
    }, true);
    document.addEventListener("change", function (event) {
      var box = event.target;
      if (!box || box.type !== "checkbox" || !box.id || !box.checked) return;
      var errors = document.querySelectorAll('[data-requires-error="' + box.id + '"]');
      for (var i = 0; i < errors.length; i++) errors[i].hidden = true;
    });
  }

  // Row selection: <input data-select-all="FORM"> ticks or clears every row box of the form FORM
  // (input[name=ids] owned by it, through form="FORM"), and each [data-selection-count="FORM"] next
  // to the buttons says how many are ticked. The boxes are hidden until this runs: without script,
  // rows are ticked one by one. Synced again after htmx swaps a table in and when the page is shown
  // from the back/forward cache (the browser restores ticks without "change" events).
  function rowBoxes(formId) {
    var form = document.getElementById(formId);
    var out = [];
    if (!form) return out;
    for (var i = 0; i < form.elements.length; i++) {
      var el = form.elements[i];
      if (el.type === "checkbox" && el.name === "ids") out.push(el);
    }
    return out;
  }

  function selectionSync(formId) {
    var boxes = rowBoxes(formId);
    var ticked = 0;
    for (var i = 0; i < boxes.length; i++) if (boxes[i].checked) ticked++;
    var alls = document.querySelectorAll('[data-select-all="' + formId + '"]');
    for (var j = 0; j < alls.length; j++) {
      alls[j].hidden = boxes.length === 0;
      alls[j].checked = boxes.length > 0 && ticked === boxes.length;
      alls[j].indeterminate = ticked > 0 && ticked < boxes.length;
    }
    var labels = document.querySelectorAll('[data-selection-count="' + formId + '"]');
    for (var k = 0; k < labels.length; k++) {
      labels[k].textContent = boxes.length ? ticked + " selected" : "";
    }
  }

  function selectionSyncAll() {
    var seen = {};
    var marked = document.querySelectorAll("[data-select-all], [data-selection-count]");
    for (var i = 0; i < marked.length; i++) {
      var formId = marked[i].getAttribute("data-select-all") || marked[i].getAttribute("data-selection-count");
      if (!seen[formId]) {
        seen[formId] = true;
        selectionSync(formId);
      }
    }
  }

  // Ticking a row makes its selection bar stick to the top or bottom of the screen (style.css); a row
  // ticked at that edge would then sit under the bar it called up. The page scrolls just enough to
  // keep the row in sight, as a thumb near the bottom of a phone's screen would otherwise need to.
  function keepClearOfBars(box) {
    var row = box.closest("tr") || box;
    var bars = document.querySelectorAll(".selection-bar, .selection-actions, .entries-selection");
    for (var i = 0; i < bars.length; i++) {
      if (window.getComputedStyle(bars[i]).position !== "sticky") continue;
      var bar = bars[i].getBoundingClientRect();
      var rowBox = row.getBoundingClientRect();
      if (bar.height === 0 || rowBox.bottom <= bar.top || rowBox.top >= bar.bottom) continue;
      if (bar.top + bar.height / 2 > window.innerHeight / 2) {
        window.scrollBy(0, rowBox.bottom - bar.top + 8);
      } else {
        window.scrollBy(0, rowBox.top - bar.bottom - 8);
      }
    }
  }

  function rowSelection() {
    document.addEventListener("change", function (event) {
      var box = event.target;
      if (!box || box.type !== "checkbox") return;
      var formId = box.getAttribute("data-select-all");
      if (formId) {
        var boxes = rowBoxes(formId);
        for (var i = 0; i < boxes.length; i++) boxes[i].checked = box.checked;
        selectionSync(formId);
      } else if (box.name === "ids" && box.form && box.form.id) {
        selectionSync(box.form.id);
        if (box.checked) keepClearOfBars(box);
      }
    });
    document.addEventListener("htmx:afterSettle", selectionSyncAll);
    window.addEventListener("pageshow", selectionSyncAll);
  }

  confirmButtons();
  requiredBoxes();
  relayStreamEvents();
  rowSelection();
  function ready() {
    startAutorefresh();
    selectionSyncAll();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
