"""OpenAI-compatible servers for the tests, on 127.0.0.1.

``ScriptedServer``: a real HTTP server (http.server, in a thread) that answers ``/v1/chat/completions``
from a script, one entry per request: a model answer, an HTTP status, a hang, or a body that is not
JSON. It records every request, so tests can count retries and read the re-prompts.

``llama_server``: the real ``python -m llama_cpp.server`` serving the embedded GGUF.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(content: str, model: str = "scripted") -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


class ScriptedServer:
    """Script entries: ``("answer", text)``, ``("status", code)``, ``("hang", seconds)``, ``("garbage",)``.
    The last entry repeats once the script runs out."""

    def __init__(self, script: list[tuple[Any, ...]]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                entry = server.script[min(len(server.requests), len(server.script)) - 1]
                kind = entry[0]
                if kind == "hang":
                    time.sleep(entry[1])
                    self._send(200, json.dumps(completion('{"targets": ["fridge"], "avoid": []}')))
                elif kind == "status":
                    self._send(entry[1], json.dumps({"error": {"message": "scripted failure", "type": "server"}}))
                elif kind == "garbage":
                    self._send(200, "this is not json {")
                else:
                    self._send(200, json.dumps(completion(entry[1])))

            def _send(self, code: int, text: str) -> None:
                data = text.encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_llama_server(model_path: str, timeout_s: float = 120.0) -> tuple[subprocess.Popen, str]:
    """``python -m llama_cpp.server`` on a free port of 127.0.0.1; returns (process, base_url)."""
    import tempfile

    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the server) -- not a pipe: llama.cpp's loading log would fill it and block the server
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", model_path, "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--model_alias", "smollm2"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            out = log.read().decode(errors="replace")
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}:\n{out[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"llama_cpp.server did not answer on {url} within {timeout_s} s")
