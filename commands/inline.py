"""``iot-bridge``: the telemetry bridge, and with ``commands_enabled`` the command path in the
same process (``--commands-enabled``, ``IOT_COMMANDS_ENABLED=1``; ``iot-stack up
--commands-mode inline``).

The one place that starts both: ``commands`` may import ``bridge``, the bridge never imports
the command path. It reads :class:`~commands.config.CommandConfig` (the bridge's settings and
the command path's, so ``iot-bridge`` takes every flag and ``IOT_*`` variable ``iot-cmd
serve`` does) and runs :func:`bridge.runner.serve` with the command path as its side path:
started off the event loop after the bridge, its ``iot_commands_*`` metrics on the bridge's
``/metrics`` (the same as ``iot-cmd serve`` exports), stopped after telemetry. Without
``commands_enabled`` this is ``python -m bridge.cli``.
"""

from __future__ import annotations

import sys

from prometheus_client import CollectorRegistry

from bridge import cli as bridge_cli
from bridge.config import BridgeConfig
from bridge.runner import SidePath, SidePathFactory
from commands import config as config_mod
from commands.config import CommandConfig


class InlineCommandPath:
    """The command path as the bridge's side path."""

    name = "command path"

    def __init__(self, cfg: CommandConfig, registry: CollectorRegistry) -> None:
        from commands.metrics import CommandCollector
        from commands.service import CommandService  # lazy: only when enabled

        self.service = CommandService(cfg)
        registry.register(CommandCollector(self.service))  # same metrics as `iot-cmd serve`

    def start(self) -> None:
        self.service.start()

    def stop(self, timeout_s: float) -> None:
        self.service.stop(timeout_s)


def side_path(cfg: BridgeConfig) -> SidePathFactory | None:
    """The command path for the bridge to run, when this config enables it."""
    if not isinstance(cfg, CommandConfig) or not cfg.commands_enabled:
        return None
    command_cfg = cfg

    def build(registry: CollectorRegistry) -> SidePath:
        return InlineCommandPath(command_cfg, registry)

    return build


def main(argv: list[str] | None = None) -> int:
    parser = bridge_cli.build_parser(config_mod.add_arguments)
    return bridge_cli.run(argv, parser, config_mod.from_namespace, side_path)


if __name__ == "__main__":
    sys.exit(main())
