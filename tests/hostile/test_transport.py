"""The forwarder's transport against hostile remotes: bad certificates, redirects, plain HTTP.

A real TLS aiohttp server on 127.0.0.1 records every request that reaches it. The client runs
in a child process whose trust store holds only the test CA (``SSL_CERT_FILE``), so the one
good certificate is trusted and each bad one fails for its own reason. The good one is the
control: it proves a request does arrive when the certificate is right.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mplp_lsp.config.settings import Settings
from mplp_lsp.forward.remote import RemoteConfigError, resolve_remote

SERVER = Path(__file__).resolve().parents[2] / "server"
CANARY = "canary-transport-9f8e7d6c5b4a"
NOW = dt.datetime.now(dt.UTC)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[str, ec.EllipticCurvePrivateKey] | None,
    *,
    hosts: list[str],
    days: tuple[int, int] = (-1, 30),
    ca: bool = False,
) -> x509.Certificate:
    issuer_name, issuer_key = issuer or (subject, key)
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW + dt.timedelta(days=days[0]))
        .not_valid_after(NOW + dt.timedelta(days=days[1]))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class Pki:
    ca_file: Path
    chains: dict[str, tuple[Path, Path]]  # case -> (cert, key)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    out = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test-ca", ca_key, None, hosts=[], ca=True)
    (out / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    loopback = ["127.0.0.1", "localhost"]
    cases = {
        "good": ("server", ("test-ca", ca_key), loopback, (-1, 30)),
        "self_signed": ("server", None, loopback, (-1, 30)),
        "expired": ("server", ("test-ca", ca_key), loopback, (-30, -1)),
        "not_yet_valid": ("server", ("test-ca", ca_key), loopback, (5, 30)),
        "wrong_host": ("server", ("test-ca", ca_key), ["remote.example"], (-1, 30)),
    }
    chains = {}
    for case, (subject, issuer, hosts, days) in cases.items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(subject, key, issuer, hosts=hosts, days=days)
        cert_file, key_file = out / f"{case}.pem", out / f"{case}.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        chains[case] = (cert_file, key_file)
    return Pki(out / "ca.pem", chains)


@dataclass
class Remote:
    url: str
    received: list[bytes]


@pytest.fixture
async def serve() -> AsyncIterator[object]:
    runners: list[web.AppRunner] = []

    async def start(ssl_context: ssl.SSLContext | None, redirect_to: str | None = None) -> Remote:
        received: list[bytes] = []

        async def handler(request: web.Request) -> web.StreamResponse:
            received.append(await request.read())
            if redirect_to is not None:
                raise web.HTTPTemporaryRedirect(redirect_to)
            return web.json_response({"accepted": 1})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context).start()
        runners.append(runner)
        port = runner.addresses[0][1]
        scheme = "https" if ssl_context else "http"
        return Remote(f"{scheme}://127.0.0.1:{port}/events", received)

    yield start
    for runner in runners:
        await runner.cleanup()


def server_context(pki: Pki, case: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*pki.chains[case])
    return context


SEND = """
import asyncio, json, sys
from mplp_lsp.forward.batching import encode_batch
from mplp_lsp.forward.sender import HttpTransport
from mplp_lsp.forward.transport import TransportError
from mplp_lsp.forward.outbox import Entry

async def main():
    endpoint, token, canary = sys.argv[1:4]
    transport = HttpTransport(endpoint, token, timeout=10, connect_timeout=5)
    fields = Entry.__dataclass_fields__
    entry = Entry(**{name: (1 if name == "seq" else '{"note": "%s"}' % canary) for name in fields})
    try:
        reply = await transport.send(encode_batch("hostile", [entry]))
        print(json.dumps({"status": reply.status, "detail": reply.detail}))
    except TransportError as error:
        print(json.dumps({"error": str(error)}))
    finally:
        await transport.close()

asyncio.run(main())
"""


async def send_from_child(endpoint: str, ca_file: Path) -> dict[str, object]:
    env = {**os.environ, "SSL_CERT_FILE": str(ca_file), "SSL_CERT_DIR": str(ca_file.parent)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVER), env.get("PYTHONPATH")]))
    import asyncio

    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SEND,
        endpoint,
        "token-" + CANARY,
        CANARY,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == 0, err.decode()
    result: dict[str, object] = json.loads(out)
    return result


async def test_a_trusted_certificate_delivers(pki: Pki, serve: object) -> None:
    remote = await serve(server_context(pki, "good"))  # type: ignore[operator]
    assert await send_from_child(remote.url, pki.ca_file) == {"status": 200, "detail": ""}
    assert len(remote.received) == 1 and CANARY.encode() in remote.received[0]


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("self_signed", "self-signed"),
        ("expired", "expired"),
        ("not_yet_valid", "not yet valid"),
        ("wrong_host", "IP address mismatch"),
    ],
)
async def test_bad_certificates_get_zero_payload_bytes(
    pki: Pki, serve: object, case: str, reason: str
) -> None:
    remote = await serve(server_context(pki, case))  # type: ignore[operator]
    result = await send_from_child(remote.url, pki.ca_file)
    assert "CERTIFICATE_VERIFY_FAILED" in str(result.get("error")), result
    assert reason in str(result["error"]), result
    assert CANARY not in str(result)  # the token and the body stay out of the error text
    assert remote.received == []


async def test_a_redirect_to_another_origin_is_not_followed(pki: Pki, serve: object) -> None:
    other = await serve(None)  # type: ignore[operator]
    remote = await serve(None, redirect_to=other.url)  # type: ignore[operator]
    result = await send_from_child(remote.url, pki.ca_file)
    assert result["status"] == 307
    assert len(remote.received) == 1
    assert other.received == []  # the batch and the token never reach the other origin


@pytest.mark.parametrize(
    "url", ["http://192.0.2.10/", "http://remote.example:8080", "http://[2001:db8::1]/"]
)
def test_plain_http_to_a_non_loopback_host_is_refused(url: str) -> None:
    with pytest.raises(RemoteConfigError, match="loopback"):
        resolve_remote(Settings(), url, env={})
    # Loopback is allowed (the reference collector on this machine); opting in allows the rest.
    assert resolve_remote(Settings(), "http://127.0.0.1:8765", env={}) is not None


def test_credentials_in_the_url_are_refused() -> None:
    with pytest.raises(RemoteConfigError, match="credentials"):
        resolve_remote(Settings(), f"https://user:{CANARY}@remote.example/", env={})
