# One image for the server and the workers (compose.yaml runs both).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

# Dependencies first, for the layer cache.
COPY pyproject.toml README.md ./
COPY runtime ./runtime
COPY server ./server
COPY examples ./examples
COPY widget ./widget
# Editable: the server serves widget/ from this source tree.
RUN pip install --no-cache-dir -e . \
    && useradd --create-home --uid 10001 parley
USER parley

EXPOSE 8000 9100
CMD ["parley", "server", "--host", "0.0.0.0", "--port", "8000", "--app", "examples.support_agent"]
