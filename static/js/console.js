// Small behaviours htmx does not cover. Payloads are never inserted as HTML here.
(function () {
  "use strict";
  var KEY = "busconsole:autorefresh:" + location.pathname;

  // Used by hx-trigger="every 5s [autorefreshOn()]" on list pages.
  window.autorefreshOn = function () {
    var box = document.getElementById("autorefresh");
    return !!(box && box.checked && document.visibilityState === "visible");
  };

  // Used by hx-trigger="stream-changed[undisturbed('id')] from:body": a section refreshes itself after
  // an operator action only while nobody is working in it (boxes ticked, an entry expanded, typing).
  window.undisturbed = function (id) {
    var section = document.getElementById(id);
    if (!section) return false;
    if (section.querySelector("input:checked, details[open]")) return false;
    return !section.contains(document.activeElement) || document.activeElement === section;
  };

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("autorefresh");
    if (!box) return;
    box.checked = localStorage.getItem(KEY) === "1";
    box.addEventListener("change", function () {
      localStorage.setItem(KEY, box.checked ? "1" : "0");
    });
  });
})();
