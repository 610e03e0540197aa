# relmon: one image for `relmon bot`, `relmon worker`, `relmon beat` and `relmon migrate`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RELMON_DATA_DIR=/data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY workers ./workers
COPY judges ./judges
COPY store ./store
COPY capture ./capture
COPY common ./common
COPY relmon ./relmon
COPY topics ./topics
COPY golden ./golden
RUN pip install . \
 && useradd --create-home --uid 10001 relmon \
 && mkdir -p /data \
 && chown relmon:relmon /data

USER relmon
VOLUME ["/data"]
EXPOSE 3000

# The bot answers /healthz on 3000 in HTTP and Socket Mode alike (Redis reachable; in Socket Mode also the
# connection to Slack up); compose replaces this check with `relmon ping worker|beat` for those.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:3000/healthz', timeout=4)"

CMD ["relmon", "bot", "--port", "3000"]
