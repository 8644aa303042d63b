// Annotation tooltips: a chart's markers ([data-annotation-text], templates/streams_app/_chart.html and the
// incident timeline) show their words beside them on hover and on keyboard focus. One tooltip element
// for the page, filled with textContent (an annotation's text is whatever its writer typed), placed
// through the CSSOM (the Content-Security-Policy allows no inline style attribute), and tied to the
// marker with aria-describedby while it shows. Escape hides it. Without script the marker's <title> is
// the browser's own tooltip, and the list under the charts says the same.
(function () {
  "use strict";
  var tip = null;
  var current = null;

  function tooltip() {
    if (!tip) {
      tip = document.createElement("div");
      tip.id = "annotation-tip";
      tip.className = "annotation-tip";
      tip.setAttribute("role", "tooltip");
      tip.hidden = true;
      document.body.appendChild(tip);
    }
    return tip;
  }

  function markerOf(node) {
    return node && node.closest ? node.closest("[data-annotation-text]") : null;
  }

  function show(marker) {
    var el = tooltip();
    current = marker;
    el.textContent = marker.getAttribute("data-annotation-text");
    el.hidden = false;
    marker.setAttribute("aria-describedby", el.id);
    var box = marker.getBoundingClientRect();
    var width = el.offsetWidth;
    var left = Math.max(4, Math.min(box.left + box.width / 2 - width / 2, document.documentElement.clientWidth - width - 4));
    el.style.left = left + window.scrollX + "px";
    el.style.top = box.top + window.scrollY - el.offsetHeight - 6 + "px";
  }

  function hide(marker) {
    if (!tip || (marker && marker !== current)) return;
    if (current) current.removeAttribute("aria-describedby");
    tip.hidden = true;
    current = null;
  }

  document.addEventListener("mouseover", function (event) {
    var marker = markerOf(event.target);
    if (marker && marker !== current) show(marker);
  });
  document.addEventListener("mouseout", function (event) {
    var marker = markerOf(event.target);
    if (marker && !marker.contains(event.relatedTarget)) hide(marker);
  });
  document.addEventListener("focusin", function (event) {
    var marker = markerOf(event.target);
    if (marker) show(marker);
  });
  document.addEventListener("focusout", function (event) {
    var marker = markerOf(event.target);
    if (marker) hide(marker);
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") hide(null);
  });
  // htmx swaps a chart panel for a fresh one after each snapshot: a tooltip of a marker that left goes too.
  document.addEventListener("htmx:afterSwap", function () {
    if (current && !document.body.contains(current)) hide(null);
  });
})();
