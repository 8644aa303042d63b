// Small behaviours htmx does not cover. Payloads are never inserted as HTML here.
(function () {
  "use strict";
  var KEY = "busconsole:autorefresh:" + location.pathname;

  // Used by hx-trigger="every 5s [autorefreshOn()]" on list pages.
  window.autorefreshOn = function () {
    var box = document.getElementById("autorefresh");
    return !!(box && box.checked && document.visibilityState === "visible");
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
