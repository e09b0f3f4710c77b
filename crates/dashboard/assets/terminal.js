// The web terminal: xterm.js attached to the workspace agent's reconnecting PTY through the
// dashboard's socket (/-/terminal/{agent}?reconnect=…). Input and resizes go out as Coder's
// JSON messages ({data} / {height, width}); output comes back as raw bytes. The terminal's id is
// in the page's URL, so a reload reattaches and the agent replays what it printed meanwhile.
// A lost or refused connection is retried with backoff (1 s doubling to 30 s).
(function () {
  "use strict";

  var host = document.getElementById("main");
  var status = document.getElementById("terminal-status");
  var fresh = document.getElementById("terminal-new");
  if (!host || !host.dataset.socket || !status || !window.Terminal) return;

  var term = new window.Terminal({
    cursorBlink: true,
    fontFamily: '"DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, monospace',
    fontSize: 14,
    scrollback: 10000,
    theme: { background: "#0d1117", foreground: "#e6edf3" },
  });
  var fit = window.FitAddon ? new window.FitAddon.FitAddon() : null;
  if (fit) term.loadAddon(fit);
  term.open(host);
  if (fit) fit.fit();
  term.focus();

  var socket = null;
  var timer = null;
  var backoff = 1000;
  var ended = false;

  function say(text, kind) {
    status.textContent = text;
    status.className = "badge " + kind;
  }

  function socketUrl() {
    var url = new URL(host.dataset.socket, window.location.href);
    url.protocol = window.location.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("width", String(term.cols));
    url.searchParams.set("height", String(term.rows));
    return url.toString();
  }

  function send(message) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  }

  function retry(why) {
    say(why + " Reconnecting in " + Math.round(backoff / 1000) + " s…", "bad");
    timer = setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 30000);
  }

  function connect() {
    timer = null;
    var ws = new WebSocket(socketUrl());
    ws.binaryType = "arraybuffer";
    socket = ws;
    var opened = false;
    var live = false;
    // A refused terminal is upgraded, then closed at once with the reason; so the socket
    // counts as connected (and the backoff restarts) only once output came or it stayed open.
    function settled() {
      if (live || socket !== ws) return;
      live = true;
      backoff = 1000;
      say("Connected", "ok");
    }
    ws.onopen = function () {
      opened = true;
      // The size may have changed while the socket was opening.
      send({ height: term.rows, width: term.cols });
      setTimeout(settled, 1000);
    };
    ws.onmessage = function (event) {
      settled();
      term.write(typeof event.data === "string" ? event.data : new Uint8Array(event.data));
    };
    ws.onclose = function (event) {
      if (socket !== ws) return;
      socket = null;
      // 1000: the terminal's command exited; attaching again would start a new one.
      if (event.code === 1000) {
        ended = true;
        say("The terminal's process exited.", "off");
        if (fresh) fresh.hidden = false;
        return;
      }
      var why = event.reason ? event.reason.charAt(0).toUpperCase() + event.reason.slice(1) : "";
      if (why && why.slice(-1) !== ".") why += ".";
      if (!why) why = opened ? "The connection to the workspace was lost." : "Could not connect to the workspace.";
      retry(why);
    };
  }

  term.onData(function (data) {
    send({ data: data });
  });
  term.onResize(function (size) {
    send({ height: size.rows, width: size.cols });
  });

  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      if (fit) fit.fit();
    }, 50);
  });
  // Back online: try now rather than at the end of a long backoff.
  window.addEventListener("online", function () {
    if (timer && !ended) {
      clearTimeout(timer);
      connect();
    }
  });

  connect();
})();
