"""Tests, benches and CI target only this machine: no file under tests/, bench/ or .ci/
names an IPv4 address outside loopback and the documentation ranges (RFC 5737), except
the few below, each with why it never leaves this machine."""

from __future__ import annotations

import ipaddress
import re
import subprocess

from conftest import REPO

#: where an address may appear, and why it is not a host outside this machine
ALLOWED = {
    # slirp4netns's own network, inside a sandbox the test made: 10.0.2.2 is its gateway
    # (the host's loopback, which the harness disables), 10.0.2.3 its DNS forwarder
    ipaddress.ip_network("10.0.2.0/24"): "slirp4netns's network inside the test's sandbox",
    # named as the prohibit route the harness adds (cloud metadata services), never dialled
    ipaddress.ip_network("169.254.0.0/16"): "the link-local route the sandbox blocks",
}
DOCUMENTATION = [ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")]
ADDRESS = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d{1,3}){3})(?![\w.]*\d)")


def _addresses(text: str) -> list[ipaddress.IPv4Address]:
    found = []
    for match in ADDRESS.finditer(text):
        try:
            found.append(ipaddress.IPv4Address(match.group(1)))
        except ValueError:  # 999.1.2.3: not an address
            continue
    return found


def _outside(address: ipaddress.IPv4Address) -> bool:
    return not (
        address.is_loopback
        or address.is_unspecified  # 0.0.0.0: a bind to every interface of this machine
        or any(address in net for net in DOCUMENTATION)
        or any(address in net for net in ALLOWED)
    )


def test_the_check_sees_an_outside_address_and_lets_local_ones_pass():
    # made up here, so that this file names none itself
    public, private = ".".join(["1"] * 4), ".".join(map(str, (172, 17, 0, 1)))
    assert [str(a) for a in _addresses(f"connect(('{public}', 53)); v1.2.3.4.5; 127.0.0.1")] == [public, "127.0.0.1"]
    assert _outside(ipaddress.IPv4Address(public)) and _outside(ipaddress.IPv4Address(private))
    assert not any(_outside(ipaddress.IPv4Address(a)) for a in ("127.0.0.1", "0.0.0.0", "192.0.2.7", "10.0.2.2"))


def test_no_test_bench_or_ci_file_names_a_host_outside_this_machine():
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--", "tests", "bench", ".ci"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    offending = []
    for rel in filter(None, listed.split("\0")):
        path = REPO / rel
        if not path.is_file() or path.is_symlink():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a binary fixture
            continue
        offending += [f"{rel}: {a}" for a in _addresses(text) if _outside(a)]
    assert not offending, "addresses outside this machine:\n" + "\n".join(offending)
