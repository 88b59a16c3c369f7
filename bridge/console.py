"""What the appliance's console scripts (``iot-bridge``, ``iot-cmd``, ``iot-stack``) share: a
parser that knows its name and version, argparse's exits as exit codes, and a stop event set
by SIGTERM/SIGINT for the ones that run until stopped."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from types import FrameType

from bridge import __version__

__all__ = ["new_parser", "parse_args", "stop_on_signals"]


def new_parser(
    prog: str, description: str, *, epilog: str | None = None
) -> argparse.ArgumentParser:
    """A parser for ``prog`` with ``--version``."""
    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def parse_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code argparse chose instead: 0 after ``--help`` or
    ``--version``, 2 for a usage error (argparse has printed why)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2


@contextlib.contextmanager
def stop_on_signals(*signals: signal.Signals) -> Iterator[threading.Event]:
    """An event set when one of ``signals`` arrives (main thread only); the previous handlers
    are back on exit."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in signals}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
