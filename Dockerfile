# One image for the server and the workers (compose.yaml runs both).
# Stage 1 builds the wheel (it carries the widget, the demo pages and the Lua scripts as
# package data); stage 2 installs that wheel like any Python package: no source tree.
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY runtime ./runtime
COPY server ./server
COPY examples ./examples
COPY widget ./widget
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /dist /dist
RUN pip install --no-cache-dir /dist/*.whl \
    && rm -rf /dist \
    && useradd --create-home --uid 10001 parley
USER parley
WORKDIR /home/parley

EXPOSE 8000 9100
CMD ["parley", "server", "--host", "0.0.0.0", "--port", "8000", "--app", "examples.support_agent"]
