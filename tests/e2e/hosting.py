"""A web page on its own origin (a free loopback port): the host site that embeds the
widget from the Parley server on another origin."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class HostSite:
    """Serves ``pages`` (path → HTML) on http://127.0.0.1:<free port>."""

    def __init__(self, pages: dict[str, str]) -> None:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = site.pages.get(self.path.split("?")[0])
                if body is None:
                    self.send_error(404)
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.pages = dict(pages)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/") -> str:
        return self.origin + path

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def embed_page(server: str, *, title: str = "Shop", attrs: str = "", body: str = "") -> str:
    """A host page with the paste-in snippet (see README) pointing at ``server``."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body {{ font-family: serif; color: #400; }} p, div, button {{ all: unset; }}</style>
</head><body><main><h1>{title}</h1><p>Our host page.</p>{body}</main>
<script type="module" src="{server}/widget/parley-widget.js" {attrs}></script>
</body></html>"""
