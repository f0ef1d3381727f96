"""Apache Kafka 4.0's broker keys for what a single development node does not do.

TLS and SASL, authorization and delegation tokens, quotas, replication, the KRaft quorum, tiered
storage and metrics. Every key here is accepted (a Kafka ``server.properties`` loads
unchanged, and AlterConfigs takes the dynamic ones as Kafka does, stores them and reports them) and
has no effect; ``inert`` says why. Names, types, defaults, bounds and update modes are Kafka's.
The three replication throttles at the end of the quota section exist only as dynamic configs, as
in Kafka.
"""

from __future__ import annotations

from kafkalite.broker.config.keys import (
    LONG_MAX,
    NO_DELEGATION_TOKENS,
    NO_METRICS,
    NO_QUORUM,
    NO_QUOTAS,
    NO_SASL,
    NO_TELEMETRY,
    NO_TIERED_STORAGE,
    NO_TLS,
    ONE_LOOP,
    ONE_REPLICA,
    ConfigKey,
    ConfigType,
)

__all__ = ["KAFKA_SECTIONS", "PER_LISTENER_KEYS"]

_B, _S, _I, _L, _D, _LIST = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                             ConfigType.DOUBLE, ConfigType.LIST)
_SHORT, _CLASS, _PASSWORD = ConfigType.SHORT, ConfigType.CLASS, ConfigType.PASSWORD
_K = ConfigKey
_NOT_COMPARED = ("a key store changed at run time is not compared with the one before: any certificate that loads "
                 "is taken, as if both were true")


def _tls(name: str, config_type: ConfigType, default: object, doc: str,
         valid: tuple[str, ...] | None = None, inert: str | None = NO_TLS) -> ConfigKey:
    """A TLS key; Kafka lets a broker change most of them at run time, per broker."""
    return ConfigKey(name, config_type, default, doc, valid=valid, dynamic=True, per_broker=True, inert=inert)


def _sasl(name: str, config_type: ConfigType, default: object, doc: str, *, dynamic: bool = True,
          inert: str | None = NO_SASL) -> ConfigKey:
    return ConfigKey(name, config_type, default, doc, dynamic=dynamic, per_broker=dynamic, inert=inert)


def _remote(name: str, config_type: ConfigType, default: object, doc: str, *, dynamic: bool = False,
            at_least: float | None = 1) -> ConfigKey:
    return ConfigKey(name, config_type, default, doc, at_least=at_least, dynamic=dynamic, inert=NO_TIERED_STORAGE)


def _quorum(name: str, config_type: ConfigType, default: object, doc: str, at_least: float | None = None) -> ConfigKey:
    return ConfigKey(name, config_type, default, doc, at_least=at_least, inert=NO_QUORUM)


# Kafka's security keys that a broker may change only for one listener, under its prefix
# (listener.name.<listener>.<key>); unprefixed, AlterConfigs refuses them.
PER_LISTENER_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})

KAFKA_SECTIONS: tuple[str | ConfigKey, ...] = (
    "Security: TLS",
    _tls("ssl.protocol", _S, "TLSv1.3", "The TLS protocol of the SSL context: the highest version negotiated "
         "(TLSv1.2 never negotiates TLS 1.3; TLS caps nothing).", inert=None),
    _tls("ssl.enabled.protocols", _LIST, ["TLSv1.2", "TLSv1.3"], "TLS versions accepted.", inert=None),
    _tls("ssl.cipher.suites", _LIST, [], "Cipher suites accepted, by Kafka's (IANA) or OpenSSL's names (empty: "
         "OpenSSL's defaults). Without a TLS 1.3 suite, TLS 1.3 is not negotiated; TLS 1.3's own suites stay "
         "OpenSSL's defaults.", inert=None),
    _tls("ssl.provider", _S, None, "The security provider of TLS connections."),
    _tls("ssl.client.auth", _S, "none", "Whether clients must present a certificate.",
         ("required", "requested", "none"), inert=None),
    _tls("ssl.keystore.type", _S, "JKS", "Format of the key store.", inert=None),
    _tls("ssl.keystore.location", _S, None, "Path of the key store: a PEM file with the private key and the "
         "certificate chain (ssl.keystore.type=PEM; kafkalite reads PEM only).", inert=None),
    _tls("ssl.keystore.password", _PASSWORD, None, "Password of the key store.", inert=None),
    _tls("ssl.key.password", _PASSWORD, None, "Password of the private key.", inert=None),
    _tls("ssl.keystore.certificate.chain", _PASSWORD, None, "Certificate chain, in the key store's format.",
         inert=None),
    _tls("ssl.keystore.key", _PASSWORD, None, "Private key, in the key store's format.", inert=None),
    _tls("ssl.truststore.type", _S, "JKS", "Format of the trust store.", inert=None),
    _tls("ssl.truststore.location", _S, None, "Path of the trust store.", inert=None),
    _tls("ssl.truststore.password", _PASSWORD, None, "Password of the trust store."),
    _tls("ssl.truststore.certificates", _PASSWORD, None, "Trusted certificates, in the trust store's format.",
         inert=None),
    _tls("ssl.keymanager.algorithm", _S, "SunX509", "Key manager algorithm."),
    _tls("ssl.trustmanager.algorithm", _S, "PKIX", "Trust manager algorithm."),
    _tls("ssl.endpoint.identification.algorithm", _S, "https", "How a peer's host name is checked."),
    _tls("ssl.secure.random.implementation", _S, None, "Random number generator of TLS."),
    _tls("ssl.engine.factory.class", _CLASS, None, "A class that makes the TLS engines."),
    _K("ssl.principal.mapping.rules", _S, "DEFAULT",
       "Rules that map a client certificate's distinguished name to a principal: RULE:pattern/replacement/[LU] "
       "items and DEFAULT (the name as it is), the first that matches wins.", dynamic=True, per_broker=True),
    _K("ssl.allow.dn.changes", _B, False, "Allow a new certificate with another distinguished name.",
       inert=_NOT_COMPARED),
    _K("ssl.allow.san.changes", _B, False, "Allow a new certificate with other alternative names.",
       inert=_NOT_COMPARED),
    _K("security.providers", _S, None, "Classes that add security algorithm providers.", inert=NO_TLS),

    "Security: SASL",
    _sasl("sasl.enabled.mechanisms", _LIST, ["GSSAPI"], "SASL mechanisms accepted.", inert=None),
    _sasl("sasl.jaas.config", _PASSWORD, None, "JAAS login settings of SASL connections.", inert=None),
    _sasl("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI", "SASL mechanism between brokers."),
    _sasl("sasl.kerberos.service.name", _S, None, "Kerberos principal name of the broker."),
    _sasl("sasl.kerberos.kinit.cmd", _S, "/usr/bin/kinit", "Path of the kinit command."),
    _sasl("sasl.kerberos.min.time.before.relogin", _L, 60_000, "Pause of the login thread between refreshes (ms)."),
    _sasl("sasl.kerberos.principal.to.local.rules", _LIST, ["DEFAULT"], "Rules that map principals to short names."),
    _sasl("sasl.kerberos.ticket.renew.jitter", _D, 0.05, "Random jitter added to the ticket renewal time."),
    _sasl("sasl.kerberos.ticket.renew.window.factor", _D, 0.8, "Share of a ticket's life after which it is renewed."),
    _sasl("sasl.login.refresh.buffer.seconds", _SHORT, 300, "Time kept before a credential expires (seconds)."),
    _sasl("sasl.login.refresh.min.period.seconds", _SHORT, 60, "Least wait between credential refreshes (seconds)."),
    _sasl("sasl.login.refresh.window.factor", _D, 0.8, "Share of a credential's life after which it is refreshed."),
    _sasl("sasl.login.refresh.window.jitter", _D, 0.05, "Random jitter added to the refresh time."),
    _sasl("sasl.mechanism.controller.protocol", _S, "GSSAPI", "SASL mechanism towards controllers.", dynamic=False),
    _sasl("sasl.client.callback.handler.class", _CLASS, None, "Client callback handler of SASL.", dynamic=False),
    _sasl("sasl.login.callback.handler.class", _CLASS, None, "Login callback handler of SASL.", dynamic=False),
    _sasl("sasl.server.callback.handler.class", _CLASS, None, "Server callback handler of SASL.", dynamic=False),
    _sasl("sasl.login.class", _CLASS, None, "The Login implementation.", dynamic=False),
    _sasl("sasl.login.connect.timeout.ms", _I, None, "Connect timeout to an OAuth provider (ms).", dynamic=False),
    _sasl("sasl.login.read.timeout.ms", _I, None, "Read timeout from an OAuth provider (ms).", dynamic=False),
    _sasl("sasl.login.retry.backoff.ms", _L, 100, "First wait between OAuth login attempts (ms).", dynamic=False),
    _sasl("sasl.login.retry.backoff.max.ms", _L, 10_000, "Longest wait between OAuth login attempts (ms).",
          dynamic=False),
    _sasl("sasl.server.max.receive.size", _I, 524_288, "Largest frame before and during SASL authentication.",
          dynamic=False, inert=None),
    _sasl("sasl.server.authentication.timeout.ms", _I, 10_000,
          "kafkalite: how long a connection to a SASL listener may take to authenticate before it is closed (ms); "
          "0: no bound.", dynamic=False, inert=None),
    _sasl("sasl.oauthbearer.jwks.endpoint.url", _S, None, "Where the OAuth provider's keys are read.", dynamic=False),
    _sasl("sasl.oauthbearer.token.endpoint.url", _S, None, "The OAuth provider's token endpoint.", dynamic=False),
    _sasl("sasl.oauthbearer.jwks.endpoint.refresh.ms", _L, 3_600_000, "How often the OAuth keys are re-read (ms).",
          dynamic=False),
    _sasl("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", _L, 100, "First wait between key reads (ms).",
          dynamic=False),
    _sasl("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", _L, 10_000, "Longest wait between key reads (ms).",
          dynamic=False),
    _sasl("sasl.oauthbearer.clock.skew.seconds", _I, 30, "Clock difference allowed with the OAuth provider.",
          dynamic=False, inert=None),
    _sasl("sasl.oauthbearer.expected.audience", _LIST, None, "Audiences a token must name.", dynamic=False),
    _sasl("sasl.oauthbearer.expected.issuer", _S, None, "Issuer a token must name.", dynamic=False),
    _sasl("sasl.oauthbearer.scope.claim.name", _S, "scope", "Name of the scope claim.", dynamic=False),
    _sasl("sasl.oauthbearer.sub.claim.name", _S, "sub", "Name of the subject claim.", dynamic=False, inert=None),
    _K("connections.max.reauth.ms", _L, 0,
       "Longest session before a SASL client must authenticate again (ms, KIP-368); 0: sessions do not expire."),
    _K("connection.failed.authentication.delay.ms", _I, 100,
       "How long a failed SASL authentication's answer and the connection's close are held back (ms); the "
       "connection reads nothing meanwhile and still counts against max.connections. 0: answer and close at once.",
       at_least=0),
    _K("principal.builder.class", _CLASS,
       "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
       "A class that builds the principal of a connection.", dynamic=True, per_broker=True, inert=NO_SASL),

    "Authorization and delegation tokens",
    _K("authorizer.class.name", _S, "",
       "The authorizer class (empty: none, every request is allowed). "
       "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or kafka.security.authorizer.AclAuthorizer) "
       "switches ACLs on; they are kept in acls.json in the data directory."),
    _K("super.users", _S, None, "Principals allowed everything by the authorizer, User:a;User:b."),
    _K("allow.everyone.if.no.acl.found", _B, False,
       "Whether the authorizer allows an operation on a resource that no ACL covers."),
    _K("delegation.token.secret.key", _PASSWORD, None, "Secret that signs delegation tokens.",
       inert=NO_DELEGATION_TOKENS),
    _K("delegation.token.max.lifetime.ms", _L, 604_800_000, "Longest life of a delegation token (ms).",
       at_least=1, inert=NO_DELEGATION_TOKENS),
    _K("delegation.token.expiry.time.ms", _L, 86_400_000, "Life of a token before it must be renewed (ms).",
       at_least=1, inert=NO_DELEGATION_TOKENS),
    _K("delegation.token.expiry.check.interval.ms", _L, 3_600_000, "How often expired tokens are removed (ms).",
       at_least=1, inert=NO_DELEGATION_TOKENS),

    "Quotas",
    _K("quota.window.num", _I, 11, "Samples kept for client quotas.", at_least=1, inert=NO_QUOTAS),
    _K("quota.window.size.seconds", _I, 1, "Length of one client quota sample (seconds).", at_least=1,
       inert=NO_QUOTAS),
    _K("client.quota.callback.class", _CLASS, None, "A class that decides client quotas.", inert=NO_QUOTAS),
    _K("controller.quota.window.num", _I, 11, "Samples kept for controller mutation quotas.", at_least=1,
       inert=NO_QUOTAS),
    _K("controller.quota.window.size.seconds", _I, 1, "Length of one controller mutation sample (seconds).",
       at_least=1, inert=NO_QUOTAS),
    _K("replication.quota.window.num", _I, 11, "Samples kept for replication quotas.", at_least=1, inert=NO_QUOTAS),
    _K("replication.quota.window.size.seconds", _I, 1, "Length of one replication quota sample (seconds).",
       at_least=1, inert=NO_QUOTAS),
    _K("alter.log.dirs.replication.quota.window.num", _I, 11, "Samples kept for log directory move quotas.",
       at_least=1, inert=NO_QUOTAS),
    _K("alter.log.dirs.replication.quota.window.size.seconds", _I, 1,
       "Length of one log directory move quota sample (seconds).", at_least=1, inert=NO_QUOTAS),
    _K("leader.replication.throttled.rate", _L, LONG_MAX, "Replication throttle of leaders (bytes per second).",
       at_least=0, dynamic=True, inert=ONE_REPLICA),
    _K("follower.replication.throttled.rate", _L, LONG_MAX, "Replication throttle of followers (bytes per second).",
       at_least=0, dynamic=True, inert=ONE_REPLICA),
    _K("replica.alter.log.dirs.io.max.bytes.per.second", _L, LONG_MAX,
       "Throttle of replica moves between log directories (bytes per second).",
       at_least=0, dynamic=True, inert="a replica moves between log directories at once, unthrottled"),

    "Replication",
    _K("num.replica.fetchers", _I, 1, "Fetcher threads per source broker.", dynamic=True, inert=ONE_REPLICA),
    _K("num.replica.alter.log.dirs.threads", _I, None, "Threads that move replicas between log directories.",
       inert=ONE_LOOP),
    _K("replica.fetch.min.bytes", _I, 1, "Least bytes of a follower fetch answer.", inert=ONE_REPLICA),
    _K("replica.fetch.max.bytes", _I, 1_048_576, "Bytes a follower fetches per partition.", at_least=0,
       inert=ONE_REPLICA),
    _K("replica.fetch.response.max.bytes", _I, 10_485_760, "Bytes of a whole follower fetch answer.", at_least=0,
       inert=ONE_REPLICA),
    _K("replica.fetch.wait.max.ms", _I, 500, "Longest wait of a follower fetch (ms).", inert=ONE_REPLICA),
    _K("replica.fetch.backoff.ms", _I, 1000, "Pause after a follower fetch error (ms).", at_least=0,
       inert=ONE_REPLICA),
    _K("replica.lag.time.max.ms", _L, 30_000, "How long a follower may lag before it leaves the ISR (ms).",
       inert=ONE_REPLICA),
    _K("replica.socket.timeout.ms", _I, 30_000, "Socket timeout of follower fetches (ms).", inert=ONE_REPLICA),
    _K("replica.socket.receive.buffer.bytes", _I, 65_536, "Socket buffer of follower fetches.", inert=ONE_REPLICA),
    _K("replica.high.watermark.checkpoint.interval.ms", _L, 5000, "How often high watermarks are saved (ms).",
       inert="the high watermark is the log end offset, which the logs recover themselves"),
    _K("replica.selector.class", _S, None, "A class that picks the replica a consumer reads from.",
       inert=ONE_REPLICA),
    _K("auto.leader.rebalance.enable", _B, True, "Move leadership back to preferred replicas.", inert=ONE_REPLICA),
    _K("leader.imbalance.check.interval.seconds", _L, 300, "How often leadership balance is checked (seconds).",
       at_least=1, inert=ONE_REPLICA),

    "KRaft quorum and metadata log",
    _quorum("controller.quorum.voters", _LIST, [], "The voters of the quorum, id@host:port."),
    _quorum("controller.quorum.bootstrap.servers", _LIST, [], "Where the quorum is found, host:port."),
    _quorum("controller.quorum.election.timeout.ms", _I, 1000, "Wait without a leader before an election (ms)."),
    _quorum("controller.quorum.election.backoff.max.ms", _I, 1000, "Longest wait before a new election (ms)."),
    _quorum("controller.quorum.fetch.timeout.ms", _I, 2000, "Wait without a fetch before leadership is doubted (ms)."),
    _quorum("controller.quorum.append.linger.ms", _I, 25, "How long quorum writes wait to be flushed together (ms)."),
    _quorum("controller.quorum.request.timeout.ms", _I, 2000, "Timeout of quorum requests (ms)."),
    _quorum("controller.quorum.retry.backoff.ms", _I, 20, "Pause before retrying a quorum request (ms)."),
    _quorum("controller.socket.timeout.ms", _I, 30_000, "Socket timeout between controller and brokers (ms)."),
    _quorum("broker.heartbeat.interval.ms", _I, 2000, "Interval of broker heartbeats to the controller (ms)."),
    _quorum("broker.session.timeout.ms", _I, 9000, "How long a broker's lease lasts without heartbeats (ms)."),
    _quorum("initial.broker.registration.timeout.ms", _I, 60_000, "Wait for the first registration (ms)."),
    _quorum("controlled.shutdown.enable", _B, True, "Move leadership away before shutting down."),
    _quorum("metadata.log.dir", _S, None, "Directory of the metadata log (default: the first log dir)."),
    _quorum("metadata.log.segment.bytes", _I, 1024**3, "Segment size of the metadata log.", at_least=12),
    _quorum("metadata.log.segment.ms", _L, 604_800_000, "Roll time of the metadata log (ms)."),
    _quorum("metadata.log.max.record.bytes.between.snapshots", _L, 20_971_520,
            "Bytes of metadata log between snapshots.", at_least=1),
    _quorum("metadata.log.max.snapshot.interval.ms", _L, 3_600_000, "Longest time between snapshots (ms).",
            at_least=0),
    _quorum("metadata.max.retention.bytes", _L, 104_857_600, "Size of metadata log and snapshots kept."),
    _quorum("metadata.max.retention.ms", _L, 604_800_000, "Time metadata log files and snapshots are kept (ms)."),
    _quorum("metadata.max.idle.interval.ms", _I, 500, "How often an idle controller writes a no-op record (ms).",
            at_least=0),

    "Tiered storage",
    _remote("remote.log.storage.system.enable", _B, False, "Turn tiered storage on.", at_least=None),
    _remote("remote.log.storage.manager.class.name", _S, None, "The RemoteStorageManager class.", at_least=None),
    _remote("remote.log.storage.manager.class.path", _S, None, "Class path of the storage manager.",
            at_least=None),
    _remote("remote.log.storage.manager.impl.prefix", _S, "rsm.config.", "Prefix of the storage manager's keys.",
            at_least=None),
    _remote("remote.log.metadata.manager.class.name", _S,
            "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
            "The RemoteLogMetadataManager class.", at_least=None),
    _remote("remote.log.metadata.manager.class.path", _S, None, "Class path of the metadata manager.",
            at_least=None),
    _remote("remote.log.metadata.manager.impl.prefix", _S, "rlmm.config.", "Prefix of the metadata manager's keys.",
            at_least=None),
    _remote("remote.log.metadata.manager.listener.name", _S, None, "Listener the metadata manager connects to.",
            at_least=None),
    _remote("remote.log.metadata.custom.metadata.max.bytes", _I, 128, "Largest custom metadata of a segment.",
            at_least=0),
    _remote("remote.log.manager.task.interval.ms", _L, 30_000, "How often segments are copied and cleaned (ms)."),
    _remote("remote.log.manager.thread.pool.size", _I, 2, "Threads of follower tasks."),
    _remote("remote.log.manager.copier.thread.pool.size", _I, 10, "Threads that copy segments.", dynamic=True),
    _remote("remote.log.manager.expiration.thread.pool.size", _I, 10, "Threads that delete expired segments.",
            dynamic=True),
    _remote("remote.log.manager.copy.max.bytes.per.second", _L, LONG_MAX, "Throttle of copies (bytes per second).",
            dynamic=True),
    _remote("remote.log.manager.copy.quota.window.num", _I, 11, "Samples kept for the copy throttle."),
    _remote("remote.log.manager.copy.quota.window.size.seconds", _I, 1, "Length of one copy sample (seconds)."),
    _remote("remote.log.manager.fetch.max.bytes.per.second", _L, LONG_MAX,
            "Throttle of remote reads (bytes per second).", dynamic=True),
    _remote("remote.log.manager.fetch.quota.window.num", _I, 11, "Samples kept for the read throttle."),
    _remote("remote.log.manager.fetch.quota.window.size.seconds", _I, 1, "Length of one read sample (seconds)."),
    _remote("remote.log.reader.threads", _I, 10, "Threads that read remote segments.", dynamic=True),
    _remote("remote.log.reader.max.pending.tasks", _I, 100, "Remote reads that may wait for a thread."),
    _remote("remote.log.index.file.cache.total.size.bytes", _L, 1024**3, "Local space for cached remote indexes.",
            dynamic=True),
    _remote("remote.fetch.max.wait.ms", _I, 500, "Longest wait of a remote fetch (ms).", dynamic=True),
    _remote("remote.list.offsets.request.timeout.ms", _L, 30_000, "Timeout of a remote offset lookup (ms).",
            dynamic=True),
    _remote("log.local.retention.ms", _L, -2, "Time local segments are kept (-2: retention.ms).", dynamic=True,
            at_least=-2),
    _remote("log.local.retention.bytes", _L, -2, "Bytes of local segments kept (-2: retention.bytes).",
            dynamic=True, at_least=-2),

    "Metrics and telemetry",
    _K("metric.reporters", _LIST, ["org.apache.kafka.common.metrics.JmxReporter"], "Classes that report metrics.",
       dynamic=True, inert=NO_METRICS),
    _K("metrics.num.samples", _I, 2, "Samples of each metric.", at_least=1, inert=NO_METRICS),
    _K("metrics.sample.window.ms", _L, 30_000, "Length of one metric sample (ms).", at_least=1, inert=NO_METRICS),
    _K("metrics.recording.level", _S, "INFO", "Which metrics are recorded.", inert=NO_METRICS),
    _K("kafka.metrics.reporters", _LIST, [], "Classes that report Yammer metrics.", inert=NO_METRICS),
    _K("kafka.metrics.polling.interval.secs", _I, 10, "Polling interval of Yammer reporters (seconds).",
       at_least=1, inert=NO_METRICS),
    _K("telemetry.max.bytes", _I, 1_048_576, "Largest telemetry push from a client.", at_least=1,
       inert=NO_TELEMETRY),
)
