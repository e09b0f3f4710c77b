# A small web app for the `apps` example template, started by the agent's startup script:
# pages, a request-header echo, server-sent events, a WebSocket echo and a health check, so
# every feature of coderd's app proxy can be seen working. Python's standard library only.
import base64, hashlib, http.server, json, struct, sys, time

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# /fail-health makes /healthz answer 500 from then on (to watch the app turn unhealthy).
failing = False


class App(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as browsers use it

    def send_body(self, status, body, ctype="text/plain; charset=utf-8"):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        global failing
        if path == "/healthz":
            return self.send_body(500 if failing else 200, "failing" if failing else "ok")
        if path == "/fail-health":
            failing = True
            return self.send_body(200, "/healthz fails from now on")
        if path == "/headers":
            seen = {"path": self.path, "headers": [[k, v] for k, v in self.headers.items()]}
            return self.send_body(200, json.dumps(seen), "application/json")
        if path == "/sse":
            return self.events()
        if path == "/ws":
            return self.websocket()
        self.send_body(200, "hello from the workspace app at " + self.path)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        left, total = length, 0
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                break
            left -= len(chunk)
            total += len(chunk)
        self.send_body(200, str(total))

    def events(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for i in range(3):
            self.wfile.write(("data: event %d\n\n" % i).encode())
            self.wfile.flush()
            time.sleep(1)
        self.close_connection = True

    def websocket(self):
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                break
            opcode, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", self.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if opcode == 8:  # close: answer and stop
                self.wfile.write(b"\x88\x00")
                break
            reply = b"echo: " + data
            size = len(reply)
            header = bytes([0x80 | opcode])
            if size < 126:
                header += bytes([size])
            elif size < 65536:
                header += bytes([126]) + struct.pack(">H", size)
            else:
                header += bytes([127]) + struct.pack(">Q", size)
            self.wfile.write(header + reply)
            self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), App).serve_forever()
