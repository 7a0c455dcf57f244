"""The chat widget's browser files (ES modules, CSS, the demo pages, vendored libraries).

A Python package only so that a wheel carries them as package data: the server finds
them with ``importlib.resources.files("widget")`` (see ``server.context.WIDGET_DIR``).
"""
