# kafkalite in a container: a slim Python base, a non-root user, Kafka's port, the data in a volume.
#
# Two listeners: PLAINTEXT on 9092 for clients on the host (published as localhost:9092) and INTERNAL
# on 29092 for other containers of a compose network (advertised as kafkalite:29092). The settings
# are environment variables, so `docker run -e` or a compose file can change them.
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY kafkalite ./kafkalite
COPY config ./config
RUN pip install --no-cache-dir . \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin kafkalite \
    && mkdir -p /data \
    && chown kafkalite /data

ENV KAFKALITE_LOG_DIRS=/data \
    KAFKALITE_LISTENERS=PLAINTEXT://0.0.0.0:9092,INTERNAL://0.0.0.0:29092 \
    KAFKALITE_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT \
    KAFKALITE_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092,INTERNAL://kafkalite:29092

USER kafkalite
EXPOSE 9092 29092
VOLUME ["/data"]
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
    CMD ["kafkalite", "check", "--bootstrap-server", "localhost:9092"]
CMD ["kafkalite", "serve", "--config", "config/server.properties"]
