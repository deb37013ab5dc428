"""A real headless Chromium driven over the DevTools protocol, for tests that open pages.

``Browser`` starts Chromium with a throw-away profile and remote debugging on a free
port (read back from the profile's ``DevToolsActivePort`` file), talks to it over one
websocket, and opens pages in tabs attached in flat mode. A ``Page`` loads a URL,
evaluates JavaScript, takes screenshots and keeps every console message and uncaught
exception the page produced.

``find_chromium`` returns None when no Chromium is installed; tests skip then.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
"""Executable names looked for on PATH, in order."""

ENV_VARIABLE = "DOCPILOT_CHROMIUM"
"""Environment variable naming the browser executable, overriding the PATH search."""

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio",
)
"""Flags that keep the browser headless, quiet and off the network."""

START_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 30.0


def find_chromium() -> str | None:
    """Path of a Chromium executable, or None when none is installed."""
    named = os.environ.get(ENV_VARIABLE)
    if named:
        return named if Path(named).is_file() else shutil.which(named)
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


class BrowserError(RuntimeError):
    """The browser did not start, or a DevTools command failed."""


@dataclass
class ConsoleEntry:
    """One console message, log entry or uncaught exception of a page."""

    level: str
    """`log`, `info`, `warning`, `error`, … (`exception` for an uncaught exception)."""
    text: str
    """What was printed."""


@dataclass
class Page:
    """One tab: load a URL, run JavaScript, take screenshots; console output is collected."""

    browser: Browser
    session: str
    target: str
    console: list[ConsoleEntry] = field(default_factory=list)

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a DevTools command to this tab and return its result."""
        return self.browser.send(method, params, session=self.session)

    def goto(self, url: str) -> None:
        """Load ``url`` and wait for its load event."""
        self.browser.drain()
        self.send("Page.navigate", {"url": url})
        self.browser.wait_for("Page.loadEventFired", session=self.session)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self, path: str | Path, *, full_page: bool = False) -> Path:
        """Save a PNG screenshot of the page (or the whole scrolled page) and return its path."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params)["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path

    def set_viewport(self, width: int, height: int, scale: float = 1.0) -> None:
        """Size the tab's viewport, in CSS pixels."""
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": False})

    def errors(self) -> list[ConsoleEntry]:
        """Console errors and uncaught exceptions seen so far."""
        self.browser.drain()
        return [e for e in self.console if e.level in ("error", "exception")]

    def close(self) -> None:
        """Close the tab."""
        self.browser.send("Target.closeTarget", {"targetId": self.target})


class Browser:
    """A headless Chromium process and a DevTools connection to it; use as a context manager."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self._profile = tempfile.mkdtemp(prefix="docpilot-chromium-")
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: Any = None
        self._ids = itertools.count(1)
        self._pages: dict[str, Page] = {}
        self._events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the browser and connect to it."""
        args = [self.executable, *FLAGS, f"--user-data-dir={self._profile}", "--remote-debugging-port=0",
                "about:blank"]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            lines = port_file.read_text().splitlines() if port_file.is_file() else []
            if len(lines) >= 2:
                break
            if self._process.poll() is not None:
                stderr = self._process.stderr.read().decode(errors="replace") if self._process.stderr else ""
                raise BrowserError(f"{self.executable} exited with {self._process.returncode}: {stderr[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrowserError(f"{self.executable} wrote no DevToolsActivePort in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        port, path = lines[0].strip(), lines[1].strip()
        self._socket = connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=START_TIMEOUT_S)

    def stop(self) -> None:
        """Close the connection, end the browser process (this one only) and remove its profile."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
            if self._process.stderr:
                self._process.stderr.close()
            self._process = None
        shutil.rmtree(self._profile, ignore_errors=True)

    def new_page(self) -> Page:
        """Open a blank tab with page, runtime and log events turned on."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(browser=self, session=session, target=target)
        self._pages[session] = page
        for domain in ("Page", "Runtime", "Log"):
            page.send(f"{domain}.enable")
        return page

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None) -> dict[str, Any]:
        """Send a command and wait for its reply; events that arrive meanwhile are kept."""
        if self._socket is None:
            raise BrowserError("the browser is not running; use it inside `with Browser(...)`")
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._socket.send(json.dumps(message))
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while True:
            reply = self._receive(deadline, method)
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})

    def wait_for(self, event: str, *, session: str | None = None, timeout: float = COMMAND_TIMEOUT_S) -> dict:
        """Wait for the next ``event`` (of ``session``) and return its params."""
        deadline = time.monotonic() + timeout
        while True:
            for i, seen in enumerate(self._events):
                if seen.get("method") == event and (session is None or seen.get("sessionId") == session):
                    del self._events[i]
                    return seen.get("params", {})
            self._receive(deadline, event)

    def drain(self) -> None:
        """Read the messages already waiting, so console output is up to date."""
        while True:
            try:
                self._receive(time.monotonic() + 0.05, "", quiet=True)
            except TimeoutError:
                return

    def _receive(self, deadline: float, waiting_for: str, *, quiet: bool = False) -> dict[str, Any]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no reply to {waiting_for} in time")
        try:
            message = json.loads(self._socket.recv(timeout=remaining))
        except TimeoutError:
            if quiet:
                raise
            raise TimeoutError(f"no reply to {waiting_for} within {COMMAND_TIMEOUT_S:.0f} s") from None
        if "method" in message:
            self._record(message)
        return message

    def _record(self, event: dict[str, Any]) -> None:
        page = self._pages.get(event.get("sessionId", ""))
        params = event.get("params", {})
        method = event["method"]
        if page is not None and method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            page.console.append(ConsoleEntry(level=params.get("type", "log"), text=text))
        elif page is not None and method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            page.console.append(ConsoleEntry(level="exception", text=text))
        elif page is not None and method == "Log.entryAdded":
            entry = params.get("entry", {})
            page.console.append(ConsoleEntry(level=entry.get("level", "info"), text=entry.get("text", "")))
        else:
            self._events.append(event)
