"""A deliberately misbehaving OpenAI-style server, for tests only (not an engine, no model).

Metadata (/health, /v1/models) is served correctly unless the mode spoils everything, so that
`servefit verify` gets past its liveness check and meets the fault in generation:

healthy         short, valid answers (streamed and whole)
drip            generation bodies arrive one byte every 50 ms, never complete
keepalive       streams send only `: keep-alive` comments; whole bodies only whitespace
no_newline      a stream line that never ends; a whole body that never ends
gzip_bomb       every response gzip-encoded, 64 MiB of zeros in ~64 KiB (not asked for)
ignore_max      streams never stop (varied text, no loop); whole answers report 100,000 tokens
looping         streams repeat "thinking\\n\\n" forever, whatever max_tokens says
malformed_json  generation bodies and events are not JSON
wrong_type      generation answered as text/html
error_500       generation answered HTTP 500
reset           generation connections reset (RST) after the request is read
reset_all       every connection reset
"""

from __future__ import annotations

import gzip
import json
import random
import socket
import socketserver
import struct
import threading
import time
from typing import Any

MODES = (
    "healthy",
    "drip",
    "keepalive",
    "no_newline",
    "gzip_bomb",
    "ignore_max",
    "looping",
    "malformed_json",
    "wrong_type",
    "error_500",
    "reset",
    "reset_all",
)
MODEL = "misbehaving"
_BOMB = gzip.compress(bytes(64 << 20), compresslevel=9)
_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "iota", "kappa")


class _Handler(socketserver.BaseRequestHandler):
    server: MisbehavingServer

    def handle(self) -> None:
        try:
            method, path, body = self._read_request()
        except (OSError, ValueError):
            return
        mode = self.server.mode
        try:
            if mode == "reset_all" or (mode == "reset" and path.startswith("/v1/chat")):
                self._reset()
                return
            if method == "GET":
                self._get(path)
            else:
                self._chat(body)
        except OSError:  # the client went away: that is how most of these end
            pass

    # ---- plumbing

    def _read_request(self) -> tuple[str, str, dict[str, Any]]:
        sock = self.request
        sock.settimeout(30)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise ValueError("closed")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            rest += sock.recv(65536)
        return method, path, json.loads(rest) if rest else {}

    def _send(self, data: bytes) -> None:
        self.request.sendall(data)

    def _head(self, status: str, ctype: str, length: int | None, extra: str = "") -> None:
        # one request per connection: the client must not reuse it
        size = f"Content-Length: {length}\r\n" if length is not None else ""
        self._send(
            f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n{size}Connection: close\r\n"
            f"{extra}\r\n".encode()
        )

    def _reply(self, status: str, ctype: str, payload: bytes) -> None:
        if self.server.mode == "gzip_bomb":
            self._head(status, ctype, len(_BOMB), "Content-Encoding: gzip\r\n")
            self._send(_BOMB)
            return
        self._head(status, ctype, len(payload))
        self._send(payload)

    def _reset(self) -> None:
        self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.request.close()

    def _forever(self, piece: Any, every_s: float) -> None:
        """Send pieces until the client leaves or the server stops."""
        stop = self.server.stopping
        while not stop.is_set():
            self._send(piece() if callable(piece) else piece)
            time.sleep(every_s)

    # ---- routes

    def _get(self, path: str) -> None:
        if path == "/v1/models":
            listing = {"object": "list", "data": [{"id": MODEL, "max_model_len": 4096}]}
            self._reply("200 OK", "application/json", json.dumps(listing).encode())
        elif path.startswith("/health"):
            self._reply("200 OK", "text/plain", b"")
        else:
            self._reply("404 Not Found", "application/json", b'{"detail": "Not Found"}')

    def _chat(self, body: dict[str, Any]) -> None:
        mode, stream = self.server.mode, bool(body.get("stream"))
        if mode == "drip":
            self._head("200 OK", "text/event-stream" if stream else "application/json", None)
            text = b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n' if stream else b"{}"
            dripped = iter(text * 100000)
            self._forever(lambda: bytes([next(dripped)]), 0.05)
        elif mode == "keepalive":
            self._head("200 OK", "text/event-stream" if stream else "application/json", None)
            self._forever(b": keep-alive\n\n" if stream else b" \n", 0.05)
        elif mode == "no_newline":
            self._head("200 OK", "text/event-stream" if stream else "application/json", None)
            self._send(b"data: " if stream else b'{"choices": "')
            self._forever(b"a" * 65536, 0.002)
        elif mode in ("ignore_max", "looping") and stream:
            self._head("200 OK", "text/event-stream", None)
            rng = random.Random(7)

            def event() -> bytes:
                text = "thinking\n\n" if mode == "looping" else rng.choice(_WORDS) + " "
                chunk = {"model": MODEL, "choices": [{"index": 0, "delta": {"content": text}}]}
                return f"data: {json.dumps(chunk)}\n\n".encode()

            self._forever(event, 0.0005)
        elif mode == "malformed_json":
            if stream:
                self._head("200 OK", "text/event-stream", None)
                self._send(b"data: {not json\n\n")
            else:
                self._reply("200 OK", "application/json", b"{not json")
        elif mode == "wrong_type":
            self._reply("200 OK", "text/html", b"<html><body>Bad gateway</body></html>")
        elif mode == "error_500":
            error = {"object": "error", "message": "Internal server error", "code": 500}
            self._reply("500 Internal Server Error", "application/json", json.dumps(error).encode())
        else:  # healthy, gzip_bomb (spoiled in _reply), ignore_max whole answers
            self._answer(body, stream)

    def _answer(self, body: dict[str, Any], stream: bool) -> None:
        text = "The answer is 42."
        tokens = 100_000 if self.server.mode == "ignore_max" else 5
        usage = {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": tokens + 10}
        if not stream:
            message = {"role": "assistant", "content": text}
            obj = {
                "object": "chat.completion",
                "model": MODEL,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage,
            }
            self._reply("200 OK", "application/json", json.dumps(obj).encode())
            return
        events = [
            {"model": MODEL, "choices": [{"index": 0, "delta": {"content": w + " "}}]}
            for w in text.split()
        ]
        events.append(
            {"model": MODEL, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        )
        events.append({"model": MODEL, "choices": [], "usage": usage})
        payload = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self._reply("200 OK", "text/event-stream", payload.encode())


class MisbehavingServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mode: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> MisbehavingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
