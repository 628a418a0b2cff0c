"""A small HTTP server on 127.0.0.1 for download tests: files of a directory, Range requests,
and scripted failures per file (an HTTP error, a stall, a connection cut mid-body)."""

import re
import threading
import time
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


class FileServer:
    """Serve ``root`` at ``self.url`` while in a ``with`` block; every thread is joined at the end.

    ``script[name]`` lists what the next requests for file ``name`` get, one item each:
    an int (that HTTP status, no body), ``("cut", n)`` (the headers of the whole answer but
    only ``n`` bytes of body, then the connection closes), ``("stall", seconds)`` (no
    answer for that long), ``("slow", seconds)`` (the answer in ten parts spread over
    that long), ``("body", data)`` (``data`` served as the file, with status 200 or 206) or
    ``("unsized", data)`` (``data`` with status 200 and no Content-Length).
    Requests beyond the list are served normally. ``requests`` logs ``(name, Range
    header)`` of each request.
    """

    def __init__(self, root):
        self.root = Path(root)
        self.script = {}
        self.requests = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, self))
        self._httpd.daemon_threads = False  # server_close() joins the request threads
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def next_action(self, name, range_header):
        with self._lock:
            self.requests.append((name, range_header))
            actions = self.script.get(name)
            return actions.pop(0) if actions else None


class _Handler(BaseHTTPRequestHandler):
    def __init__(self, server_state, *args, **kwargs):
        self.state = server_state
        super().__init__(*args, **kwargs)

    def log_message(self, format, *args):  # quiet
        pass

    def do_GET(self):
        name = unquote(self.path.lstrip("/"))
        range_header = self.headers.get("Range")
        action = self.state.next_action(name, range_header)
        if isinstance(action, int):
            self.send_error(action)
            return
        if isinstance(action, tuple) and action[0] == "stall":
            time.sleep(action[1])
            return
        if isinstance(action, tuple) and action[0] == "unsized":
            self.send_response(200)  # no Content-Length: the body ends when the connection does
            self.end_headers()
            self.wfile.write(action[1])
            return
        path = self.state.root / name
        if isinstance(action, tuple) and action[0] == "body":
            data = action[1]
        elif path.is_file():
            data = path.read_bytes()
        else:
            self.send_error(404)
            return
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", range_header or "")
        if match:
            start = int(match[1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if isinstance(action, tuple) and action[0] == "cut":
            body = body[: action[1]]
        if isinstance(action, tuple) and action[0] == "slow":
            step = len(body) // 10 + 1
            for start in range(0, len(body), step):
                self.wfile.write(body[start : start + step])
                self.wfile.flush()
                time.sleep(action[1] / 10)
            return
        self.wfile.write(body)
