"""Dynamic-security commands applied to Mosquitto's dynsec file while Mosquitto is stopped (pure).

Why: Mosquitto 2.0.11 rewrites its whole dynsec file (pretty-printed JSON, about 1.1 kB per
device) after every command that changes something, so adding N clients over ``$CONTROL``
costs O(N²): 1,000 devices took minutes on the shared 2-core machine and 5,000 did not finish
in 20 minutes. Applying the same commands to the file's document and writing it once costs
milliseconds per device; Mosquitto reads the file when it starts (a SIGHUP does not reload it).

Only the commands that adding devices issues (``dynsec_plan.add_device``) are understood; any
other raises :class:`OfflineDynsecError` before anything is written, and the caller uses the
live path instead. Answers mirror Mosquitto's (``Client not found`` for a missing client...),
so ``Command.tolerate`` means the same here. Passwords are hashed as Mosquitto hashes those it
is given over ``$CONTROL`` (PBKDF2-HMAC-SHA512, 12-byte salt, 101 iterations in 2.0.11): the
file never holds a secret in the clear, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from registry.dynsec_config import pbkdf2_entry
from registry.dynsec_plan import Command
from registry.errors import RegistryError

CLIENT_ITERATIONS: Final = 101  # what Mosquitto 2.0.11's createClient uses


class OfflineDynsecError(RegistryError):
    """A command the offline path does not handle, or one refused as Mosquitto would."""


def _index(items: list[dict[str, Any]], key: str) -> dict[str, int]:
    return {str(item.get(key)): i for i, item in enumerate(items)}


class DynsecDocument:
    """A dynsec file's document with the commands applied in memory (write it out once)."""

    def __init__(self, doc: dict[str, Any], iterations: int = CLIENT_ITERATIONS) -> None:
        self.doc = doc
        self.iterations = iterations
        for part in ("clients", "roles", "groups"):
            doc.setdefault(part, [])
        self._reindex()

    def _reindex(self) -> None:
        self._clients = _index(self.doc["clients"], "username")
        self._roles = _index(self.doc["roles"], "rolename")
        self._groups = _index(self.doc["groups"], "groupname")

    def apply(self, commands: Sequence[Command]) -> None:
        """Apply ``commands`` in order; OfflineDynsecError on an error not tolerated."""
        for command in commands:
            error = self._one(command.body)
            if error is not None and error not in command.tolerate:
                raise OfflineDynsecError(f"dynsec {command.body.get('command')} refused: {error}")

    def _one(self, body: dict[str, Any]) -> str | None:
        name = body.get("command")
        if name == "deleteClient":
            return self._delete(self._clients, "clients", str(body["username"]), "Client")
        if name == "deleteRole":
            return self._delete(self._roles, "roles", str(body["rolename"]), "Role")
        if name == "createRole":
            return self._create_role(body)
        if name == "createClient":
            return self._create_client(body)
        raise OfflineDynsecError(f"dynsec command {name!r} is not applied offline")

    def _delete(self, index: dict[str, int], part: str, key: str, what: str) -> str | None:
        at = index.pop(key, None)
        if at is None:
            return f"{what} not found"
        items = self.doc[part]
        items[at] = None  # compacted in document(): keeps the other indexes valid
        if part == "roles":  # Mosquitto drops the role from whoever held it
            for holder in (*self.doc["clients"], *self.doc["groups"]):
                if holder is not None and holder.get("roles"):
                    holder["roles"] = [r for r in holder["roles"] if r.get("rolename") != key]
        return None

    def _create_role(self, body: dict[str, Any]) -> str | None:
        name = str(body["rolename"])
        if name in self._roles:
            return "Role already exists"
        acls = [
            {
                "acltype": a["acltype"],
                "topic": a["topic"],
                "priority": int(a.get("priority", 0)),
                "allow": bool(a.get("allow", False)),
            }
            for a in body.get("acls", [])
        ]
        self._roles[name] = len(self.doc["roles"])
        self.doc["roles"].append({"rolename": name, "acls": acls})
        return None

    def _create_client(self, body: dict[str, Any]) -> str | None:
        username = str(body["username"])
        if username in self._clients:
            return "Client already exists"
        roles = [str(r["rolename"]) for r in body.get("roles", [])]
        groups = [str(g["groupname"]) for g in body.get("groups", [])]
        if any(r not in self._roles for r in roles):
            return "Role not found"
        if any(g not in self._groups for g in groups):
            return "Group not found"
        client: dict[str, Any] = {"username": username}
        if "clientid" in body:
            client["clientid"] = str(body["clientid"])
        if body.get("password"):
            client.update(pbkdf2_entry(str(body["password"]), self.iterations))
        client["roles"] = [{"rolename": r} for r in roles]
        self._clients[username] = len(self.doc["clients"])
        self.doc["clients"].append(client)
        for group in groups:  # Mosquitto keeps memberships on the group's side
            entry = self.doc["groups"][self._groups[group]]
            entry.setdefault("clients", []).append({"username": username})
        return None

    def document(self) -> dict[str, Any]:
        """The document to write (deleted entries gone)."""
        for part in ("clients", "roles", "groups"):
            self.doc[part] = [item for item in self.doc[part] if item is not None]
        self._reindex()
        return self.doc
