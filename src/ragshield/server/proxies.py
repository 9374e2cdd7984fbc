"""Who the client is: the socket peer, or the address a trusted reverse proxy forwarded.

The failed-authentication throttle and the access log key on the client address. Behind a
reverse proxy every request comes from the proxy, so all users would share one throttle
bucket; trusting ``X-Forwarded-For`` from anyone would let a client name its own address
and dodge the throttle. So the header is read only when the peer is one of
``auth.trusted_proxies``, and then with the usual right-to-left rule: each proxy *appends*
the address it saw, so the right-most entry that is not itself a trusted proxy is the
client (entries to its left were written by the client and prove nothing). A malformed
entry reached before that address makes the header worthless: the peer is used instead.
When every entry is a trusted proxy, the left-most one is the client.

Example::

    proxies = TrustedProxies.parse(["10.0.0.0/8"])
    proxies.client("10.0.0.5", ["203.0.113.7, 10.0.0.9"])  # -> "203.0.113.7"
    proxies.client("198.51.100.1", ["203.0.113.7"])        # -> "198.51.100.1" (untrusted peer)
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

UNKNOWN = "unknown"  # no peer address (e.g. a Unix socket)


def parse_networks(entries: Iterable[str]) -> tuple[IPNetwork, ...]:
    """IPs and CIDRs as networks; ``ValueError`` names the first bad entry."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip()))
            continue
        except ValueError as exc:
            error = exc
        try:  # "10.0.0.1/8": a network written with a host's address
            loose = ipaddress.ip_network(entry.strip(), strict=False)
        except ValueError:
            raise ValueError(
                f"{entry!r} is not an IP address or CIDR network ({error}); "
                "write e.g. 10.0.0.5, 10.0.0.0/8 or fd00::/8"
            ) from None
        raise ValueError(
            f"{entry!r} has host bits set: write {loose} for the network, or the address "
            "alone for one host"
        )
    return tuple(networks)


def parse_address(text: str) -> IPAddress | None:
    """One forwarded address (``1.2.3.4``, ``1.2.3.4:80``, ``::1``, ``[::1]:443``), or None.

    An IPv4-mapped IPv6 address (``::ffff:10.0.0.1``, what a dual-stack socket reports)
    becomes the IPv4 address, so it matches IPv4 networks.
    """
    host = text.strip()
    if host.startswith("["):
        end = host.find("]")
        if end < 0 or (host[end + 1 :] and not host[end + 1 :].startswith(":")):
            return None
        host = host[1:end]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@dataclass(frozen=True)
class TrustedProxies:
    """The reverse proxies whose ``X-Forwarded-For`` is believed (empty: nobody's)."""

    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> TrustedProxies:
        return cls(parse_networks(entries))

    def trusts(self, ip: IPAddress) -> bool:
        return any(ip in net for net in self.networks)

    def client(self, peer: str | None, forwarded_for: Sequence[str]) -> str:
        """The client address of a request from ``peer`` carrying these header values."""
        if not peer:
            return UNKNOWN
        peer_ip = parse_address(peer)
        if not self.networks or peer_ip is None or not self.trusts(peer_ip):
            return peer
        hops = [hop for value in forwarded_for for hop in value.split(",")]
        leftmost = None
        for hop in reversed(hops):
            ip = parse_address(hop)
            if ip is None:
                return str(peer_ip)  # malformed before any untrusted hop: header worthless
            if not self.trusts(ip):
                return str(ip)
            leftmost = ip
        return str(leftmost or peer_ip)

    def client_of(self, scope: Mapping[str, Any]) -> str:
        """:meth:`client` of an ASGI request scope."""
        peer = scope.get("client")
        forwarded = [
            value.decode("latin-1")
            for name, value in scope.get("headers") or ()
            if name.lower() == b"x-forwarded-for"
        ]
        return self.client(peer[0] if peer else None, forwarded)
