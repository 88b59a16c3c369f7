"""Edge sites for the Overview (adapter: MQTT): the centre's view of every site, read as
`iot-stack status` reads it (`edge.central`, the retained ``[tenants/{t}/]sites/{s}/state``
and ``status`` messages on the central Mosquitto), kept up to date by one subscription.

Mosquitto down or the login refused: the watch retries in the background and the page says
the sites are not read, rather than failing the console."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from edge.central import CentralWatch
from edge.errors import EdgeError

log = logging.getLogger(__name__)
RETRY_S = 5.0


class SitesWatch:
    def __init__(self, host: str, port: int, username: str, password_file: str) -> None:
        self.host, self.port, self.username = host, port, username
        self.password_file = Path(password_file)
        self.error = ""  # connecting: no error to show yet
        self._watch: CentralWatch | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="console-sites", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                password = self.password_file.read_text().strip()
                watch = CentralWatch(self.host, self.port, self.username, password)
                watch.start()
            except (EdgeError, OSError) as exc:
                self.error = str(exc)
                log.warning("console: edge sites not read (%s); retrying", exc)
                self._stop.wait(RETRY_S)
                continue
            self._watch, self.error = watch, ""  # paho reconnects it from now on
            return

    def views(self) -> dict[str, Any]:
        """{"sites": [per site: tenant, site, link, last_seen_s, held_messages], "error"}."""
        watch = self._watch
        if watch is None:
            return {"sites": [], "error": self.error}
        return {"sites": [v.as_dict() for v in watch.views()], "error": ""}

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._watch is not None:
            self._watch.stop()
