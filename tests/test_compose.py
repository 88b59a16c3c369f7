"""docker-compose.yml checked against the code (no Docker engine runs here, issue 2 item 8)."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml

from amqp.config import AmqpConfig
from api.config import ApiConfig
from api.console.config import ConsoleConfig
from commands.config import CommandConfig
from stack.config import StackConfig

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
SCRIPTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
PACKAGE_OF = {script: target.split(".")[0] for script, target in SCRIPTS.items()}


def _env_names_read(script: str) -> set[str]:
    """The IOT_* names the program behind `script` reads."""
    if script in (
        "iot-bridge",
        "iot-cmd",
    ):  # both read every CommandConfig setting (the bridge's too)
        return {"IOT_" + f.name.upper() for f in fields(CommandConfig)}
    if script == "iot-api":  # every ApiConfig and ConsoleConfig setting, as IOT_<NAME>
        return {"IOT_" + f.name.upper() for f in (*fields(ApiConfig), *fields(ConsoleConfig))}
    if script == "iot-amqp":  # every AmqpConfig setting, as IOT_<NAME> (appconfig.settings)
        return {"IOT_" + f.name.upper() for f in fields(AmqpConfig)}
    if script == "iot-stack":
        return {f.metadata["env"] for f in fields(StackConfig)} | {
            "IOT_KAFKA_BOOTSTRAP",  # `iot-stack topics` and `iot-stack provision`
            "IOT_PARTITIONS",
            "IOT_MQTT_HOST",  # `iot-stack provision`
        }
    # Other packages read their settings by literal name somewhere in their code.
    package = ROOT / PACKAGE_OF[script]
    text = "\n".join(p.read_text() for p in package.rglob("*.py"))
    return set(re.findall(r"IOT_[A-Z0-9_]+", text)) | _derived_names(text)


def _derived_names(text: str) -> set[str]:
    # configs that build env names as "IOT_" + field name (like CommandConfig) declare the fields
    names = re.findall(r"^\s{4}([a-z][a-z0-9_]*)\s*:\s*[A-Za-z]", text, flags=re.MULTILINE)
    return {"IOT_" + name.upper() for name in names} if '"IOT_"' in text else set()


def _env(service: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in (service.get("environment") or {}).items()}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_command_is_a_real_console_script_that_parses(name: str) -> None:
    command = SERVICES[name]["command"]
    script = command[0]
    assert script in SCRIPTS, f"{name}: {script} is not a [project.scripts] entry"
    # Run the real entry point with the service's arguments plus --help: argparse rejects an
    # unknown subcommand or option (exit 2) before it reaches --help (exit 0).
    module, func = SCRIPTS[script].split(":")
    code = f"import sys; from {module} import {func}; sys.exit({func}(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, *command[1:], "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, f"{name}: {command} does not parse:\n{result.stderr}"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_environment_variable_is_read_by_the_program(name: str) -> None:
    service = SERVICES[name]
    read = _env_names_read(service["command"][0])
    unknown = sorted(set(_env(service)) - read)
    assert not unknown, f"{name} sets {unknown}, which {service['command'][0]} never reads"


def _port_flag(name: str, flag: str) -> str:
    command = SERVICES[name]["command"]
    return command[command.index(flag) + 1]


def test_ports_agree() -> None:
    mqtt_port = _port_flag("mosquitto", "--mqtt-port")
    kafka_port = _port_flag("kafka", "--kafka-port")
    tls_port = _port_flag("mosquitto", "--mqtt-tls-port")
    assert SERVICES["mosquitto"]["ports"] == [f"{mqtt_port}:{mqtt_port}", f"{tls_port}:{tls_port}"]
    assert mqtt_port in SERVICES["mosquitto"]["healthcheck"]["test"]
    assert "9092), 3" in " ".join(SERVICES["kafka"]["healthcheck"]["test"])
    for name, service in SERVICES.items():
        env = _env(service)
        if "IOT_MQTT_HOST" in env:
            assert env["IOT_MQTT_HOST"] == "mosquitto", name
            assert env["IOT_MQTT_PORT"] == mqtt_port, name
        if "IOT_KAFKA_BOOTSTRAP" in env:
            assert env["IOT_KAFKA_BOOTSTRAP"] == f"kafka:{kafka_port}", name
    bridge = SERVICES["bridge"]
    http_port = _env(bridge)["IOT_HTTP_PORT"]
    assert bridge["ports"] == [f"{http_port}:{http_port}"]
    assert f"localhost:{http_port}/readyz" in " ".join(bridge["healthcheck"]["test"])
    assert _env(SERVICES["kafka"])["IOT_KAFKA_ADVERTISED_HOST"] == "kafka"
    commands = SERVICES["commands"]
    commands_port = _env(commands)["IOT_COMMAND_HTTP_PORT"]
    assert commands_port != http_port
    assert commands["ports"] == [f"{commands_port}:{commands_port}"]
    assert f"localhost:{commands_port}/readyz" in " ".join(commands["healthcheck"]["test"])
    assert _env(commands)["IOT_HTTP_HOST"] == "0.0.0.0"
    api = SERVICES["api"]
    api_port, api_tls_port = _env(api)["IOT_API_PORT"], _env(api)["IOT_TLS_PORT"]
    assert api["ports"] == [f"{api_port}:{api_port}", f"{api_tls_port}:{api_tls_port}"]
    assert f"localhost:{api_port}/readyz" in " ".join(api["healthcheck"]["test"])
    assert _env(api)["IOT_API_HOST"] == "0.0.0.0"
    watched = _env(api)["IOT_CONSOLE_SERVICES"]
    assert f"bridge=http://bridge:{http_port}" in watched
    assert f"commands=http://commands:{commands_port}" in watched
    assert (
        f"analytics=http://analytics:{_env(SERVICES['analytics'])['IOT_ANALYTICS_HTTP_PORT']}"
        in (watched)
    )
    # iot-amqp: 5672, amqps 5671 and its HTTP port published as they listen, in the console
    amqp = SERVICES["amqp"]
    amqp_env = _env(amqp)
    amqp_ports = [amqp_env[k] for k in ("IOT_AMQP_PORT", "IOT_AMQPS_PORT", "IOT_HTTP_PORT")]
    assert amqp["ports"] == [f"{p}:{p}" for p in amqp_ports]
    assert amqp_ports[:2] == ["5672", "5671"]  # the IANA ports AMQP clients dial by default
    assert len(set(amqp_ports) | {http_port, commands_port, api_port, api_tls_port}) == 7
    assert (amqp_env["IOT_AMQP_HOST"], amqp_env["IOT_HTTP_HOST"]) == ("0.0.0.0", "0.0.0.0")
    assert f"localhost:{amqp_env['IOT_HTTP_PORT']}/readyz" in " ".join(amqp["healthcheck"]["test"])
    assert f"amqp=http://amqp:{amqp_env['IOT_HTTP_PORT']}" in watched


def test_the_command_path_runs_once_in_its_own_service() -> None:
    serving = [n for n, s in SERVICES.items() if s["command"][:2] == ["iot-cmd", "serve"]]
    assert serving == ["commands"]
    inline = [n for n, s in SERVICES.items() if _env(s).get("IOT_COMMANDS_ENABLED") == "1"]
    assert inline == []  # the bridge runs without it
    assert SERVICES["commands"]["depends_on"] == SERVICES["bridge"]["depends_on"]


def test_dependencies_name_real_services_and_image_builds_from_the_dockerfile() -> None:
    for name, service in SERVICES.items():
        for dep, cond in (service.get("depends_on") or {}).items():
            assert dep in SERVICES, f"{name} depends on unknown {dep}"
            if cond["condition"] == "service_healthy":
                assert "healthcheck" in SERVICES[dep], f"{dep} has no healthcheck"
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in (
        "appconfig",
        "mqtt_codec",
        "bridge",
        "device_sim",
        "registry",
        "api",
        "spark_jobs",
        "stack",
        "mosquitto",
        "kafka",
    ):
        assert f"COPY {package}/ {package}/" in dockerfile


def test_the_image_copies_every_package_it_installs() -> None:
    """`pip install .` in the image installs only the packages the Dockerfile copied: a package
    left out crash-loops its service with ModuleNotFoundError (issue 33, bug 2: `edge`)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    installed = {
        pattern.rstrip("*")
        for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    on_disk = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench"}
    assert on_disk == installed, "pyproject's packages and the top-level packages disagree"
    dockerfile = (ROOT / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\S+)/ \1/$", dockerfile, flags=re.MULTILINE))
    missing = sorted(installed - copied)
    assert not missing, f"the Dockerfile does not COPY {missing}"


def _final_stage(dockerfile: str) -> str:
    """The Dockerfile's last stage: what the image is made of."""
    return re.split(r"^FROM ", dockerfile, flags=re.MULTILINE)[-1]


def test_the_image_runs_as_an_unprivileged_user_without_build_tools() -> None:
    """Issue 33 item 4: a non-root user, and no compiler, maven or headers in the final stage
    (they stay in the build stage)."""
    final = _final_stage((ROOT / "Dockerfile").read_text())
    users = re.findall(r"^USER (\S+)$", final, flags=re.MULTILINE)
    assert users, "the final stage sets no USER: the services would run as root"
    assert users[-1] not in {"root", "0"}
    installed = " ".join(re.findall(r"apt-get install[^&]*", final))
    for tool in ("gcc", "maven", "-dev"):
        assert tool not in installed, f"{tool} in the final image"


def test_every_long_running_service_has_a_health_check() -> None:
    """`depends_on: service_healthy` and `docker-compose ps` need one; one-shot services
    (restart "no") end instead."""
    missing = [
        name
        for name, service in SERVICES.items()
        if service.get("restart", "unless-stopped") != "no"
        and "healthcheck" not in service
        and "profiles" not in service
    ]
    assert not missing, f"no healthcheck: {missing}"


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> volume name (with its :ro, if any)."""
    found = {}
    for spec in service.get("volumes") or []:
        volume, path, *mode = spec.split(":")
        found[path] = volume + (f":{mode[0]}" if mode else "")
    return found


def test_authentication_is_on_and_every_client_logs_in_from_the_secrets_volume() -> None:
    # nobody opens the anonymous development broker
    for name, service in SERVICES.items():
        assert "--insecure-anonymous" not in service["command"], name
        assert "IOT_STACK_INSECURE_ANONYMOUS" not in _env(service), name
    # Mosquitto writes the registry admin's secret where auth-init reads it
    for name in ("mosquitto", "auth-init"):
        assert _env(SERVICES[name])["IOT_STACK_SECRETS_DIR"] == "/secrets", name
        assert _mounts(SERVICES[name])["/secrets"] == "secrets", name
    init = SERVICES["auth-init"]
    assert init["command"][:2] == ["iot-stack", "provision"]
    assert init["restart"] == "no"
    assert _port_flag("auth-init", "--devices") == _port_flag("devices", "--devices")
    for dep in ("mosquitto", "kafka"):
        assert init["depends_on"][dep] == {"condition": "service_healthy"}
    # the services log in with the accounts auth-init creates, passwords read from files
    logins = [("bridge", "svc/bridge"), ("commands", "svc/commands"), ("api", "svc/api")]
    # iot-amqp's command sessions: svc/api, as `iot-stack up --amqp` gives it
    for name, user in [*logins, ("amqp", "svc/api")]:
        env = _env(SERVICES[name])
        assert env["IOT_MQTT_USERNAME"] == user, name
        assert env["IOT_MQTT_PASSWORD_FILE"] == f"/secrets/{user.split('/')[1]}.secret", name
        assert "IOT_MQTT_PASSWORD" not in env, name
        assert _mounts(SERVICES[name])["/secrets"] == "secrets:ro", name
        cond = SERVICES[name]["depends_on"]["auth-init"]
        assert cond == {"condition": "service_completed_successfully"}, name
    # iot-api checks callers against the registry; its console changes devices as svc/registry
    api = SERVICES["api"]
    assert "--registry-auth" in api["command"]
    assert _env(api)["IOT_CONSOLE_ADMIN_PASSWORD_FILE"] == "/secrets/registry-admin.secret"
    assert _mounts(api)["/secrets"] == "secrets:ro"
    assert api["depends_on"]["auth-init"] == {"condition": "service_completed_successfully"}
    # iot-amqp takes SASL PLAIN against the registry, never ANONYMOUS
    assert SERVICES["amqp"]["command"] == ["iot-amqp", "--registry-auth"]
    devices = SERVICES["devices"]
    assert _env(devices)["IOT_SIM_CREDENTIALS_FILE"] == "/secrets/devices.json"
    assert _mounts(devices)["/secrets"] == "secrets:ro"
    assert "secrets" in COMPOSE["volumes"]


def test_the_bridge_reads_tenants_and_quotas_from_the_registry() -> None:
    from registry.kafka_store import REGISTRY_TOPIC

    assert _env(SERVICES["bridge"])["IOT_REGISTRY_TOPIC"] == REGISTRY_TOPIC
    # auth-init creates that topic (iot-stack provision) before the bridge starts
    assert SERVICES["bridge"]["depends_on"]["auth-init"] == {
        "condition": "service_completed_successfully"
    }


def test_mosquitto_opens_the_tls_listener_with_its_ca_in_a_volume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cryptography import x509

    from registry import pki
    from stack.mosquitto_server import MosquittoServer

    service = SERVICES["mosquitto"]
    env = _env(service)
    ca_dir = env["IOT_REGISTRY_CA_DIR"]
    assert _mounts(service)[ca_dir] == "ca"
    assert "ca" in COMPOSE["volumes"]
    # render the config from the service's environment, its volumes under tmp_path
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in ("IOT_DATA_DIR", "IOT_STACK_SECRETS_DIR", "IOT_REGISTRY_CA_DIR"):
        monkeypatch.setenv(key, str(tmp_path / env[key].strip("/")))
    tls_port = int(_port_flag("mosquitto", "--mqtt-tls-port"))
    cfg = StackConfig.from_env(mqtt_port=int(_port_flag("mosquitto", "--mqtt-port")),
                               mqtt_tls_port=tls_port)  # fmt: skip
    lines = MosquittoServer(cfg).render_config().read_text().splitlines()
    assert f"listener {tls_port} 0.0.0.0" in lines
    assert f"cafile {tmp_path / 'ca' / 'ca.crt'}" in lines
    assert f"crlfile {tmp_path / 'ca' / 'crl.pem'}" in lines
    assert "require_certificate true" in lines
    server = pki.load_cert((tmp_path / "ca" / "server.crt").read_bytes())
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    # the names the other containers (and the published ports' clients) dial it by
    assert {"mosquitto", "api", "amqp"} <= set(san.get_values_for_type(x509.DNSName))
    # iot-amqp serves that certificate on amqps from the same volume, read only
    from amqp.tls import server_context

    amqp = _env(SERVICES["amqp"])
    assert _mounts(SERVICES["amqp"])[amqp["IOT_TLS_CA_DIR"]] == f"{_mounts(service)[ca_dir]}:ro"
    env = {**amqp, "IOT_TLS_CA_DIR": str(tmp_path / amqp["IOT_TLS_CA_DIR"].strip("/"))}
    context = server_context(AmqpConfig.load([], env))
    assert context.verify_mode == ssl.CERT_OPTIONAL  # client certificates: SASL EXTERNAL


# -- docker-compose.kafka3.yml: the 3-node Kafka cluster merged over the base file ------------
OVERLAY: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.kafka3.yml").read_text())


def _merged() -> dict[str, dict[str, Any]]:
    """What `docker compose -f docker-compose.yml -f docker-compose.kafka3.yml` runs: mappings
    (environment, depends_on) merged key by key, everything else (command) replaced."""
    merged = {name: dict(service) for name, service in SERVICES.items()}
    for name, override in OVERLAY["services"].items():
        service = merged.setdefault(name, {})
        for key, value in override.items():
            if isinstance(value, dict) and isinstance(service.get(key), dict):
                service[key] = {**service[key], **value}
            else:
                service[key] = value
    return merged


CLUSTER = _merged()
NODES = {n: s for n, s in CLUSTER.items() if s["command"][:3] == ["iot-stack", "serve", "kafka"]}


def test_cluster_nodes_are_the_hosts_they_name_each_with_its_own_data() -> None:
    assert sorted(NODES) == ["kafka", "kafka-2", "kafka-3"]
    hosts = {_env(s)["IOT_KAFKA_NODE_HOSTS"] for s in NODES.values()}
    assert hosts == {"kafka,kafka-2,kafka-3"}  # one list, and the services carry its names
    ids = {}
    for name, service in NODES.items():
        command = service["command"]
        assert command[command.index("--kafka-nodes") + 1] == "3", name
        ids[name] = int(command[command.index("--kafka-node-id") + 1])
        # node N is the N-th host of the list: its voters entry points at itself
        hosts_list = next(iter(hosts)).split(",")
        assert hosts_list[ids[name] - 1] == name
        env = _env(service)
        assert env["IOT_BIND_HOST"] == "0.0.0.0", name
        assert env["IOT_KAFKA_HEAP"] == "384m", name
        assert "healthcheck" in service, name
    assert sorted(ids.values()) == [1, 2, 3]
    assert len({_env(s)["IOT_KAFKA_CLUSTER_ID"] for s in NODES.values()}) == 1
    volumes = [_mounts(s)["/data"] for s in NODES.values()]
    assert len(set(volumes)) == 3
    assert set(volumes) <= set(COMPOSE["volumes"]) | set(OVERLAY["volumes"])


def test_every_cluster_client_gets_every_node() -> None:
    every_node = ",".join(f"{name}:9092" for name in sorted(NODES))
    clients = [n for n, s in CLUSTER.items() if "IOT_KAFKA_BOOTSTRAP" in _env(s)]
    assert sorted(clients) == sorted(
        n for n, s in SERVICES.items() if "IOT_KAFKA_BOOTSTRAP" in _env(s)
    )
    for name in clients:
        assert _env(CLUSTER[name])["IOT_KAFKA_BOOTSTRAP"] == every_node, name
    for name in ("topic-init", "auth-init"):
        for node in NODES:
            assert CLUSTER[name]["depends_on"][node] == {"condition": "service_healthy"}, name


@pytest.mark.parametrize("name", sorted(OVERLAY["services"]))
def test_cluster_commands_parse_and_their_environment_is_read(name: str) -> None:
    service = CLUSTER[name]
    read = _env_names_read(service["command"][0])
    assert not sorted(set(_env(service)) - read), name
    if "build" in OVERLAY["services"][name]:  # a whole new service, not an override
        assert service["image"] == SERVICES["kafka"]["image"]
    command = service["command"]
    module, func = SCRIPTS[command[0]].split(":")
    code = f"import sys; from {module} import {func}; sys.exit({func}(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, *command[1:], "--help"],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, f"{name}: {command} does not parse:\n{result.stderr}"


def test_a_cluster_node_renders_from_the_compose_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stack.kafka_server import KafkaServer

    service = CLUSTER["kafka-2"]
    for key, value in _env(service).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("IOT_DATA_DIR", str(tmp_path))
    # the volumes' paths, here under the test's own dir
    monkeypatch.setenv("IOT_STACK_SECRETS_DIR", str(tmp_path / "secrets"))
    monkeypatch.setenv("IOT_REGISTRY_CA_DIR", str(tmp_path / "ca"))
    command = service["command"]
    cfg = StackConfig.from_env(
        kafka_port=int(command[command.index("--kafka-port") + 1]),
        kafka_nodes=3,
        kafka_node_id=int(command[command.index("--kafka-node-id") + 1]),
    )
    text = KafkaServer(cfg, cfg.kafka_node_id).render_config().read_text()
    assert "controller.quorum.voters=1@kafka:9093,2@kafka-2:9093,3@kafka-3:9093" in text
    # issue 33: between hosts only SASL_SSL (was PLAINTEXT://kafka-2:9092)
    assert "advertised.listeners=SASL_SSL://kafka-2:9092" in text
    assert "CONTROLLER://0.0.0.0:9093" in text
    assert "PLAINTEXT://" not in text


KAFKA_CLIENTS = ("bridge", "commands", "api", "analytics", "amqp")


def test_kafka_is_reached_between_hosts_only_over_sasl_ssl_with_file_secrets() -> None:
    """Issue 33 item 2: every container is its own host; Kafka listens SASL_SSL only, each
    service logs in as its own SCRAM principal with its secret read from the secrets volume
    (no secret in the environment, the command or the image), TLS checked by the CA volume."""
    from stack.kafka_security import SERVICES as PRINCIPALS

    kafka = SERVICES["kafka"]
    assert _env(kafka)["IOT_KAFKA_SECURITY"] == "sasl_ssl"
    assert _mounts(kafka)["/secrets"] == "secrets"
    assert _mounts(kafka)["/ca"] == "ca"
    assert _env(kafka)["IOT_STACK_SECRETS_DIR"] == "/secrets"
    assert _env(kafka)["IOT_REGISTRY_CA_DIR"] == "/ca"
    # the CA exists before the node asks it for a certificate
    assert kafka["depends_on"]["mosquitto"] == {"condition": "service_healthy"}
    for name in ("topic-init", "auth-init"):  # `iot-stack topics` / `provision` as kafka-admin
        env = _env(SERVICES[name])
        assert env["IOT_KAFKA_SECURITY"] == "sasl_ssl", name
        assert (env["IOT_STACK_SECRETS_DIR"], env["IOT_REGISTRY_CA_DIR"]) == ("/secrets", "/ca")
        assert _mounts(SERVICES[name])["/ca"] == "ca:ro", name
    users = []
    for name in KAFKA_CLIENTS:
        service = SERVICES[name]
        env = _env(service)
        user = env["IOT_KAFKA_SASL_USERNAME"]
        users.append(user)
        assert user in PRINCIPALS, name
        assert env["IOT_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL", name
        assert env["IOT_KAFKA_SASL_PASSWORD_FILE"] == f"/secrets/kafka/{user}.secret", name
        assert env["IOT_KAFKA_SSL_CA_FILE"] == "/ca/ca.crt", name
        assert _mounts(service)["/secrets"] == "secrets:ro", name
        assert _mounts(service)["/ca"] == "ca:ro", name
        text = json.dumps(service)
        assert "sasl.password" not in text, name
        assert 'IOT_KAFKA_SASL_PASSWORD"' not in text, name
        assert "IOT_KAFKA_EXTRA" not in env, name
    assert len(set(users)) == len(users), "one principal per service"
    # the image carries no secret: the build context leaves out the data dir, nothing copies
    # a secrets or CA directory
    assert "var" in (ROOT / ".dockerignore").read_text().split()
    dockerfile = (ROOT / "Dockerfile").read_text()
    copies = [line for line in dockerfile.splitlines() if line.startswith(("COPY", "ADD"))]
    assert not [c for c in copies if "secret" in c or "/ca" in c or ".key" in c], copies


def test_the_cluster_nodes_speak_sasl_ssl_with_shared_secrets() -> None:
    for name in ("kafka", "kafka-2", "kafka-3"):
        node = CLUSTER[name]
        assert _env(node)["IOT_KAFKA_SECURITY"] == "sasl_ssl", name
        assert _mounts(node)["/secrets"] == "secrets", name
        assert _mounts(node)["/ca"] == "ca", name
        assert node["depends_on"]["mosquitto"] == {"condition": "service_healthy"}, name
    for name in KAFKA_CLIENTS:
        assert _env(CLUSTER[name])["IOT_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL", name


# -- compose v2: the Compose Specification's schema, which compose v2 validates files against --
# tests/data/compose-spec.json is schema/compose-spec.json of github.com/compose-spec/compose-spec
# (Apache-2.0), commit a08f8d51 of 2025-10-28. Compose v2 is not in Debian bookworm (only
# docker-compose 1.29, v1, which the container tier runs): this is the check v2's loader makes.
COMPOSE_SPEC = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())


def _spec_errors(doc: dict[str, Any]) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft7Validator(COMPOSE_SPEC)
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)
    ]


@pytest.mark.parametrize(
    "name", ["docker-compose.yml", "docker-compose.kafka3.yml", "docker-compose.shards.yml"]
)
def test_each_file_is_valid_for_compose_v2(name: str) -> None:
    assert _spec_errors(yaml.safe_load((ROOT / name).read_text())) == []


def test_the_merged_cluster_is_valid_for_compose_v2_and_the_schema_refuses_a_typo() -> None:
    merged = {
        **COMPOSE,
        "services": CLUSTER,
        "volumes": {**COMPOSE["volumes"], **OVERLAY["volumes"]},
    }
    assert _spec_errors(merged) == []
    typo = {**merged, "services": {**CLUSTER, "api": {**CLUSTER["api"], "healthckeck": {}}}}
    assert _spec_errors(typo) != []


def test_the_derived_compose_file_gives_every_published_port_its_own_host_port() -> None:
    """tests/test_compose_run.py's remapping, on a file with 200 published ports: choosing
    them one at a time once gave two services the same port (CI 2026-12-08)."""
    from tests.test_compose_run import derive

    many = {"services": {f"s{i}": {"ports": [f"{1000 + i}:{1000 + i}"]} for i in range(200)}}
    derived, ports = derive(many)
    assert len(set(ports.values())) == len(ports) == 200
    for (name, inner), host in ports.items():
        assert derived["services"][name]["ports"] == [f"127.0.0.1:{host}:{inner}"]
