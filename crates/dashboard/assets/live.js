// Live updates for the dashboard: one WebSocket per tab (/-/live). The server sends rendered
// fragments (replacing an element by id) and log lines (inserted as text, never as markup).
// Pages work without this file; if the socket cannot open, htmx polls the fragments instead.
(function () {
  "use strict";

  var MAX_LOG_LINES = 10000;
  var backoff = 1000;
  var socket = null;
  var pending = null; // a fragment held back while the person works a control inside the region
  var leaving = false; // a form was submitted: the next page is on its way

  function region() {
    return document.querySelector("#ws-live[data-live-workspace]");
  }

  function logElement() {
    return document.getElementById("build-log");
  }

  function setOpen(open) {
    if (open) {
      document.body.dataset.live = "open";
    } else {
      delete document.body.dataset.live;
    }
  }

  // Whether the person is on a control inside `el` (typing, or about to click it): replacing
  // the region then would lose the typing or swallow the click.
  function inUse(el) {
    var active = document.activeElement;
    return !!active && el.contains(active) &&
      /^(INPUT|TEXTAREA|SELECT|BUTTON|SUMMARY)$/.test(active.tagName);
  }

  // The same markup as shown, disregarding which disclosures the person opened.
  function unchanged(old, fresh) {
    var shown = old.cloneNode(true);
    shown.querySelectorAll("details[open]").forEach(function (d) { d.removeAttribute("open"); });
    return shown.isEqualNode(fresh);
  }

  // Replaces an element with server-rendered markup (escaped by the server's templates),
  // keeping open the disclosures the person opened.
  function replace(id, html) {
    var old = document.getElementById(id);
    if (!old || leaving) return;
    var template = document.createElement("template");
    template.innerHTML = html.trim();
    var fresh = template.content.firstElementChild;
    if (!fresh || unchanged(old, fresh)) return;
    if (inUse(old)) {
      pending = { id: id, html: html };
      return;
    }
    old.querySelectorAll("details[open][id]").forEach(function (d) {
      var same = fresh.querySelector("details#" + CSS.escape(d.id));
      if (same) same.open = true;
    });
    old.replaceWith(fresh);
    if (window.htmx) window.htmx.process(fresh);
  }

  document.addEventListener("submit", function () { leaving = true; });
  window.addEventListener("pageshow", function () { leaving = false; });

  document.addEventListener("focusout", function () {
    if (!pending) return;
    var p = pending;
    pending = null;
    // After the focus has moved, so the check above sees the new focus.
    setTimeout(function () { replace(p.id, p.html); }, 0);
  });

  function appendLines(lines) {
    var log = logElement();
    if (!log) return;
    var last = Number(log.dataset.after || "0");
    var fragment = document.createDocumentFragment();
    lines.forEach(function (line) {
      if (line.id <= last) return; // already shown (a reconnect replays after `after`)
      var span = document.createElement("span");
      span.dataset.id = String(line.id);
      span.textContent = line.text + "\n";
      fragment.appendChild(span);
      last = line.id;
    });
    var follow = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.appendChild(fragment);
    log.dataset.after = String(last);
    while (log.childElementCount > MAX_LOG_LINES) {
      log.removeChild(log.firstElementChild);
    }
    if (follow) log.scrollTop = log.scrollHeight;
  }

  function resetLog() {
    var log = logElement();
    if (!log) return;
    log.textContent = "";
    log.dataset.after = "0";
  }

  function handle(message) {
    var data;
    try {
      data = JSON.parse(message.data);
    } catch (e) {
      return;
    }
    switch (data.type) {
      case "html":
        replace(data.id, data.html);
        break;
      case "log":
        appendLines(data.lines || []);
        break;
      case "log-reset":
        resetLog();
        break;
      case "reload":
        // To the workspace's own URL: this page may be a form's answer at a POST-only URL.
        if (!leaving) {
          var el = region();
          window.location.assign(el && el.dataset.href ? el.dataset.href : window.location.href);
        }
        break;
    }
  }

  function connect() {
    var el = region();
    if (!el) return;
    var log = logElement();
    var after = log ? log.dataset.after || "0" : "0";
    var scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    var url = scheme + "//" + window.location.host + "/-/live?workspace=" +
      encodeURIComponent(el.dataset.liveWorkspace) + "&after=" + encodeURIComponent(after);
    try {
      socket = new WebSocket(url);
    } catch (e) {
      retry();
      return;
    }
    socket.addEventListener("open", function () {
      backoff = 1000;
      setOpen(true);
    });
    socket.addEventListener("message", handle);
    socket.addEventListener("close", function () {
      setOpen(false);
      socket = null;
      retry();
    });
  }

  // Reconnects with backoff (1 s, doubling to 30 s); the server re-sends current state on
  // every connect, so nothing missed while disconnected stays stale.
  function retry() {
    var wait = backoff;
    backoff = Math.min(backoff * 2, 30000);
    setTimeout(connect, wait);
  }

  // While the socket is open, htmx's polling of the same region is not needed.
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (document.body.dataset.live === "open" && event.target && event.target.id === "ws-live") {
      event.preventDefault();
    }
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", connect);
  } else {
    connect();
  }
})();
