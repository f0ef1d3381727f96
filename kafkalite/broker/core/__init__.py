"""Broker state with no sockets: topics, partition logs, groups, producer state, transactions."""
