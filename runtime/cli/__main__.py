"""``python -m runtime.cli``: the ``parley`` command."""

from __future__ import annotations

import sys

from . import main

sys.exit(main())
