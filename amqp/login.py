"""Who logs in: SASL PLAIN checked against the registry as iot-api checks HTTP devices and
accounts (``api.http_devices.credentials``, ``api.plumbing.auth``: the read barrier first, scrypt
in a thread, a success remembered a minute), SASL EXTERNAL for a device whose TLS client
certificate (amqp.tls) is the one the registry recorded for it, or nobody in the explicit
insecure mode."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from amqp.model import Account, parse_authcid, parse_plain
from amqp.tls import PeerCert
from api.errors import ApiError
from api.http_devices.credentials import DeviceCredentials
from api.http_devices.model import DeviceRef
from api.plumbing.access import Principal
from api.plumbing.auth import RegistryAuthenticator, account_principal

log = logging.getLogger(__name__)


class Verdict(StrEnum):
    OK = "ok"
    REFUSED = "refused"  # sasl-outcome auth
    UNAVAILABLE = "unavailable"  # sasl-outcome sys-temp: the registry did not answer


@dataclass(frozen=True, slots=True)
class Login:
    verdict: Verdict
    principal: DeviceRef | Account | None = None
    secret_hash: str | None = None  # a device's: what its secret was checked against
    # an account's pub/sub rights, as iot-api's (None: its roles may not use the pub/sub API)
    caller: Principal | None = None
    cert_fingerprint: str | None = None  # an EXTERNAL log-in's certificate


def external_device(cert: PeerCert, authzid: bytes) -> DeviceRef | None:
    """The device a client certificate stands for (pure): CN = its user name (``pump-1``,
    ``acme/pump-1``), O = its tenant, as `iot-devices cert` issues them; an authzid, if the
    client sends one, must name the same device."""
    ref = parse_authcid(cert.common_name)
    if not isinstance(ref, DeviceRef) or ref.tenant != cert.organisation:
        return None
    if authzid:
        try:
            asked = parse_authcid(authzid.decode("utf-8"))
        except UnicodeDecodeError:
            return None
        if asked != ref:
            return None
    return ref


class Logins:
    """The mechanisms offered and the check of a ``sasl-init``."""

    def __init__(
        self,
        auth: RegistryAuthenticator | None,
        revoked: Callable[[PeerCert], bool] = lambda _cert: False,
    ) -> None:
        self.auth = auth
        self.credentials = None if auth is None else DeviceCredentials(auth)
        self.revoked = revoked

    @property
    def mechanisms(self) -> tuple[str, ...]:
        """PLAIN against the registry; ANONYMOUS only without it (--insecure-anonymous)."""
        return ("ANONYMOUS",) if self.auth is None else ("PLAIN",)

    def offered(self, cert: PeerCert | None) -> tuple[str, ...]:
        """What a connection is offered: EXTERNAL first when it showed a client certificate
        (Hono's way; never to an anonymous door, which has no identities)."""
        if cert is None or self.auth is None:
            return self.mechanisms
        return ("EXTERNAL", *self.mechanisms)

    async def check(self, mechanism: str, response: bytes, cert: PeerCert | None = None) -> Login:
        if mechanism not in self.offered(cert):
            return Login(Verdict.REFUSED)
        if self.auth is None:
            return Login(Verdict.OK)
        if mechanism == "EXTERNAL":
            assert cert is not None  # offered only with a certificate
            return await self._external(cert, response)
        plain = parse_plain(response)
        if plain is None:
            return Login(Verdict.REFUSED)
        authzid, authcid, secret = plain
        if authzid and authzid != authcid:  # acting as another identity: never
            return Login(Verdict.REFUSED)
        who = parse_authcid(authcid)
        try:
            if isinstance(who, DeviceRef):
                assert self.credentials is not None
                verified = await self.credentials.verified(who, secret)
                if verified is None:
                    return Login(Verdict.REFUSED)
                return Login(Verdict.OK, who, verified)
            if isinstance(who, Account):
                registry = await self.auth.refreshed()
                actor = await asyncio.to_thread(registry.authenticate_account, who.name, secret)
                if actor is None:
                    return Login(Verdict.REFUSED)
                return Login(Verdict.OK, who, caller=account_principal(actor))
        except ApiError as exc:  # the read barrier: Kafka did not answer
            log.warning("log-in of %r not decided: %s", authcid[:100], exc)
            return Login(Verdict.UNAVAILABLE)
        return Login(Verdict.REFUSED)

    async def _external(self, cert: PeerCert, authzid: bytes) -> Login:
        ref = external_device(cert, authzid)
        if ref is None or self.revoked(cert):
            return Login(Verdict.REFUSED)
        assert self.auth is not None
        try:
            await self.auth.refreshed()
        except ApiError as exc:
            log.warning("certificate log-in of %r not decided: %s", cert.common_name[:100], exc)
            return Login(Verdict.UNAVAILABLE)
        if self._recorded(ref) != cert.fingerprint:  # another device's, or re-issued since
            return Login(Verdict.REFUSED)
        return Login(Verdict.OK, ref, cert_fingerprint=cert.fingerprint)

    def _recorded(self, ref: DeviceRef) -> str | None:
        """The certificate fingerprint the registry holds for an enabled device of an enabled
        tenant (None otherwise)."""
        assert self.credentials is not None
        if self.credentials.usable_hash(ref) is None:
            return None
        assert self.auth is not None
        device = self.auth.registry.state.devices.get((ref.tenant, ref.device))
        return None if device is None else device.credentials.cert_fingerprint

    def still_allowed(self, login: Login) -> bool:
        """Whether a logged-in principal may still act, by the registry as followed now: a
        device with the secret hash it logged in with, in an enabled tenant; an enabled
        account. Without authentication (or before the log-in) there is nothing to check."""
        if self.auth is None or login.verdict is not Verdict.OK:
            return True
        who = login.principal
        if isinstance(who, DeviceRef) and login.cert_fingerprint is not None:
            return self._recorded(who) == login.cert_fingerprint
        if isinstance(who, DeviceRef):
            assert self.credentials is not None
            return self.credentials.usable_hash(who) == login.secret_hash
        if isinstance(who, Account):
            state = self.auth.registry.state
            account = state.accounts.get(who.name)
            if account is None or account.disabled:
                return False
            if account.tenant is None:  # system-wide
                return True
            tenant = state.tenants.get(account.tenant)
            return tenant is not None and not tenant.disabled
        return True
