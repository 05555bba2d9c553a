"""Socket families and process personality (runner/local/syscall_filter.c):
a program (python3, as the host has it, started from Node) cannot create a
vsock (a VM's host, which no network namespace covers), a packet socket, any
netlink socket but NETLINK_ROUTE, or any other family but IPv4 and IPv6; it
cannot turn off address randomisation through personality(2) nor touch x86's
LDT. Node's own calls that need NETLINK_ROUTE still work: os.networkInterfaces()
and dns.lookup() with ADDRCONFIG.

The kernel's own answer for some of these is EPERM too (AF_PACKET without
CAP_NET_RAW); tests/e2e/test_syscall_filter.py tells the filter's answer from
the kernel's. Here the point is what a program gets, in every local mode.

Pods: the runner there has no filter of codepod's (a pod's runtime profile
only) until the pod helper that would install it exists; not tested there."""
import json
import platform

from hostile import local_only

PROBE = r"""
import ctypes, errno, json, socket
out = {}
for name, fam, typ, proto in [
        ("vsock", 40, socket.SOCK_STREAM, 0), ("packet", 17, socket.SOCK_RAW, 0),
        ("netlink_audit", 16, socket.SOCK_RAW, 9), ("netlink_uevent", 16, socket.SOCK_DGRAM, 15),
        ("netlink_sock_diag", 16, socket.SOCK_DGRAM, 4), ("netlink_xfrm", 16, socket.SOCK_RAW, 6),
        ("bluetooth", 31, socket.SOCK_STREAM, 0), ("can", 29, socket.SOCK_RAW, 1),
        ("alg", 38, socket.SOCK_SEQPACKET, 0), ("xdp", 44, socket.SOCK_RAW, 0),
        ("tipc", 30, socket.SOCK_RDM, 0), ("unix", 1, socket.SOCK_STREAM, 0),
        ("netlink_route", 16, socket.SOCK_RAW, 0), ("inet6_udp", 10, socket.SOCK_DGRAM, 0)]:
    try:
        socket.socket(fam, typ, proto).close()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
libc = ctypes.CDLL(None, use_errno=True)
def call(f, *args):
    r = f(*args)
    return r if r >= 0 else errno.errorcode[ctypes.get_errno()]
for name, v in [("addr_no_randomize", 0x0040000), ("read_implies_exec", 0x0400000),
                ("query", 0xffffffff)]:
    out["personality_" + name] = call(libc.personality, ctypes.c_ulong(v))
if __import__("platform").machine() == "x86_64":
    out["modify_ldt"] = call(libc.syscall, 154, 0, 0, 0)  # SYS_modify_ldt
print(json.dumps(out))
"""

JS = f"""const cp = require('node:child_process');
const os = require('node:os');
const dns = require('node:dns');
const probe = JSON.parse(cp.execFileSync('/usr/bin/python3', ['-c', {json.dumps(PROBE)}]).toString());
const ifs = Object.keys(os.networkInterfaces());
const lookup = await dns.promises.lookup('localhost', {{ hints: dns.ADDRCONFIG }})
  .then((a) => a.address, (e) => e.code);
return {{ probe, ifs, lookup }};"""


@local_only
def test_exotic_socket_families_and_personality_are_refused(hs):
    r = hs.run(JS)
    assert r.get("status") == "succeeded", r
    got = r["result"]
    refused = ["vsock", "packet", "netlink_audit", "netlink_uevent", "netlink_sock_diag",
               "netlink_xfrm", "bluetooth", "can", "alg", "xdp", "tipc", "unix",
               "personality_addr_no_randomize", "personality_read_implies_exec",
               "personality_query"]
    if platform.machine() == "x86_64":
        refused.append("modify_ldt")
    wrong = {n: got["probe"].get(n) for n in refused if got["probe"].get(n) != "EPERM"}
    assert not wrong, f"created or allowed (want EPERM): {wrong}"
    assert got["probe"]["netlink_route"] == "ok" and got["probe"]["inet6_udp"] == "ok", got
    # Node's own calls that read the namespace's addresses over NETLINK_ROUTE
    # (which loopback address `localhost` gives first is the host's
    # /etc/hosts and gai.conf: Debian's names both, and may give ::1)
    assert got["ifs"] == ["lo"] and got["lookup"] in ("127.0.0.1", "::1"), got
    hs.next_works()
