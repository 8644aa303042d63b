// Copy buttons: <button data-copy="element-id" hidden> copies that element's text to the clipboard.
// The buttons start hidden and this script shows them, so a page without it shows no dead buttons.
// navigator.clipboard needs a secure context (https or localhost); elsewhere a selected textarea and
// document.execCommand("copy") do it. Delegated, so buttons swapped in by htmx work too. No inline
// handlers (CSP) and the text is only ever read with textContent.
(function () {
  "use strict";

  function showButtons(root) {
    root.querySelectorAll("button[data-copy]").forEach(function (button) { button.hidden = false; });
  }

  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    // CSSOM, not a style attribute: the policy allows it, and the page neither scrolls nor flashes.
    area.style.position = "fixed";
    area.style.top = "0";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () { return fallbackCopy(text); });
    }
    return fallbackCopy(text);
  }

  function say(button, label) {
    if (!button.dataset.label) { button.dataset.label = button.textContent; }
    button.textContent = label;
    button.setAttribute("data-copied", label === "Copied" ? "yes" : "no");
    window.setTimeout(function () { button.textContent = button.dataset.label; }, 1500);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-copy]") : null;
    if (!button) { return; }
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) { return; }
    event.preventDefault();
    copyText(source.textContent).then(
      function () { say(button, "Copied"); },
      function () { say(button, "Copy failed"); }
    );
  });

  document.addEventListener("htmx:afterSwap", function (event) { showButtons(event.target); });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { showButtons(document); });
  } else {
    showButtons(document);
  }
})();
