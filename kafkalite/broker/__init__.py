"""kafkalite's broker: a single-node server for the Apache Kafka wire protocol."""
