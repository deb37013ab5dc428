"""DocPilot's HTTP connections: one TLS context per process, proxies from the environment, sessions.

Every asker speaks aiohttp: the openai model, DocPilot's server client and the targets'
client. aiohttp sessions belong to the event loop they were made in, and each asker
keeps one pool of kept-alive connections. What is read from the environment (CA
certificates, proxies) is read once, when a model or a session is made, not on every
request.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
import urllib.request
import warnings
from collections.abc import Mapping
from typing import Any

import aiohttp
import certifi
from yarl import URL

from docpilot.errors import ConfigError

CONNECTIONS = 64
"""Kept-alive connections per model: as many turns as one model serves at once."""
IDLE_S = 4.0
"""Idle connections are dropped a little sooner than the 5 s after which uvicorn-based
servers (vLLM among them) close theirs, so a turn never picks one the server is closing."""


@functools.lru_cache(maxsize=4)
def _load_tls_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    # Loading CA certificates is slow, so every client of a process shares one context.
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def tls_context(env: Mapping[str, str] = os.environ) -> ssl.SSLContext:
    """The TLS context for the process: ``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's bundle."""
    cafile = env.get("SSL_CERT_FILE") or None
    capath = None if cafile else env.get("SSL_CERT_DIR") or None
    try:
        return _load_tls_context(cafile, capath)
    except OSError as exc:  # ssl.SSLError included
        variable = "SSL_CERT_FILE" if cafile else "SSL_CERT_DIR"
        raise ConfigError(
            f"cannot load CA certificates from {variable}={cafile or capath} ({exc})",
            hint=f"point {variable} at a readable PEM bundle (or directory of certificates), or unset it",
        ) from exc


def _proxy_for(url: URL) -> URL | None:
    """The proxy the environment names for ``url``, with any credentials in it; None for a direct request."""
    proxies = urllib.request.getproxies_environment()
    address = proxies.get(url.scheme) or proxies.get("all")
    if not address or urllib.request.proxy_bypass_environment(url.host or "", proxies):
        return None
    proxy = URL(address if "://" in address else f"http://{address}")
    if proxy.scheme not in ("http", "https"):
        raise ConfigError(
            f"the proxy the environment names for {url.scheme}:// requests is a {proxy.scheme} proxy, "
            "which DocPilot's HTTP clients cannot use",
            hint="point HTTP_PROXY / HTTPS_PROXY / ALL_PROXY at an http:// or https:// proxy, "
            "or list the endpoint's host in NO_PROXY",
        )
    return proxy


def env_proxy(url: URL) -> tuple[URL | None, str | None]:
    """The proxy ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` name for ``url`` unless ``NO_PROXY``
    exempts its host, and the ``Proxy-Authorization`` value for credentials in the proxy's URL."""
    proxy = _proxy_for(url)
    if proxy is None or proxy.user is None:
        return proxy, None
    return proxy.with_user(None), aiohttp.encode_basic_auth(proxy.user, proxy.password or "")


def close_abandoned(session: aiohttp.ClientSession, loop: asyncio.AbstractEventLoop) -> None:
    """Close a session whose event loop is not the running one, without waiting on that loop."""
    if loop.is_running():  # in another thread
        asyncio.run_coroutine_threadsafe(session.close(), loop)
        return
    # The loop is not running (asyncio.run has ended it), so nothing can be waited for. On an
    # ended loop, closing only marks the session and its pool closed and finishes at its first
    # step, which keeps aiohttp from logging an unclosed session; the sockets are shut as their
    # transports are collected. A close that would wait (a loop stopped, not ended) is given up.
    closing = session.close()
    try:
        closing.send(None)
    except StopIteration:
        return
    closing.close()


def new_session(tls: ssl.SSLContext | None, connections: int = CONNECTIONS) -> aiohttp.ClientSession:
    """A session for the running event loop, with its own pool of kept-alive connections."""
    connector = aiohttp.TCPConnector(limit=connections, keepalive_timeout=IDLE_S, ssl=tls)
    return aiohttp.ClientSession(connector=connector)


def routed_session(url: str, *, connections: int = CONNECTIONS,
                   timeout: aiohttp.ClientTimeout | None = None) -> aiohttp.ClientSession:
    """A session for the running event loop that asks the service at ``url`` as the environment routes it.

    The proxy ``HTTP(S)_PROXY`` / ``NO_PROXY`` name for ``url`` (with the credentials in its
    URL) and the TLS context (for an https URL or proxy) are read here, once; every request
    of the session goes that way. ``timeout`` bounds each request (aiohttp's default when None).
    """
    target = URL(url)
    proxy = _proxy_for(target)
    speaks_tls = target.scheme == "https" or (proxy is not None and proxy.scheme == "https")
    connector = aiohttp.TCPConnector(limit=connections, keepalive_timeout=IDLE_S,
                                     ssl=tls_context() if speaks_tls else True)
    options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    if proxy is not None:
        options["proxy"] = proxy.with_user(None)
    if proxy is None or proxy.user is None:
        return aiohttp.ClientSession(connector=connector, **options)
    if target.scheme == "http":  # a plain request goes to the proxy itself, its credentials with it
        credentials = aiohttp.encode_basic_auth(proxy.user, proxy.password or "")
        return aiohttp.ClientSession(connector=connector, headers={"Proxy-Authorization": credentials}, **options)
    # A tunnel's credentials go with its CONNECT, which only the session-wide proxy_auth reaches
    # (deprecated for aiohttp 4, which pyproject.toml keeps out).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        auth = aiohttp.BasicAuth(proxy.user, proxy.password or "")
        return aiohttp.ClientSession(connector=connector, proxy_auth=auth, **options)
