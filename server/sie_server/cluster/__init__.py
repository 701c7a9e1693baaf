"""Cluster mode: a stateless gateway publishes work to NATS JetStream; ordinary servers pull it as workers."""
