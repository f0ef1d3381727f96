"""Security without sockets: principal mapping, JAAS, SCRAM (RFC 7677's example), PLAIN, OAUTHBEARER,
the SASL state machine, ACL matching and the authorizer's decisions."""

from __future__ import annotations

import base64
import json

import pytest

from kafkalite.broker.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclStore,
    PatternType,
    ResourceType,
    binding,
    binding_filter,
)
from kafkalite.broker.security.authorizer import Authorizer
from kafkalite.broker.security.jaas import parse_jaas
from kafkalite.broker.security.principal import KafkaPrincipal, NoMatchingRule, SslPrincipalMapper, distinguished_name
from kafkalite.broker.security.sasl import AuthenticationFailed, SaslAuthenticator, SaslSettings, SaslState
from kafkalite.broker.security.scram import (
    ScramCredentials,
    ScramExchange,
    ScramFailure,
    derive_credential,
    salted_password,
)
from kafkalite.protocol.errors import ErrorCode

ALICE = KafkaPrincipal.user("alice")


# principals ------------------------------------------------------------------------------------
def test_distinguished_name_is_written_last_rdn_first_with_escapes() -> None:
    certificate = {"subject": ((("countryName", "US"),), (("organizationName", "Acme, Inc."),),
                               (("commonName", "alice"),))}
    assert distinguished_name(certificate) == "CN=alice,O=Acme\\, Inc.,C=US"


@pytest.mark.parametrize(("rules", "name", "expected"), [
    ("DEFAULT", "CN=alice,O=Acme", "CN=alice,O=Acme"),
    ("RULE:^CN=(.*?),O=(.*?)$/$1@$2/L,DEFAULT", "CN=Alice,O=Acme", "alice@acme"),
    ("RULE:^CN=(.*?),.*$/$1/U, DEFAULT", "CN=bob,OU=x,O=y", "BOB"),
    ("RULE:^CN=admin$/superuser/,DEFAULT", "CN=alice", "CN=alice"),
    ("RULE:^.*OU=(.*?),.*$/$1\\/team/", "CN=a,OU=dev,O=b", "dev/team"),
])
def test_ssl_principal_mapping_rules(rules: str, name: str, expected: str) -> None:
    assert SslPrincipalMapper.parse(rules).name(name) == expected


def test_no_matching_rule_and_bad_rules() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper.parse("RULE:^CN=admin$/superuser/").name("CN=alice")
    with pytest.raises(ValueError):
        SslPrincipalMapper.parse("RULE:nothing")


# JAAS --------------------------------------------------------------------------------------
def test_jaas_plain_users() -> None:
    [entry] = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                         'password="admin-secret" user_admin="admin-secret" user_alice="p\\"w;=";')
    assert entry.login_module.endswith("PlainLoginModule") and entry.flag == "required"
    assert entry.options["user_alice"] == 'p"w;=' and entry.options["user_admin"] == "admin-secret"
    with pytest.raises(ValueError):
        parse_jaas('org.example.Module required user_a="x"')  # no closing semicolon


# SCRAM --------------------------------------------------------------------------------------
def test_scram_sha_256_rfc_7677_example() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = derive_credential("SCRAM-SHA-256", salted_password("SCRAM-SHA-256", "pencil", salt, 4096), salt, 4096)
    exchange = ScramExchange("SCRAM-SHA-256", lambda user, mechanism: credential if user == "user" else None,
                             server_nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server_first = exchange.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    server_final = exchange.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                 b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert exchange.complete and exchange.user == "user"


def test_scram_wrong_proof_and_unknown_user_fail_alike() -> None:
    salt = b"0123456789abcdef"
    credential = derive_credential("SCRAM-SHA-512", salted_password("SCRAM-SHA-512", "pw", salt, 4096), salt, 4096)
    for user in ("alice", "nobody"):
        exchange = ScramExchange("SCRAM-SHA-512", lambda name, mechanism: credential if name == "alice" else None)
        first = exchange.step(f"n,,n={user},r=abc".encode()).decode()
        assert ",s=" in first and ",i=" in first  # an unknown user gets a salt too
        nonce = first.split(",")[0][2:]
        with pytest.raises(ScramFailure):
            exchange.step(f"c=biws,r={nonce},p={base64.b64encode(bytes(64)).decode()}".encode())


def test_scram_credentials_survive_a_reload(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = ScramCredentials(tmp_path)
    credential = derive_credential("SCRAM-SHA-256", b"x" * 32, b"salt", 8192)
    store.set("alice", "SCRAM-SHA-256", credential)
    store.save()
    again = ScramCredentials(tmp_path)
    again.load()
    assert again.get("alice", "SCRAM-SHA-256") == credential and again.users() == ["alice"]
    assert "x" * 8 not in (tmp_path / "scram-credentials.json").read_text()


# the SASL state machine ---------------------------------------------------------------------------
def _settings(**more: object) -> SaslSettings:
    values: dict[str, object] = {"mechanisms": ("PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"),
                                 "plain_users": {"alice": "alice-secret"}, "scram": ScramCredentials(None)}
    values.update(more)
    return SaslSettings(**values)  # type: ignore[arg-type]


def test_plain_accepts_the_configured_user_and_refuses_without_saying_why() -> None:
    authenticator = SaslAuthenticator(_settings(), lambda: 0)
    assert authenticator.handshake("GSSAPI") == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert authenticator.handshake("PLAIN") == ErrorCode.NONE
    assert authenticator.authenticate(b"\x00alice\x00alice-secret") == (b"", 0)
    assert authenticator.state is SaslState.AUTHENTICATED and authenticator.principal == ALICE
    messages = set()
    for token in (b"\x00alice\x00wrong", b"\x00mallory\x00alice-secret", b"garbage"):
        failing = SaslAuthenticator(_settings(), lambda: 0)
        failing.handshake("PLAIN")
        with pytest.raises(AuthenticationFailed) as refused:
            failing.authenticate(token)
        messages.add(refused.value.client_message)
        assert failing.state is SaslState.FAILED
    assert messages == {"Authentication failed: Invalid username or password"}


def test_reauthentication_keeps_the_mechanism_and_principal_and_gives_a_session_lifetime() -> None:
    authenticator = SaslAuthenticator(_settings(plain_users={"alice": "a", "bob": "b"}, reauth_ms=60_000),
                                      lambda: 1_000)
    authenticator.handshake("PLAIN")
    assert authenticator.authenticate(b"\x00alice\x00a") == (b"", 60_000)
    assert authenticator.session_expires_at_ms == 61_000
    assert authenticator.handshake("SCRAM-SHA-256") == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert authenticator.handshake("PLAIN") == ErrorCode.NONE
    with pytest.raises(AuthenticationFailed):
        authenticator.authenticate(b"\x00bob\x00b")


def _unsecured_token(claims: dict[str, object]) -> bytes:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return f"n,,\x01auth=Bearer {part({'alg': 'none'})}.{part(claims)}.\x01\x01".encode()


def test_oauthbearer_unsecured_tokens() -> None:
    now_ms = 1_700_000_000_000
    authenticator = SaslAuthenticator(_settings(reauth_ms=3_600_000), lambda: now_ms)
    authenticator.handshake("OAUTHBEARER")
    _, lifetime = authenticator.authenticate(_unsecured_token({"sub": "alice", "exp": now_ms / 1000 + 60}))
    assert authenticator.principal == ALICE and lifetime == 60_000  # no longer than the token lives
    expired = SaslAuthenticator(_settings(), lambda: now_ms)
    expired.handshake("OAUTHBEARER")
    with pytest.raises(AuthenticationFailed):
        expired.authenticate(_unsecured_token({"sub": "alice", "exp": now_ms / 1000 - 600}))


# ACLs and the authorizer ---------------------------------------------------------------------------
def _acl(resource_type: ResourceType, name: str, operation: AclOperation, *, principal: str = "User:alice",
         permission: AclPermissionType = AclPermissionType.ALLOW, pattern: PatternType = PatternType.LITERAL,
         host: str = "*") -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def test_authorizer_rules() -> None:
    store = AclStore(None)
    store.add([
        _acl(ResourceType.TOPIC, "orders", AclOperation.READ),
        _acl(ResourceType.TOPIC, "pay", AclOperation.WRITE, pattern=PatternType.PREFIXED),
        _acl(ResourceType.TOPIC, "payroll", AclOperation.WRITE, permission=AclPermissionType.DENY),
        _acl(ResourceType.TOPIC, "logs", AclOperation.ALL, principal="User:*", host="10.0.0.1"),
        _acl(ResourceType.GROUP, "*", AclOperation.READ),
    ])
    authorizer = Authorizer(store, ["User:admin"])
    allowed = authorizer.authorize
    topic, group = ResourceType.TOPIC, ResourceType.GROUP
    assert allowed(ALICE, "1.2.3.4", AclOperation.READ, topic, "orders")
    assert allowed(ALICE, "1.2.3.4", AclOperation.DESCRIBE, topic, "orders")  # implied by READ
    assert not allowed(ALICE, "1.2.3.4", AclOperation.WRITE, topic, "orders")
    assert allowed(ALICE, "1.2.3.4", AclOperation.WRITE, topic, "payments")  # prefixed
    assert not allowed(ALICE, "1.2.3.4", AclOperation.WRITE, topic, "payroll")  # DENY beats ALLOW
    assert allowed(KafkaPrincipal.user("bob"), "10.0.0.1", AclOperation.WRITE, topic, "logs")
    assert not allowed(KafkaPrincipal.user("bob"), "10.0.0.2", AclOperation.WRITE, topic, "logs")  # host filter
    assert allowed(ALICE, "h", AclOperation.READ, group, "any-group")  # literal wildcard
    assert not allowed(ALICE, "h", AclOperation.READ, topic, "no-acl")
    assert allowed(KafkaPrincipal.user("admin"), "h", AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    assert Authorizer(store, [], allow_if_no_acl_found=True).authorize(ALICE, "h", AclOperation.READ, topic, "no-acl")
    assert allowed(ALICE, "h", AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, "kafka-cluster")  # WRITE on pay*
    bits = authorizer.authorized_operations(ALICE, "h", topic, "orders")
    assert bits == (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)


def test_acl_filters_and_durability(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = AclStore(tmp_path)
    store.add([_acl(ResourceType.TOPIC, "orders", AclOperation.READ),
               _acl(ResourceType.TOPIC, "ord", AclOperation.WRITE, pattern=PatternType.PREFIXED),
               _acl(ResourceType.GROUP, "g", AclOperation.READ, principal="User:bob")])
    match = binding_filter(ResourceType.TOPIC, "orders", PatternType.MATCH, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    assert len(store.matching(match)) == 2
    literal = binding_filter(ResourceType.ANY, None, PatternType.LITERAL, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert len(store.matching(literal)) == 2
    reloaded = AclStore(tmp_path)
    reloaded.load()
    assert list(reloaded) == list(store)
    removed = reloaded.remove_matching(binding_filter(ResourceType.ANY, None, PatternType.ANY, "User:bob", None,
                                                      AclOperation.ANY, AclPermissionType.ANY))
    assert [acl.principal for acl in removed] == ["User:bob"]
    again = AclStore(tmp_path)
    again.load()
    assert len(again) == 2


def test_acl_creation_checks() -> None:
    assert binding(2, "t", 3, "User:a", "*", 3, 3).check() is None
    assert binding(4, "other", 3, "User:a", "*", 7, 3).check() is not None  # the cluster is kafka-cluster
    assert binding(2, "t", 1, "User:a", "*", 3, 3).check() is not None  # ANY is a filter, not a pattern
    assert binding(2, "t", 3, "alice", "*", 3, 3).check() is not None  # no principal type
    assert binding(2, "t", 3, "User:a", "*", 1, 3).check() is not None  # operation ANY
