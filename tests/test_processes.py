"""The test helpers' own check of which process listens on a port."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading

from tests.processes import listens_on


def test_a_port_is_listened_on_by_the_process_that_bound_it_and_by_no_other() -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    port = server.server_address[1]
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert listens_on(os.getpid(), port)
        # (a restarted server that failed to bind, while this one answers on its port)
        assert not listens_on(stranger.pid, port)
    finally:
        stranger.kill()
        stranger.wait()
        server.shutdown()
        server.server_close()
    assert not listens_on(stranger.pid, port)  # the process has exited
    assert not listens_on(os.getpid(), port)  # the socket is closed
