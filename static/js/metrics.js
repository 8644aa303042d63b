// Live chart refresh. Pages holding [data-metrics-live] panels open one websocket (/ws/metrics/) that
// relays each committed metric snapshot; this raises the "metrics-snapshot" event on <body>, which the
// panels' hx-trigger="metrics-snapshot from:body" answers by fetching themselves again. Pages about one
// stream also get its operator actions and job progress, raised as "stream-changed" / "job-progress". While the socket
// is not open, the same event is raised every 10 s instead (polling fallback). Hidden tabs do not refresh.
(function () {
  "use strict";
  var POLL_MS = 10000;
  var retryMs = 1000;
  var pollTimer = null;
  var socket = null;

  function hasPanels() {
    return !!document.querySelector("[data-metrics-live], [data-stream-live]");
  }

  // A page about one stream names it: <span data-stream-events="conn=...&key=..."> (key percent-encoded).
  function streamQuery() {
    var marker = document.querySelector("[data-stream-events]");
    return marker ? "?" + marker.getAttribute("data-stream-events") : "";
  }

  function fire() {
    if (document.visibilityState === "visible" && hasPanels()) {
      document.body.dispatchEvent(new CustomEvent("metrics-snapshot"));
    }
  }

  function startPolling() {
    if (!pollTimer) pollTimer = setInterval(fire, POLL_MS);
  }

  function stopPolling() {
    if (pollTimer) {
      clearInterval(pollTimer);
      pollTimer = null;
    }
  }

  function connect() {
    if (!("WebSocket" in window)) return;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + "/ws/metrics/" + streamQuery());
    socket.onopen = function () {
      retryMs = 1000;
      stopPolling();
      document.body.setAttribute("data-metrics-socket", "open");
    };
    socket.onmessage = function (message) {
      var data;
      try {
        data = JSON.parse(message.data);
      } catch (e) {
        return;
      }
      if (data && data.type === "snapshot") {
        document.body.setAttribute("data-metrics-tick", String(data.tick)); // the last snapshot announced
        fire();
      } else if (data && (data.type === "changed" || data.type === "job")) {
        // An operator action or a job touched this stream: [data-stream-live] sections refetch themselves.
        document.body.setAttribute("data-stream-event", String(data.action || data.state || data.type));
        document.body.dispatchEvent(new CustomEvent(data.type === "job" ? "job-progress" : "stream-changed"));
      }
    };
    socket.onclose = function (event) {
      socket = null;
      document.body.setAttribute("data-metrics-socket", "closed");
      startPolling();
      if (event.code === 4401) return; // logged out: the next page load goes to the login page
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 60000);
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (!hasPanels()) return;
    startPolling();
    connect();
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") fire();
    });
  });
})();
