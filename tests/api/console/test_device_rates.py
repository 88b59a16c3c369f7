"""Issue 32 item 5: the Devices page shows the rate the devices send. The console stack's
simulated devices send 4 msgs/s each (`--device-rate 4`, tests/api/console/conftest.py); the
page showed at most 1.00 for any device, whatever it sent."""

from __future__ import annotations

import time

from tests.api.console.conftest import Client, ConsoleStack

SENT_PER_S = 4.0  # the console stack's --device-rate


def test_the_devices_page_shows_the_rate_the_simulated_devices_send(
    console_stack: ConsoleStack,
) -> None:
    client = Client(console_stack.url)
    client.login("view1", console_stack.accounts["view1"])
    # the simulator's devices: dev-00000, ...
    simulated = {name for name in console_stack.devices if name.startswith("dev-")}
    assert simulated, console_stack.devices
    deadline = time.monotonic() + 120  # a rate over a minute: the stack may be just up
    while True:
        status, page = client.get("/console/api/devices?size=500")
        assert status == 200, page
        rates = {r["id"]: r["rate"] for r in page["rows"] if r["id"] in simulated}
        # the simulator paces each device to its rate; the window is one minute
        if len(rates) == len(simulated) and all(
            abs(r - SENT_PER_S) <= 0.05 * SENT_PER_S for r in rates.values()
        ):
            break
        assert time.monotonic() < deadline, f"rates {rates}, sent {SENT_PER_S}/s each"
        time.sleep(2)
