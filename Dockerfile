# syntax=docker/dockerfile:1
# The busconsole image. Default command: the ASGI web server (HTTP + websockets) on port 8000.
# The same image runs the Celery workers (one per queue: jobs, and the beat's upkeep) and beat with
# another command (see docker-compose.yml).
# Optional: --build-arg WITH_JAVA=1 adds a Java runtime for the PySpark pipeline jobs.

FROM python:3.11-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /build
COPY requirements.txt .
# Runtime dependencies only: the lines of requirements.txt above "# Tests and tooling".
RUN sed '/^# Tests and tooling/,$d' requirements.txt > runtime.txt \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install -r runtime.txt

FROM python:3.11-slim-bookworm
ARG WITH_JAVA=0
RUN if [ "$WITH_JAVA" = "1" ]; then \
        apt-get update \
        && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
 && useradd --system --uid 10001 --user-group --home-dir /app --no-create-home busconsole
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=busconsole.settings \
    DEBUG=0 \
    BUSCONSOLE_VAR_DIR=/app/var
WORKDIR /app
COPY --from=builder /opt/venv /opt/venv
COPY . .
# The SECRET_KEY here exists only for this step (settings refuse DEBUG=0 without one); it is not kept
# in the image's environment. Static files are served by WhiteNoise from /app/staticfiles.
RUN DEBUG=0 SECRET_KEY=collectstatic-only-not-a-secret python manage.py collectstatic --noinput \
 && mkdir -p /app/var/pipeline /app/var/exports \
 && chown -R busconsole:busconsole /app/var
USER busconsole
EXPOSE 8000
# GET /readyz answers without login: 200 once the database and the console's Redis answer and every
# migration is applied, else 503 (streams_app/views/health.py). It is exempt from SECURE_SSL_REDIRECT; the
# Host header is the first ALLOWED_HOSTS entry, so host validation lets the probe through.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 CMD ["python", "-c", "import os, urllib.request; host = (os.environ.get('ALLOWED_HOSTS') or 'localhost').split(',')[0].strip().lstrip('.').replace('*', '') or 'localhost'; urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:8000/readyz', headers={'Host': host}), timeout=4)"]
CMD ["uvicorn", "busconsole.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--ws", "websockets", \
     "--ws-per-message-deflate", "false"]
