"""Issue 32's short fault scenarios: one `iot-stack up` (console, command path, simulated
devices: the light load) shared by the module, and a `kill -9` of each service in turn; after
each, the supervisor has restarted it and every client path answers again (an MQTT device's
message in Kafka, MR publish and long-poll consume, a queue's send/receive/ack, a telemetry
SSE stream, an HTTP device, a command, the console's pages: bench.chaos.probes). Kafka's
scenario also holds iot-api's strict read barrier to its bound: an account made after Kafka's
restart is let in within 30 s (every authenticated request waits for the registry follower to
catch up, api.plumbing.auth.ReadBarrier). The analytics job's and the supervisor's own kill -9
are in test_supervisor_integration.py. Two more Kafka scenarios under the chaos cells' load
(bench.chaos.load: a client per door): the console's Topics page and its Overview sampler
answer again within 30 s of a kill -9 and restart; after a clean restart the queue's and MR's
senders are acknowledged again within 30 s, and what they were acknowledged is there once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.chaos import check, probes
from bench.chaos import stack as chaos_stack
from bench.chaos.clients import Http, basic, describe
from bench.chaos.load import Load
from bench.chaos.probes import CONSOLE_PAGES
from stack.ports import port_open

pytestmark = pytest.mark.integration
SCENARIO_S = 60.0  # each scenario's bound (issue 32): restarted, ready, every path answering
BARRIER_S = 30.0  # issue 32: every client path back within 30 s of Kafka's restart
KAFKA_START_S = 180.0  # Kafka's own start after a kill (35-42 s quiet, 81 s at load 31): not
# the bound under test, which counts from Kafka's port open


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[chaos_stack.ChaosStack]:
    work = tmp_path_factory.mktemp("faults")
    running = chaos_stack.up(work, analytics=False, disk=False)  # down again if it fails
    try:
        _, failing = probes.wait_all(running, 120)
        assert not failing, f"client paths failing before any fault: {failing}"
        yield running
    finally:
        chaos_stack.down(running)


def _kill_and_recover(stack: chaos_stack.ChaosStack, service: str) -> float:
    """kill -9 ``service``; seconds until it is restarted and ready and every path answers."""
    old = stack.pid(service)
    assert old is not None, f"{service} does not run"
    started = time.monotonic()
    os.kill(old, signal.SIGKILL)
    while stack.pid(service) in (None, old):
        assert time.monotonic() - started < SCENARIO_S, f"{service} not restarted"
        time.sleep(0.2)
    _, waiting = check.wait_ready(stack, SCENARIO_S - (time.monotonic() - started))
    assert not waiting, f"not ready {time.monotonic() - started:.0f} s after the kill: {waiting}"
    _, failing = probes.wait_all(stack, SCENARIO_S - (time.monotonic() - started))
    took = time.monotonic() - started
    assert not failing, f"{took:.0f} s after {service}'s kill -9 still failing: {failing}"
    assert took < SCENARIO_S
    print(f"{service}: every client path answers {took:.1f} s after its kill -9")
    return took


@pytest.mark.parametrize("service", ["bridge", "commands", "api", "devices", "mosquitto"])
def test_every_path_answers_after_a_kill_9_of(chaos: chaos_stack.ChaosStack, service: str) -> None:
    _kill_and_recover(chaos, service)


def _new_api_account(stack: chaos_stack.ChaosStack, name: str) -> tuple[str, str]:
    """An `api` account made with the registry's CLI, tried again while the restarted Kafka
    still loads its transaction coordinator (the CLI's writer is transactional)."""
    deadline = time.monotonic() + SCENARIO_S
    while True:
        done = _account_create(stack, name)
        if done.returncode == 0:
            return name, json.loads(done.stdout)["secret"]
        assert time.monotonic() < deadline, f"account create failed: {done.stderr[-1000:]}"
        time.sleep(1)


def _account_create(stack: chaos_stack.ChaosStack, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "registry", "--kafka-bootstrap", stack.bootstrap,
         "--mqtt-host", "127.0.0.1", "--mqtt-port", str(stack.mqtt_port),
         "--admin-password-file", str(stack.data_dir / "secrets" / "registry-admin.secret"),
         "--json", "account", "create", name, "--role", "api"],
        capture_output=True, text=True, timeout=120, check=False, env=stack.env,
    )  # fmt: skip


def _signal_kafka_until_back(
    chaos: chaos_stack.ChaosStack,
    sig: signal.Signals,
    during: Callable[[], object] | None = None,
    every_s: float = 0.2,
) -> float:
    """Send ``sig`` to Kafka; when the supervisor's new Kafka has its port open, the monotonic
    time it was sent. Bounded by Kafka's own start (KAFKA_START_S), not by the bound under test;
    ``during`` runs at every look while it is away."""
    old = chaos.pid("kafka")
    assert old is not None
    os.kill(old, sig)
    sent = time.monotonic()
    while chaos.pid("kafka") in (None, old) or not port_open("127.0.0.1", chaos.ports["kafka"]):
        assert time.monotonic() - sent < KAFKA_START_S, "Kafka not back"
        if during is not None:
            during()
        time.sleep(every_s)
    return sent


def test_after_a_kafka_kill_9_the_read_barrier_lets_a_new_account_in_within_30_s(
    chaos: chaos_stack.ChaosStack,
) -> None:
    started = _signal_kafka_until_back(chaos, signal.SIGKILL)
    back = time.monotonic() - started
    # an account written after the restart: only a registry follower that caught up knows it
    account = _new_api_account(chaos, f"after-kafka-{int(time.time())}")
    made = time.monotonic()
    print(f"Kafka back {back:.1f} s after its kill -9, account made {made - started:.1f} s after")
    api = Http(chaos.api_url, basic(*account))
    while (answer := api.call("POST", "/events/chaos.barrier", [{"n": 1}], timeout=10))[0] != 200:
        waited = time.monotonic() - made
        assert waited < BARRIER_S, f"no authenticated answer {waited:.0f} s on: {describe(answer)}"
        time.sleep(0.5)
    print(f"the new account published {time.monotonic() - made:.1f} s after it was made")
    waited, failing = probes.wait_all(chaos, BARRIER_S)
    assert not failing, f"{BARRIER_S:.0f} s after Kafka was back, still failing: {failing}"
    print(f"every client path answers {time.monotonic() - started:.1f} s after Kafka's kill -9")


CONSOLE_GROUPS = 300  # consumer groups with committed offsets (MR consumers, queues: iot-api
# holds up to 900 MR consumers, each a group)


def _commit_groups(bootstrap: str, prefix: str, count: int) -> list[str]:
    """``count`` consumer groups with an offset committed on iot.telemetry: the Topics page and
    the sampler list each with its lag (the admin requests that went unanswered after a Kafka
    restart: one group after the other, for 80-120 s in the chaos run)."""
    groups = [f"{prefix}-{i:03d}" for i in range(count)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    offsets = [TopicPartition("iot.telemetry", 0, 0)]
    futures = [
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, offsets)])[g]
        for g in groups
    ]
    for future in futures:
        future.result(30)
    return groups


def _console_answers(session: Http, groups: list[str], since: float) -> str | None:
    """None when the console's pages answer, the Topics page lists ``groups`` with their lag
    and the Overview's sampler took a sample after ``since`` that saw Kafka up, no error, and
    them with their lag (a group whose offsets Kafka refused has an ``error``)."""
    for page in CONSOLE_PAGES:
        status, body = session.call("GET", f"/console/api/{page}", timeout=15)
        if status != 200:
            return f"{page}: {describe((status, body))}"
        if page == "topics":
            listed = {g["group"] for g in json.loads(body)["groups"] if not g.get("error")}
            if missing := set(groups) - listed:
                return f"topics: {len(missing)} of the groups not listed"
        if page == "overview":
            latest = json.loads(body)["latest"]
            if not latest or latest["point"]["at"] <= since:
                return "overview: no sample since Kafka's restart"
            if latest["kafka"] != {"up": True, "error": ""}:
                return f"overview: the sampler saw {latest['kafka']}"
            read = {g["group"]: g.get("error", "") for g in latest["groups"]}
            if unread := [g for g in groups if read.get(g, "not listed")]:
                why = read.get(unread[0], "not listed")  # the first's, for the report
                return f"overview: {len(unread)} of the groups not in the sampler's lag ({why})"
    return None


def test_console_topics_and_sampler_answer_within_30_s_of_a_kafka_kill_9(
    chaos: chaos_stack.ChaosStack,
) -> None:
    groups = _commit_groups(chaos.bootstrap, f"console-{int(time.time())}", CONSOLE_GROUPS)
    session = Http(chaos.api_url)
    name, secret = chaos.operator
    login = session.call("POST", "/console/api/login", {"name": name, "secret": secret},
                         headers={"Origin": chaos.api_url}, timeout=15)  # fmt: skip
    assert login[0] == 200, describe(login)
    deadline = time.monotonic() + SCENARIO_S
    while (error := _console_answers(session, groups, 0.0)) is not None:
        assert time.monotonic() < deadline, f"the console before the kill: {error}"
        time.sleep(0.5)
    load = Load(chaos, f"console-{int(time.time())}")  # a client per door (the chaos cells')
    load.start()
    try:
        _kill_kafka_and_wait_for_the_console(chaos, session, groups)
    finally:
        load.stop()


def _kill_kafka_and_wait_for_the_console(
    chaos: chaos_stack.ChaosStack, session: Http, groups: list[str]
) -> None:
    # the operator keeps the pages open while Kafka is away (the sampler keeps asking too)
    killed = _signal_kafka_until_back(
        chaos, signal.SIGKILL, lambda: _console_answers(session, groups, 0.0), every_s=0.5
    )
    back, back_at = time.monotonic(), time.time()
    print(f"Kafka back (its port open) {back - killed:.1f} s after its kill -9")
    seen: dict[str, float] = {}  # each error the pages gave, when first seen
    while (error := _console_answers(session, groups, back_at)) is not None:
        waited = time.monotonic() - back
        seen.setdefault(error[:120], round(waited, 1))
        assert waited < BARRIER_S, f"the console {waited:.0f} s after Kafka's restart: {seen}"
        time.sleep(0.5)
    answered = time.monotonic() - back
    print(f"errors on the way (s after Kafka's restart): {seen}")
    print(f"the console's pages and sampler answer {answered:.1f} s after it")
    # the bound holds for the answer too, not only for the polls that failed before it
    assert answered < BARRIER_S, f"the console answered {answered:.0f} s after: {seen}"


def _log_lines(chaos: chaos_stack.ChaosStack, service: str, *words: str) -> list[str]:
    path = chaos.data_dir / "logs" / f"{service}.log"
    text = path.read_text(errors="replace") if path.exists() else ""
    return [line for line in text.splitlines() if any(w in line for w in words)]


def test_queue_and_mr_sends_recover_after_a_clean_kafka_restart_losing_nothing(
    chaos: chaos_stack.ChaosStack,
) -> None:
    """Issue 32: a clean Kafka restart under the queue's and MR's senders (the chaos run saw
    OutOfOrderSequenceException for iot-api's idempotent producer in Kafka's log): iot-api's
    producer goes on by itself, and what the queue and MR acknowledged is there once each."""
    load = Load(chaos, f"restart-{int(time.time())}")
    load.start()
    try:
        sends = load.paths["queue-send"]
        deadline = time.monotonic() + SCENARIO_S
        while sends.ok < 5:
            assert time.monotonic() < deadline, f"queue sends before the restart: {sends.failures}"
            time.sleep(0.2)
        # a clean stop; the supervisor starts it again
        _signal_kafka_until_back(chaos, signal.SIGTERM)
        back, back_at = time.monotonic(), time.time()
        for name in ("queue-send", "mr-publish"):
            path = load.paths[name]
            while not any(t > back_at for t in path.ok_times):
                waited = time.monotonic() - back
                assert waited < BARRIER_S, f"{name} {waited:.0f} s after: {path.failures[-3:]}"
                time.sleep(0.2)
            print(
                f"{name} acknowledged again {time.monotonic() - back:.1f} s after Kafka's restart"
            )
    finally:
        load.stop()
    tally = check.tally(chaos, load)
    print(
        f"acknowledged: queue {len(load.paths['queue-send'].acked)}, "
        f"MR {len(load.paths['mr-publish'].acked)}; lost {tally.lost}, dup {tally.duplicates}"
    )
    for line in _log_lines(chaos, "kafka", "OutOfOrderSequence")[:5]:
        print("kafka:", line[:300])
    for line in _log_lines(chaos, "api", "sequence", "Sequence", "fatal", "FATAL")[:5]:
        print("api:", line[:300])
    assert tally.lost["queue"] == tally.lost["mr"] == 0, tally
    reached = [e for p in load.paths.values() for _, e in p.failures if "sequence" in e.lower()]
    assert not reached, f"the producer's sequence errors reached a client: {reached[:3]}"
    assert tally.duplicates["queue"] == tally.duplicates["mr"] == 0, tally
