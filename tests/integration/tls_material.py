"""Certificates for the TLS tests, made with the openssl command line (Debian's `openssl`).

One CA signs a broker certificate (SAN IP:127.0.0.1 and DNS:localhost, so clients that
check the host name accept it) and a client certificate (CN=shardlog-client, for mutual
TLS). The files come in the shapes Kafka's settings take: PEM key stores (the private
key, encrypted PKCS#8 when a password is given, then the certificate chain), PKCS12 key
stores, and PEM or PKCS12 trust stores.
"""
import subprocess
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "shardlog-secret"


@dataclass
class TlsMaterial:
    dir: Path
    ca_pem: Path            # the CA certificate: a PEM trust store
    ca_p12: Path            # the CA certificate as a PKCS12 trust store (PASSWORD)
    broker_pem: Path        # unencrypted PKCS#8 key + certificate + CA certificate
    broker_pem_encrypted: Path  # the same with the key encrypted (PBES2, AES-256; PASSWORD)
    broker_p12: Path        # PKCS12 key store (PASSWORD)
    broker_key: Path        # the broker's key, unencrypted PKCS#8
    broker_cert: Path       # the broker's certificate alone
    client_key: Path        # the client's key, unencrypted (librdkafka's ssl.key.location)
    client_cert: Path       # the client's certificate (ssl.certificate.location)
    client_p12: Path        # the client's PKCS12 key store (Java's ssl.keystore.*)
    other_ca_pem: Path      # a CA that signed nothing here (a client trusting it must fail)
    stranger_key: Path      # a client key and certificate signed by the other CA
    stranger_cert: Path
    node_pem: Path          # a cluster node's PEM key store: server and client certificate
                            # (CN=shardlog-node,O=shardlog; SAN 127.0.0.1), for mutual TLS between nodes
    node_p12: Path          # the same as PKCS12 (PASSWORD), for Kafka
    intruder_node_pem: Path  # a node certificate the right CA signed, for CN=intruder (not a super user)
    rogue_node_pem: Path    # a node certificate signed by the other CA (not trusted)


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"openssl {' '.join(args)} failed: {r.stderr}"


def _ca(d: Path, name: str) -> tuple[Path, Path]:
    key, cert = d / f"{name}.key", d / f"{name}.pem"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
             "-days", "30", "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    return key, cert


def _signed(d: Path, name: str, subject: str, ca_key: Path, ca_cert: Path, ext: str) -> tuple[Path, Path]:
    key, csr, cert, extfile = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.crt", d / f"{name}.ext"
    extfile.write_text(ext)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", subject, cwd=d)
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", "30", "-extfile", str(extfile), cwd=d)
    return key, cert


NODE_SUBJECT = "/CN=shardlog-node/O=shardlog"
# The principals those subjects map to (RFC 2253 lists the last RDN first, as Kafka does).
NODE_PRINCIPAL = "User:O=shardlog,CN=shardlog-node"
CLIENT_PRINCIPAL = "User:O=shardlog,OU=tests,CN=shardlog-client"


def _node_store(d: Path, name: str, subject: str, ca_key: Path, ca_cert: Path) -> tuple[Path, Path]:
    """A node's certificate (server and client: nodes are both to each other) as a PEM
    key store (PKCS#8 key, certificate, CA) and a PKCS12 one (PASSWORD)."""
    k, c = _signed(d, name, subject, ca_key, ca_cert,
                   "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
    pkcs8 = d / f"{name}.pkcs8.key"
    _openssl("pkcs8", "-topk8", "-nocrypt", "-in", str(k), "-out", str(pkcs8), cwd=d)
    pem = d / f"{name}-keystore.pem"
    pem.write_text(pkcs8.read_text() + c.read_text() + ca_cert.read_text())
    p12 = d / f"{name}.p12"
    _openssl("pkcs12", "-export", "-inkey", str(k), "-in", str(c), "-certfile", str(ca_cert),
             "-name", name, "-out", str(p12), "-passout", f"pass:{PASSWORD}", cwd=d)
    return pem, p12


@dataclass
class ClusterTls:
    """What `scripts/cluster.sh start --secure` needs (openssl only, no Java)."""
    ca_pem: Path
    node_pem: Path
    client_key: Path
    client_cert: Path
    client_pem: Path  # PKCS#8 key + certificate: Java's ssl.keystore.type=PEM


def make_cluster(d: Path) -> ClusterTls:
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca_pem = _ca(d, "ca")
    node_pem, _ = _node_store(d, "node", NODE_SUBJECT, ca_key, ca_pem)
    client_key, client_cert = _signed(
        d, "client", "/CN=shardlog-client/OU=tests/O=shardlog", ca_key, ca_pem, "extendedKeyUsage=clientAuth\n")
    pkcs8 = d / "client.pkcs8.key"
    _openssl("pkcs8", "-topk8", "-nocrypt", "-in", str(client_key), "-out", str(pkcs8), cwd=d)
    client_pem = d / "client-keystore.pem"
    client_pem.write_text(pkcs8.read_text() + client_cert.read_text())
    return ClusterTls(ca_pem, node_pem, client_key, client_cert, client_pem)


def make(d: Path) -> TlsMaterial:
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca_pem = _ca(d, "ca")
    other_key, other_pem = _ca(d, "other-ca")
    broker_key, broker_cert = _signed(
        d, "broker", "/CN=localhost/O=shardlog", ca_key, ca_pem,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    client_key, client_cert = _signed(
        d, "client", "/CN=shardlog-client/OU=tests/O=shardlog", ca_key, ca_pem, "extendedKeyUsage=clientAuth\n")
    stranger_key, stranger_cert = _signed(
        d, "stranger", "/CN=stranger", other_key, other_pem, "extendedKeyUsage=clientAuth\n")
    # PEM key store as Kafka's ssl.keystore.type=PEM reads it: encrypted PKCS#8 key, chain.
    enc_key = d / "broker.enc.key"
    _openssl("pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", str(broker_key), "-out", str(enc_key),
             "-passout", f"pass:{PASSWORD}", cwd=d)
    broker_pem_encrypted = d / "broker-keystore-encrypted.pem"
    broker_pem_encrypted.write_text(enc_key.read_text() + broker_cert.read_text() + ca_pem.read_text())
    plain_key = d / "broker.pkcs8.key"
    _openssl("pkcs8", "-topk8", "-nocrypt", "-in", str(broker_key), "-out", str(plain_key), cwd=d)
    broker_pem = d / "broker-keystore.pem"
    broker_pem.write_text(plain_key.read_text() + broker_cert.read_text() + ca_pem.read_text())
    broker_p12 = d / "broker.p12"
    _openssl("pkcs12", "-export", "-inkey", str(broker_key), "-in", str(broker_cert), "-certfile", str(ca_pem),
             "-name", "broker", "-out", str(broker_p12), "-passout", f"pass:{PASSWORD}", cwd=d)
    client_p12 = d / "client.p12"
    _openssl("pkcs12", "-export", "-inkey", str(client_key), "-in", str(client_cert), "-certfile", str(ca_pem),
             "-name", "client", "-out", str(client_p12), "-passout", f"pass:{PASSWORD}", cwd=d)
    ca_p12 = d / "ca.p12"
    # A trust store: certificates only, as Java's keytool writes them (trusted entries).
    r = subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem),
                        "-keystore", str(ca_p12), "-storetype", "PKCS12", "-storepass", PASSWORD],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"keytool -importcert failed: {r.stdout}{r.stderr}"
    node_pem, node_p12 = _node_store(d, "node", NODE_SUBJECT, ca_key, ca_pem)
    intruder_node_pem, _ = _node_store(d, "intruder", "/CN=intruder/O=shardlog", ca_key, ca_pem)
    rogue_node_pem, _ = _node_store(d, "rogue", NODE_SUBJECT, other_key, other_pem)
    return TlsMaterial(d, ca_pem, ca_p12, broker_pem, broker_pem_encrypted, broker_p12, plain_key, broker_cert,
                       client_key, client_cert, client_p12, other_pem, stranger_key, stranger_cert,
                       node_pem, node_p12, intruder_node_pem, rogue_node_pem)
