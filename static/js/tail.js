// Live tail of one stream over a websocket (see streams_app/consumers.py for the frames).
//
// Payloads are untrusted: every piece of an entry is put in the page with textContent or as an
// attribute of an element we create; never innerHTML. The script remembers the newest ID it has
// shown, so a reconnect (after a drop, or after Pause/Resume) asks the server for exactly the
// entries after it: nothing missed, nothing twice (rows at or below that ID are also ignored here).
//
// The page's state lives in its address (?filter=...&paused=1&after=<last id>&keep=...), rewritten with
// history.replaceState, so a reload or a shared link resumes the same view: the view replays the
// entries up to `after` as context; with `paused` the page holds there (data-hold) until Resume.
//
// The rate counts only entries that arrived live: those after the server's "live" status frame,
// which it sends once a replay (the backlog, or what a reconnect missed) is over.
//
// The filter is search's language and runs on the server (?filter= on the socket's URL): the page
// shows what the server sends. A new filter clears the rows and reconnects after the position the
// rows begin at (windowStart), so the server shows that stretch again through the new filter, then
// live: paused, the page holds at the same last ID. The server says how it read the filter (the old
// "path=value" as its CEL equality) or why it refused it, and, while nothing matches, how far it has
// read ("tested" frames): a reconnect goes on from there.
(function () {
  "use strict";

  var root = document.getElementById("tail");
  if (!root) return;

  var wsPath = root.dataset.wsPath;
  var streamUrl = root.dataset.streamUrl;
  var loginUrl = root.dataset.loginUrl;
  var rowsEl = document.getElementById("tail-rows");
  var stateEl = document.getElementById("tail-state");
  var pauseBtn = document.getElementById("tail-pause");
  var filterEl = document.getElementById("tail-filter");
  var capEl = document.getElementById("tail-cap");
  var rateEl = document.getElementById("tail-rate");
  var countEl = document.getElementById("tail-count");
  var lastEl = document.getElementById("tail-last");
  var lastTimeEl = document.getElementById("tail-last-time");
  var noticeEl = document.getElementById("tail-notice");
  var filterNoteEl = document.getElementById("tail-filter-note");

  var lastId = root.dataset.after || null; // newest ID the page has (the server replays after it)
  // Where the stretch of the stream the rows cover begins (exclusive): a new filter is shown from here.
  var windowStart = root.dataset.after || "0-0";
  var socket = null;
  var paused = !!root.dataset.paused;
  // Paused by the address: replay up to this ID, then close and stay paused (null: not holding).
  var holdAt = paused && root.dataset.hold ? root.dataset.hold : null;
  var liveSince = null; // when this socket's replay ended ("live"), null while not live
  var entryRows = 0; // rows that are entries (not gap notes)
  var urlTimer = null;
  var attempt = 0; // reconnect attempts since the last "live"
  var retryTimer = null;
  var arrivals = []; // [time ms, entries] that arrived live in the last few seconds, for the rate
  var entryIds = new WeakMap(); // row -> its entry ID (gap notes have none)
  var filter = filterEl.value.trim(); // the filter the socket was (or will be) opened with
  var filterTimer = null;
  var FILTER_DELAY_MS = 600; // a filter applies once typing stops this long (or on Enter)
  var RATE_WINDOW_MS = 5000;
  var FINAL_CODES = { 4400: "bad request", 4401: "signed out", 4404: "not found" };

  // ------------------------------------------------------------------------ stream IDs

  function cmpDigits(a, b) {
    // IDs are unsigned 64-bit numbers: longer means bigger, else compare as text (no Number overflow).
    if (a.length !== b.length) return a.length < b.length ? -1 : 1;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  function cmpId(a, b) {
    var x = a.split("-"), y = b.split("-");
    return cmpDigits(x[0], y[0]) || cmpDigits(x[1] || "0", y[1] || "0");
  }

  function idTime(id) {
    var ms = Number(id.split("-")[0]);
    if (!isFinite(ms) || ms > 8.64e15) return "";
    return new Date(ms).toISOString().replace("T", " ").slice(0, 23);
  }

  // ------------------------------------------------------------------------ page state

  function setState(state, text) {
    stateEl.dataset.state = state;
    stateEl.textContent = text || state;
    pauseBtn.textContent = paused ? "Resume" : "Pause";
  }

  function notice(text, link) {
    noticeEl.textContent = text;
    if (link) {
      var a = document.createElement("a");
      a.href = link.href;
      a.textContent = link.text;
      noticeEl.appendChild(document.createTextNode(" "));
      noticeEl.appendChild(a);
    }
    noticeEl.hidden = false;
  }

  function setLast(id) {
    lastId = id;
    lastEl.textContent = id;
    var when = idTime(id);
    lastTimeEl.textContent = when ? when + " UTC" : "";
    saveUrlSoon();
  }

  // ------------------------------------------------------------------------ the address

  function saveUrl() {
    clearTimeout(urlTimer);
    urlTimer = null;
    var params = new URLSearchParams();
    if (filter) params.set("filter", filter);
    if (paused) params.set("paused", "1");
    if (lastId && lastId !== "0-0") params.set("after", lastId);
    if (capEl.value !== "500") params.set("keep", capEl.value);
    var query = params.toString();
    var url = location.pathname + (query ? "?" + query : "") + location.hash;
    if (url !== location.pathname + location.search + location.hash) history.replaceState(history.state, "", url);
  }

  function saveUrlSoon() {
    // Browsers refuse more than a few hundred replaceState calls in seconds: at most ~3 a second.
    if (urlTimer === null) urlTimer = setTimeout(saveUrl, 300);
  }

  // ------------------------------------------------------------------------ rows

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function pretty(field) {
    if (field.format === "text" || field.format === "hex") return String(field.value);
    try {
      return JSON.stringify(field.value, null, 2);
    } catch (e) {
      return String(field.value);
    }
  }

  function entryRow(entry) {
    var tr = el("tr");
    var idCell = el("td", "mono nowrap");
    var link = el("a", null, entry.id);
    link.href = streamUrl + "entries/" + encodeURIComponent(entry.id) + "/";
    idCell.appendChild(link);
    tr.appendChild(idCell);
    tr.appendChild(el("td", "nowrap small", idTime(entry.id)));

    var pairs = [];
    var names = Object.keys(entry.fields || {});
    for (var i = 0; i < names.length; i++) pairs.push([names[i], String(entry.fields[names[i]])]);
    var summary = pairs.map(function (p) { return p[0] + "=" + p[1].replace(/\s+/g, " ").slice(0, 160); }).join("  ");
    var details = el("details");
    details.appendChild(el("summary", "mono small", summary.slice(0, 400)));
    var dl = el("dl", "fields");
    (entry.decoded || []).forEach(function (field) {
      var dt = el("dt", "mono", field.name + " ");
      dt.appendChild(el("span", "fmt fmt-" + String(field.format).replace(/[^a-z]/g, ""), field.format));
      dl.appendChild(dt);
      var dd = el("dd");
      dd.appendChild(el("pre", "payload", pretty(field)));
      if (field.truncated && typeof field.raw_url === "string" && /^\/[^/]/.test(field.raw_url)) {
        var raw = el("a", "small", "Download the whole value");
        raw.href = field.raw_url;
        raw.setAttribute("download", "");
        dd.appendChild(raw);
      }
      dl.appendChild(dd);
    });
    details.appendChild(dl);
    var fieldsCell = el("td");
    fieldsCell.appendChild(details);
    tr.appendChild(fieldsCell);
    entryIds.set(tr, entry.id);
    entryRows++;
    return tr;
  }

  function gapRow(frame) {
    var tr = el("tr", "row-warn tail-gap");
    var td = el("td");
    td.colSpan = 3;
    var count = typeof frame.count === "number" ? frame.count + " entries" : "Entries";
    var why = {
      replay_limit: "more than a reconnect replays",
      lagging: "the server could not keep up with the stream"
    }[frame.reason] || "this page fell behind the stream";
    td.appendChild(document.createTextNode(count + " skipped (" + why + "), up to " + frame.last_skipped + ". "));
    if (frame.resume_after) {
      var a = el("a", null, "Show them on the stream page");
      a.href = streamUrl + "?order=asc&after=" + encodeURIComponent(frame.resume_after);
      td.appendChild(a);
    }
    tr.appendChild(td);
    return tr;
  }

  function prepend(tr) {
    rowsEl.insertBefore(tr, rowsEl.firstChild);
  }

  function trim() {
    var cap = parseInt(capEl.value, 10) || 500;
    while (rowsEl.rows.length > cap) {
      var last = rowsEl.rows[rowsEl.rows.length - 1];
      var id = entryIds.get(last);
      if (id) {
        entryRows--;
        if (cmpId(id, windowStart) > 0) windowStart = id; // the rows now begin after it
      }
      rowsEl.deleteRow(rowsEl.rows.length - 1);
    }
    showCount();
  }

  function showCount() {
    var rows = entryRows + (entryRows === 1 ? " row" : " rows");
    countEl.textContent = filter ? rows + " matching the filter" : rows;
  }

  function addEntries(entries) {
    var added = 0;
    for (var i = 0; i < entries.length; i++) {
      var entry = entries[i];
      if (lastId && cmpId(entry.id, lastId) <= 0) continue; // already shown
      if (holdAt && cmpId(entry.id, holdAt) > 0) { // past where the address paused the page
        endHold();
        break;
      }
      prepend(entryRow(entry));
      setLast(entry.id);
      added++;
    }
    if (added) {
      if (liveSince !== null) arrivals.push([Date.now(), added]); // a replay is not the live rate
      trim();
    }
  }

  // ------------------------------------------------------------------------ filter

  function filterNote(text, code, error) {
    filterNoteEl.textContent = text;
    if (code) filterNoteEl.appendChild(el("code", null, code));
    filterNoteEl.classList.toggle("bad-text", !!error);
    filterNoteEl.hidden = !text && !code;
    if (error) filterEl.setAttribute("aria-invalid", "true");
    else filterEl.removeAttribute("aria-invalid");
  }

  function filterRead(frame) {
    // How the server read the filter it tails with (status "filter").
    if (!frame.query) filterNote("", null, false);
    else if (frame.read_as) filterNote("Filter read as ", String(frame.read_as), false);
    else if (frame.kind === "text") filterNote("Plain text: entries with a field name or value containing it.", null, false);
    else filterNote("Expression (CEL).", null, false);
  }

  function applyFilter() {
    clearTimeout(filterTimer);
    filterTimer = null;
    var text = filterEl.value.trim();
    if (text === filter) return;
    filter = text;
    if (!filter) filterNote("", null, false);
    // The rows were what the old filter kept: show the same stretch again through the new one.
    var held = paused ? (holdAt || lastId) : null;
    while (rowsEl.rows.length) rowsEl.deleteRow(0);
    entryRows = 0;
    showCount();
    clearTimeout(retryTimer);
    closeSocket();
    lastId = windowStart;
    saveUrl();
    if (paused) {
      if (held && held !== "0-0" && cmpId(held, windowStart) > 0) {
        holdAt = held; // replays up to where the page was paused, then stays paused
        connect();
      } else {
        setState("paused", "paused");
      }
    } else {
      connect();
    }
  }

  filterEl.addEventListener("input", function () {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(applyFilter, FILTER_DELAY_MS);
  });
  filterEl.addEventListener("keydown", function (event) {
    if (event.key === "Enter") applyFilter();
  });
  filterEl.addEventListener("change", applyFilter);
  capEl.addEventListener("change", function () {
    trim();
    saveUrl();
  });
  showCount();

  // ------------------------------------------------------------------------ rate

  setInterval(function () {
    var now = Date.now();
    while (arrivals.length && arrivals[0][0] < now - RATE_WINDOW_MS) arrivals.shift();
    if (liveSince === null) {
      rateEl.textContent = "—"; // paused, catching up or disconnected: no live rate to show
      return;
    }
    var total = arrivals.reduce(function (sum, a) { return sum + a[1]; }, 0);
    // Over the window, or over the time live when shorter (but at least a second).
    var seconds = Math.max(1000, Math.min(RATE_WINDOW_MS, now - liveSince)) / 1000;
    rateEl.textContent = (total / seconds).toFixed(1);
  }, 1000);

  // ------------------------------------------------------------------------ websocket

  function frameReceived(frame) {
    switch (frame.type) {
      case "entry":
        addEntries([frame]);
        break;
      case "entries":
        addEntries(frame.entries || []);
        break;
      case "skipped":
        prepend(gapRow(frame));
        trim();
        break;
      case "status":
        if (frame.state === "live") {
          if (holdAt) { // the replay up to where the address paused the page is done
            endHold();
            break;
          }
          attempt = 0;
          liveSince = Date.now();
          if (frame.last_id && (!lastId || cmpId(frame.last_id, lastId) > 0)) setLast(frame.last_id);
          setState("live", "live");
        } else if (frame.state === "replaying") {
          liveSince = null;
          setState("replaying", "catching up…");
        } else if (frame.state === "reconnecting") {
          liveSince = null;
          setState("reconnecting", "Redis unreachable, retrying…");
        } else if (frame.state === "stalled") {
          // The server's reader of this stream keeps failing: say why, until a "live" frame.
          liveSince = null;
          setState("stalled", "not receiving: " + String(frame.reason || "the server cannot read this stream"));
        } else if (frame.state === "error") {
          notice(String(frame.message || "The tail stopped."));
        } else if (frame.state === "filter") {
          filterRead(frame);
        } else if (frame.state === "filter_costly") {
          notice(String(frame.message || "Some entries were too costly for the filter to evaluate."));
        } else if (frame.state === "filter_error") {
          // Refused (the socket stays open and tails nothing): say why, until the filter changes.
          filterNote("Filter refused: " + String(frame.message || "it cannot be evaluated."), null, true);
          setState("filter-error", "not tailing: the filter is refused");
        }
        break;
      case "tested": // a filter read this far and kept nothing more: a reconnect goes on from here
        if (holdAt && cmpId(frame.last_id, holdAt) > 0) {
          endHold();
        } else if (!lastId || cmpId(frame.last_id, lastId) > 0) {
          setLast(frame.last_id);
        }
        break;
      case "changed":
        notice(describe("Changed", frame, ["type", "conn", "key"]));
        break;
      case "job":
        notice("Job " + frame.job + (frame.kind ? " (" + frame.kind + ")" : "") + ": " + frame.state +
               (frame.total ? " " + frame.done + "/" + frame.total : "") + (frame.error ? " — " + frame.error : ""));
        break;
    }
  }

  function describe(prefix, frame, skip) {
    var parts = [];
    Object.keys(frame).forEach(function (k) {
      if (skip.indexOf(k) < 0) parts.push(k + "=" + (typeof frame[k] === "object" ? JSON.stringify(frame[k]) : frame[k]));
    });
    return prefix + ": " + parts.join(", ");
  }

  function closeSocket() {
    liveSince = null;
    arrivals = [];
    if (socket) {
      var ws = socket;
      socket = null;
      ws.close(1000);
    }
  }

  function endHold() {
    // The page shows everything up to where its address paused it: close, and stay paused.
    holdAt = null;
    closeSocket();
    setState("paused", "paused");
  }

  function connect() {
    clearTimeout(retryTimer);
    retryTimer = null;
    liveSince = null;
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + wsPath;
    var params = new URLSearchParams();
    if (lastId) params.set("after", lastId);
    if (filter) params.set("filter", filter);
    if (params.toString()) url += "?" + params.toString();
    setState("connecting", "connecting…");
    var ws = new WebSocket(url);
    socket = ws;
    ws.onmessage = function (event) {
      if (ws !== socket) return;
      var frame;
      try {
        frame = JSON.parse(event.data);
      } catch (e) {
        return;
      }
      frameReceived(frame);
    };
    ws.onclose = function (event) {
      if (ws !== socket) return;
      socket = null;
      liveSince = null;
      if (paused) return;
      if (FINAL_CODES[event.code]) {
        setState("closed", FINAL_CODES[event.code]);
        if (event.code === 4401) notice("Your session ended.", { href: loginUrl + "?next=" + encodeURIComponent(location.pathname), text: "Log in again" });
        return;
      }
      var delay = Math.min(15000, 500 * Math.pow(2, attempt)) * (0.75 + Math.random() / 2);
      attempt++;
      setState("reconnecting", "disconnected, retrying in " + Math.ceil(delay / 1000) + " s");
      retryTimer = setTimeout(connect, delay);
    };
  }

  pauseBtn.addEventListener("click", function () {
    if (paused) {
      paused = false;
      holdAt = null;
      closeSocket(); // still replaying up to where the address held it: start again after lastId
      connect(); // resumes after lastId: the server replays what arrived while paused
    } else {
      paused = true;
      clearTimeout(retryTimer);
      closeSocket();
      setState("paused", "paused");
    }
    saveUrl();
  });

  if (paused && !holdAt) {
    setState("paused", "paused"); // paused by the address with nothing to show up to: no socket
  } else {
    connect(); // paused by the address: replays up to data-hold, then stays paused
  }
})();
