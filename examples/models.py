"""The demos' real model, when ``PARLEY_DEMO_MODEL`` names one: a LangChain
``init_chat_model`` spec (``openai:gpt-4o-mini``, ``ollama:llama3.1``, ...), with
``PARLEY_DEMO_MODEL_BASE_URL`` for an OpenAI-compatible endpoint (vLLM, Ollama, a proxy)
and ``PARLEY_DEMO_MODEL_API_KEY`` for its key. It needs the provider's package
(``pip install 'parley[demo-model]'`` brings ``langchain`` and ``langchain-openai``).
"""

from __future__ import annotations

from typing import Any

from runtime.settings import DemoSettings

_built: dict[tuple[str, str | None, str | None], Any] = {}


def configured_model(settings: DemoSettings) -> Any:
    """The chat model ``settings`` name, streaming (built once a process)."""
    assert settings.model is not None
    spec = (settings.model, settings.model_base_url, settings.model_api_key)
    if spec not in _built:
        _built[spec] = _build(settings.model, settings)
    return _built[spec]


def build_configured_model() -> None:
    """Build the model ``PARLEY_DEMO_MODEL`` names, if any, now: a demo app calls it when
    it is imported (a worker's start, before it takes tasks), not in the first step that
    uses the model. Building it imports the provider's package, which held a loaded
    worker's event loop for over a second, past its lease (1 s in the demos' tests), and
    the run was given to the worker again and executed twice."""
    settings = DemoSettings.from_env()
    if settings.model is not None:
        configured_model(settings)


def _build(model: str, settings: DemoSettings) -> Any:
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise RuntimeError(
            f"PARLEY_DEMO_MODEL={settings.model!r} needs the 'langchain' package and the "
            "provider's (pip install 'parley[demo-model]'): " + str(exc)
        ) from None
    options: dict[str, Any] = {"streaming": True, "temperature": 0}
    if settings.model_base_url:
        options["base_url"] = settings.model_base_url
    if settings.model_api_key:
        options["api_key"] = settings.model_api_key
    return init_chat_model(model, **options)
