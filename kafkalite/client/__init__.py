"""The bundled asyncio Kafka client."""
