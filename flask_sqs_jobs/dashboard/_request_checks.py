"""Where a request is addressed and which site sent it.

- The ``Host`` a request names: a dashboard without ``authorize`` (the
  standalone server, ``allow_anonymous=True``) answers only loopback names, so
  that a page of another site whose name was made to resolve to 127.0.0.1
  (DNS rebinding) cannot read or act through the browser.
- State-changing requests from another site are refused (``Sec-Fetch-Site``,
  else ``Origin``) whatever cookies they carry, in front of the CSRF token.
- A dead-letter page peeks (a receive) only for a page load or a script of the
  dashboard's own origin, never for an ``<img>``, a prefetch or a link from
  another site.

Fetch metadata (``Sec-Fetch-*``) is sent by every current browser and cannot
be set by a page; a client without it (curl, a script, a very old browser) is
judged by ``Origin`` and ``Referer`` when it sends them.
"""

from __future__ import annotations

import ipaddress
import urllib.parse

from flask import Request

#: Methods that never change anything; every other one is checked for its site.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: ``Sec-Fetch-Site`` values of a request this origin's pages (or the user) made.
_OWN_SITES = frozenset({"same-origin", "none"})
#: (``Sec-Fetch-Mode``, ``Sec-Fetch-Dest``) of a page load and of a script's fetch.
_PAGE_FETCHES = frozenset(
    {("navigate", "document"), ("cors", "empty"), ("same-origin", "empty")}
)
LOOPBACK_NAMES = "localhost, 127.0.0.1 or [::1]"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ::1)."""
    name = host.lower()
    if name == "localhost":
        return True
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def split_host(host: str) -> tuple[str, int | None] | None:
    """A ``Host`` header's name (lower case, IPv6 without brackets) and port.

    None when the value is not a host: an IPv6 address must be bracketed, a
    port is 1 to 5 ASCII digits.
    """
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        if not bracket:
            return None
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
    else:
        name, colon, port = host.partition(":")
        rest = colon + port
    if not rest:
        return name.lower(), None
    digits = rest[1:]
    if not rest.startswith(":") or not (digits.isascii() and digits.isdigit()):
        return None
    if len(digits) > 5:
        return None
    return name.lower(), int(digits)


def loopback_host_problem(host: str | None, port: int | None = None) -> str | None:
    """Why ``host`` (a ``Host`` value) is refused, or None when it is loopback.

    With ``port``, the Host must also name that port (80 when it names none).
    """
    parts = None if host is None else split_host(host)
    if host is None or parts is None:
        shown = "no Host" if host is None else f"Host {host!r}"
        return f"{shown} is not a host name this dashboard answers to"
    name, named_port = parts
    if not is_loopback(name):
        return (
            f"Host {host!r} is not a loopback name ({LOOPBACK_NAMES}): it may be"
            " a page of another site whose name now points to this machine (DNS"
            " rebinding)"
        )
    if port is not None and (80 if named_port is None else named_port) != port:
        return f"Host {host!r} names another port than this dashboard's ({port})"
    return None


def cross_site_problem(request: Request) -> str | None:
    """Why a state-changing ``request`` is refused as cross-site, or None.

    ``Sec-Fetch-Site`` must say ``same-origin`` (or ``none``: the user's own
    action); without it an ``Origin`` must name this host. A request with
    neither is no browser's cross-site request; the CSRF token still decides.
    """
    if request.method in SAFE_METHODS:
        return None
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        if site.lower() in _OWN_SITES:
            return None
        return (
            f"this request came from another site (Sec-Fetch-Site: {site}):"
            " redrive and delete only from the dashboard's own pages"
        )
    origin = request.headers.get("Origin")
    if origin is None or _same_host(origin, request.host):
        return None
    return (
        f"this request came from another site (Origin: {origin}, this"
        f" dashboard: {request.host}): redrive and delete only from the"
        " dashboard's own pages"
    )


def peek_refusal(request: Request) -> str | None:
    """Why this request must not peek at dead letters, or None when it may.

    Only a GET that loads the page itself (a navigation of this origin, or
    the user's own: typed, bookmarked) or a script of this origin may.
    """
    if request.method != "GET":
        return f"a {request.method} request shows no dead letters"
    purpose = request.headers.get("Sec-Purpose") or request.headers.get("Purpose")
    if purpose:
        return f"the browser is only prefetching this page ({purpose})"
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        if site.lower() not in _OWN_SITES:
            return f"you came here from another site (Sec-Fetch-Site: {site})"
        mode = request.headers.get("Sec-Fetch-Mode", "").lower()
        dest = request.headers.get("Sec-Fetch-Dest", "").lower()
        if (mode, dest) not in _PAGE_FETCHES:
            return (
                f"the browser is not loading this page (Sec-Fetch-Dest: {dest},"
                f" Sec-Fetch-Mode: {mode})"
            )
        return None
    for name in ("Origin", "Referer"):
        value = request.headers.get(name)
        if value and not _same_host(value, request.host):
            return f"the request came from another site ({name}: {value})"
    return None


def _same_host(url: str, host: str) -> bool:
    """Whether ``url`` (an Origin or a Referer) is on ``host`` (scheme aside)."""
    try:
        netloc = urllib.parse.urlsplit(url).netloc
    except ValueError:
        return False
    return bool(netloc) and netloc.lower() == host.lower()
