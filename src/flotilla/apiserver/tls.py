"""Serving certificates for the Flotilla API server.

A small private CA lives under ``<data_dir>/pki``; it signs the serving certificate (with IP/DNS subject
alternative names, which is what Go clients such as kubectl check) and, on request, client certificates whose
subject maps to a user (CN) and groups (O), as Kubernetes' x509 authenticator does.

The certificates are built to pass strict X.509 verification (Python 3.13+ ``VERIFY_X509_STRICT``): the CA has
a critical ``basicConstraints CA:TRUE`` and ``keyUsage keyCertSign``; every leaf carries
``authorityKeyIdentifier`` and ``subjectKeyIdentifier``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from flotilla.files import atomic_write, make_private, private_dir

__all__ = [
    "DEFAULT_HOSTS",
    "CertPaths",
    "atomic_write",
    "ensure_serving_certs",
    "issue_client_cert",
    "server_ssl_context",
]

DEFAULT_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost")

CA_COMMON_NAME = "flotilla-ca"
SERVER_COMMON_NAME = "flotilla-apiserver"

CA_VALIDITY = dt.timedelta(days=3650)
SERVER_VALIDITY = dt.timedelta(days=825)
CLIENT_VALIDITY = dt.timedelta(days=365)
# A certificate expiring sooner than this is considered stale and reissued.
RENEW_BEFORE = dt.timedelta(days=30)
# Backdate notBefore a little to tolerate clock skew between processes/hosts.
CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class CertPaths:
    """Locations of the PKI files (all PEM)."""

    dir: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path

    @classmethod
    def under(cls, pki_dir: Path) -> CertPaths:
        return cls(
            dir=pki_dir,
            ca_cert=pki_dir / "ca.crt",
            ca_key=pki_dir / "ca.key",
            server_cert=pki_dir / "apiserver.crt",
            server_key=pki_dir / "apiserver.key",
        )

    def ca_pem(self) -> bytes:
        """The CA certificate, e.g. for ``certificate-authority-data`` in a kubeconfig."""
        return self.ca_cert.read_bytes()


# --------------------------------------------------------------------------------------------- file helpers


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _san_entries(hosts: Iterable[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    seen: set[str] = set()
    for raw in hosts:
        host = raw.strip()
        if host.startswith("[") and host.endswith("]"):  # bracketed IPv6 literal
            host = host[1:-1]
        if not host or host in seen:
            continue
        seen.add(host)
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            out.append(x509.DNSName(host.lower()))
    return out


def _san_key(name: x509.GeneralName) -> tuple[str, str]:
    if isinstance(name, x509.IPAddress):
        return ("ip", str(name.value))
    if isinstance(name, x509.DNSName):
        return ("dns", name.value.lower())
    return ("other", repr(name))


# --------------------------------------------------------------------------------------------- generation


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, now: dt.datetime, not_after: dt.datetime,
    *, ca: bool,
) -> x509.CertificateBuilder:
    """What a CA and a leaf certificate share: names, key, serial, validity, basic constraints and key usage (a
    CA signs certificates; a leaf only signs its handshakes)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def _make_ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_COMMON_NAME)])
    now = _now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        _builder(name, name, key, now, now + CA_VALIDITY, ca=True)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _sign_leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    *,
    server: bool,
    sans: Sequence[x509.GeneralName] = (),
    validity: dt.timedelta,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    now = _now()
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    builder = (
        _builder(subject, ca_cert.subject, key, now, not_after, ca=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(_authority_key_id(ca_cert), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _authority_key_id(ca_cert: x509.Certificate) -> x509.AuthorityKeyIdentifier:
    try:
        ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key())  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------- validation


def _load_pair(cert_path: Path, key_path: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    """Load a certificate + key pair; None if missing, unreadable, unsupported, or the key does not match."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        return None
    pub = cert.public_key()
    if (
        not isinstance(pub, ec.EllipticCurvePublicKey)
        or pub.public_numbers() != key.public_key().public_numbers()
    ):
        return None
    return cert, key


def _time_ok(cert: x509.Certificate) -> bool:
    now = _now()
    return cert.not_valid_before_utc <= now + CLOCK_SKEW and cert.not_valid_after_utc - RENEW_BEFORE > now


def _ca_ok(cert: x509.Certificate) -> bool:
    if not _time_ok(cert):
        return False
    try:
        bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
        ku = cert.extensions.get_extension_for_class(x509.KeyUsage)
    except x509.ExtensionNotFound:
        return False
    return bool(bc.critical and bc.value.ca and ku.value.key_cert_sign)


def _server_ok(cert: x509.Certificate, ca_cert: x509.Certificate, hosts: Sequence[str]) -> bool:
    if not _time_ok(cert):
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (InvalidSignature, ValueError, TypeError):
        return False
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier)
    except x509.ExtensionNotFound:
        return False
    have = {_san_key(n) for n in san}
    want = {_san_key(n) for n in _san_entries(hosts)}
    return want <= have


# --------------------------------------------------------------------------------------------- public API


def ensure_serving_certs(data_dir: Path, hosts: Sequence[str] = DEFAULT_HOSTS) -> CertPaths:
    """Make sure ``data_dir/pki`` holds a CA and a serving certificate valid for ``hosts``.

    Existing files are reused when valid: the CA is kept whenever it is intact and not about to expire (so
    kubeconfigs that embed it keep working); the serving certificate is reissued from that CA when it is
    missing, expiring, not signed by the CA, or lacks a SAN for one of ``hosts``. Keys and certificates are written
    0600 in a 0700 directory (the kubeconfigs embed the CA; nobody else needs to read these files).
    """
    paths = CertPaths.under(Path(data_dir) / "pki")
    private_dir(paths.dir)
    host_list = [h for h in hosts if h.strip()] or list(DEFAULT_HOSTS)

    ca = _load_pair(paths.ca_cert, paths.ca_key)
    if ca is None or not _ca_ok(ca[0]):
        ca_cert, ca_key = _make_ca()
        # Key first: a crash in between leaves a mismatched pair, which the next run detects and replaces.
        atomic_write(paths.ca_key, _key_pem(ca_key), 0o600)
        atomic_write(paths.ca_cert, _cert_pem(ca_cert), 0o600)
        server = None
    else:
        ca_cert, ca_key = ca
        server = _load_pair(paths.server_cert, paths.server_key)

    if server is None or not _server_ok(server[0], ca_cert, host_list):
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVER_COMMON_NAME)])
        cert, key = _sign_leaf(
            ca_cert, ca_key, subject, server=True, sans=_san_entries(host_list), validity=SERVER_VALIDITY
        )
        atomic_write(paths.server_key, _key_pem(key), 0o600)
        atomic_write(paths.server_cert, _cert_pem(cert), 0o600)
    else:
        for p in (paths.ca_key, paths.server_key, paths.ca_cert, paths.server_cert):
            make_private(p)  # keep them the owner's even if someone (or an older version) loosened them
    return paths


def issue_client_cert(
    paths: CertPaths, user: str, groups: Iterable[str] = (), *, validity: dt.timedelta = CLIENT_VALIDITY
) -> tuple[bytes, bytes]:
    """Issue a client certificate (CN=user, one O per group) signed by the CA: returns (cert_pem, key_pem)."""
    if not user:
        raise ValueError("client certificate needs a non-empty user name")
    loaded = _load_pair(paths.ca_cert, paths.ca_key)
    if loaded is None:
        raise ValueError(f"no usable CA under {paths.dir}; call ensure_serving_certs first")
    ca_cert, ca_key = loaded
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups if g]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    cert, key = _sign_leaf(ca_cert, ca_key, x509.Name(attrs), server=False, validity=validity)
    return _cert_pem(cert), _key_pem(key)


def server_ssl_context(paths: CertPaths, *, client_auth: bool = True) -> ssl.SSLContext:
    """TLS server context (HTTP/1.1 via ALPN) for the API server.

    With ``client_auth`` the server asks for (but does not require) a client certificate and verifies it against
    the CA; aiohttp then exposes the verified subject as ``request.transport.get_extra_info("peercert")``. A
    client certificate from another CA fails the handshake (Kubernetes would instead answer 401).
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(paths.server_cert), str(paths.server_key))
    ctx.set_alpn_protocols(["http/1.1"])
    if client_auth:
        ctx.load_verify_locations(cafile=str(paths.ca_cert))
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx
