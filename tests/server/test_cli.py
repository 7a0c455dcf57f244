"""``parley server``'s startup errors, run as a real process: each is a line, exit 2."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.processes import check_unimportable_apps_refused

from .conftest import API_KEY


def test_an_app_that_does_not_import_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as taken:  # were it to start anyway, it fails at once (status 3)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        check_unimportable_apps_refused(
            tmp_path,
            "parley server: ",
            *("server", "--redis", "memory://", "--port", port),
            env={"PARLEY_API_KEY": API_KEY},
        )
