"""A throwaway certificate authority for the TLS tests (the `cryptography` package): a CA, server
certificates for loopback (SAN 127.0.0.1 and localhost) and client certificates, written as PEM files the way
`ssl.keystore.location` (key and chain in one file) and `ssl.truststore.location` (CA certificates) read them."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common_name: str, organizational_unit: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COUNTRY_NAME, "XX"),
                  x509.NameAttribute(NameOID.ORGANIZATION_NAME, "odradek tests")]
    if organizational_unit:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, organizational_unit))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


@dataclass
class Issued:
    key_pem: bytes
    cert_pem: bytes

    def keystore(self, path: Path, password: bytes | None = None) -> Path:
        """Key and certificate in one PEM file (the key encrypted with ``password``, if given)."""
        if password is not None:
            key = serialization.load_pem_private_key(self.key_pem, None)
            key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.BestAvailableEncryption(password))
        else:
            key_pem = self.key_pem
        path.write_bytes(key_pem + self.cert_pem)
        return path

    def cert_file(self, path: Path) -> Path:
        path.write_bytes(self.cert_pem)
        return path

    def key_file(self, path: Path) -> Path:
        path.write_bytes(self.key_pem)
        return path


class TestCA:
    __test__ = False  # not a test class, for pytest

    def __init__(self, name: str = "odradek test CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.name = _name(name)
        self.cert = (
            x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def truststore(self, path: Path) -> Path:
        path.write_bytes(self.cert_pem)
        return path

    def issue(self, common_name: str, server: bool = False, organizational_unit: str | None = None) -> Issued:
        """A certificate for a server on loopback (``server``) or a client named ``common_name``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (
            x509.CertificateBuilder().subject_name(_name(common_name, organizational_unit))
            .issuer_name(self.name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            # a broker's certificate serves both sides: its listeners, and its connections to other brokers
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                                                 if server else [ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        )
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return Issued(key_pem, cert.public_bytes(serialization.Encoding.PEM))
