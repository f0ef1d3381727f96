FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY kafkalite ./kafkalite
COPY config ./config
RUN pip install --no-cache-dir .
EXPOSE 9092
VOLUME ["/data"]
CMD ["kafkalite", "serve", "--config", "config/server.properties", "--data-dir", "/data", \
     "--listeners", "PLAINTEXT://0.0.0.0:9092", "--advertised-listeners", "PLAINTEXT://localhost:9092"]
