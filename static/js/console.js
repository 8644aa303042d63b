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

  confirmButtons();
  relayStreamEvents();
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", startAutorefresh);
  } else {
    startAutorefresh();
  }
})();
