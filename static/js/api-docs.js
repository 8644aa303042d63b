// Starts Swagger UI on the API reference page (/api/v1/docs/). A static file rather than an inline
// script, so the page works under a Content-Security-Policy without 'unsafe-inline' or eval.
(function () {
  "use strict";

  function start() {
    var root = document.getElementById("api-docs");
    if (!root || typeof window.SwaggerUIBundle !== "function") return;
    var csrfToken = root.getAttribute("data-csrf-token") || "";
    window.SwaggerUIBundle({
      url: root.getAttribute("data-spec-url"),
      domNode: root,
      deepLinking: true,
      tryItOutEnabled: false,
      // "Try it out" from this page sends the session cookie; its POSTs need the CSRF token too
      // (calls authorised with a bearer token do not).
      requestInterceptor: function (request) {
        var method = (request.method || "GET").toUpperCase();
        var headers = request.headers || {};
        if (method !== "GET" && method !== "HEAD" && !headers.Authorization && csrfToken) {
          headers["X-CSRFToken"] = csrfToken;
        }
        request.headers = headers;
        return request;
      },
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
