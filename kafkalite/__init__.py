"""kafkalite: a single-node broker that speaks the Apache Kafka wire protocol, and its client.

``kafkalite.protocol`` is the sans-io codec, ``kafkalite.broker`` the server and
``kafkalite.client`` the bundled client. Importing this package imports none of them.
"""

__version__ = "0.1.0"
