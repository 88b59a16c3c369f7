from __future__ import annotations

import json
import subprocess
from pathlib import Path

from registry import dynsec_config
from registry.topics import ADMIN_USERNAME


def test_our_hash_check_agrees_with_mosquitto_ctrl(tmp_path: Path) -> None:
    """mosquitto_ctrl's own file verifies with our PBKDF2 reading: same format as Mosquitto."""
    path = tmp_path / "d.json"
    subprocess.run(
        ["mosquitto_ctrl", "dynsec", "init", str(path), "admin", "adminpw"],
        check=True,
        capture_output=True,
    )
    entry = json.loads(path.read_text())["clients"][0]
    assert dynsec_config.check_pbkdf2("adminpw", entry)
    assert not dynsec_config.check_pbkdf2("adminpx", entry)


def test_initial_config_has_only_a_narrow_admin() -> None:
    config = json.loads(dynsec_config.render("pw", iterations=1000))
    (client,) = config["clients"]
    assert client["username"] == ADMIN_USERNAME
    assert client["iterations"] == 1000
    assert dynsec_config.check_pbkdf2("pw", client)
    assert "pw" not in (client["password"], client["salt"])
    (role,) = config["roles"]
    assert {a["topic"] for a in role["acls"]} == {"$CONTROL/dynamic-security/#"}
    assert config["defaultACLAccess"] == {
        "publishClientSend": False,
        "publishClientReceive": False,
        "subscribe": False,
        "unsubscribe": True,
    }
