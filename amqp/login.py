"""Who logs in: SASL PLAIN checked against the registry as iot-api checks HTTP devices and
accounts (``api.http_devices.credentials``, ``api.plumbing.auth``: the read barrier first, scrypt
in a thread, a success remembered a minute), or nobody in the explicit insecure mode."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from enum import StrEnum

from amqp.model import Account, parse_authcid, parse_plain
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


class Logins:
    """The mechanisms offered and the check of a ``sasl-init``."""

    def __init__(self, auth: RegistryAuthenticator | None) -> None:
        self.auth = auth
        self.credentials = None if auth is None else DeviceCredentials(auth)

    @property
    def mechanisms(self) -> tuple[str, ...]:
        """PLAIN against the registry; ANONYMOUS only without it (--insecure-anonymous)."""
        return ("ANONYMOUS",) if self.auth is None else ("PLAIN",)

    async def check(self, mechanism: str, response: bytes) -> Login:
        if mechanism not in self.mechanisms:
            return Login(Verdict.REFUSED)
        if self.auth is None:
            return Login(Verdict.OK)
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

    def still_allowed(self, login: Login) -> bool:
        """Whether a logged-in principal may still act, by the registry as followed now: a
        device with the secret hash it logged in with, in an enabled tenant; an enabled
        account. Without authentication (or before the log-in) there is nothing to check."""
        if self.auth is None or login.verdict is not Verdict.OK:
            return True
        who = login.principal
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
