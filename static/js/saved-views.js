// Saved views and permalinks: what is on screen stays in the address bar.
//
// 1. The "Save view" form (templates/streams_app/_save_view.html) saves the browser's own address:
//    pages such as the tail move their position in the URL after loading, and the address keeps a
//    binary key's percent-encoding exactly. The hidden field, filled by the server, is the fallback.
// 2. The chart panels' time window ("window") and the overview's "include the bus's own streams"
//    ("internal") are switched by htmx without a page load; the page reads both from its query string,
//    so each switch is written into the address (history.replaceState) and a reload, a shared link or
//    a saved view shows the same window. Other parameters of the page (filters, position) are kept.
(function () {
  "use strict";

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches || !form.matches("form[data-save-view]")) return;
    var field = form.querySelector("input[name=url]");
    if (field) field.value = location.pathname + location.search;
  }, true);

  var PANEL_PARAMS = ["window", "internal"];

  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest(".chart-panel a[hx-get]") : null;
    if (!link) return;
    var href = link.getAttribute("href") || "";
    if (href.charAt(0) !== "?") return;
    var chosen = new URLSearchParams(href.slice(1));
    var params = new URLSearchParams(location.search);
    PANEL_PARAMS.forEach(function (name) {
      if (chosen.has(name)) params.set(name, chosen.get(name));
      else params.delete(name);
    });
    var query = params.toString();
    history.replaceState(history.state, "", location.pathname + (query ? "?" + query : "") + location.hash);
  });
})();
