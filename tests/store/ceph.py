"""A one-node Ceph cluster with a RADOS Gateway: a real S3 server that checks
AWS Signature V4, for the snapshot tests.

One monitor, one OSD on memstore (objects in the OSD's memory), radosgw on a
loopback port, no cephx (auth none), everything under one short temp folder:
its config, data, logs, sockets and pid files. Debian's ceph-mon, ceph-osd and
radosgw (scripts/deps.sh installs them). The daemons detach, so stop() ends
exactly the processes start() began: by the pid each wrote, and only when that
pid's command line still names this cluster's config (a pid may be reused);
radosgw first, then the OSD, then the monitor.

    store = Ceph.start()          # raises CephUnavailable with the reason
    store.endpoint                # "http://127.0.0.1:PORT"
    store.access_key, store.secret_key, store.bucket, store.region
    store.stop()
"""
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import s3sign

BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph")


class CephUnavailable(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """[global]
fsid = {fsid}
mon_host = v2:127.0.0.1:{mon_port}
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_msgr1 = false
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
ms_cluster_mode = crc
ms_service_mode = crc
ms_client_mode = crc
ms_mon_cluster_mode = crc
ms_mon_service_mode = crc
ms_mon_client_mode = crc
run_dir = {dir}/run
admin_socket = {dir}/run/$name.asok
pid_file = {dir}/run/$name.pid
log_file = {dir}/log/$name.log
log_to_stderr = false
err_to_stderr = false
mon_cluster_log_file = {dir}/log/cluster.log
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
paxos_propose_interval = 0.01
mon_data_avail_warn = 1
mon_data_avail_crit = 0
[mon]
mon_data = {dir}/mon
[osd]
osd_objectstore = memstore
osd_data = {dir}/osd
memstore_device_bytes = {memstore_bytes}
osd_max_object_size = 1073741824
[client.rgw]
rgw_frontends = beast endpoint=127.0.0.1:{rgw_port}
rgw_data = {dir}/rgw
rgw_dns_name = 127.0.0.1
rgw_gc_obj_min_wait = 10
rgw_gc_processor_period = 10
"""


class Ceph:
    def __init__(self, root):
        self.dir = root
        self.conf = os.path.join(root, "ceph.conf")
        self.mon_port = free_port()
        self.rgw_port = free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.rgw_port
        self.access_key = "CODEPODTESTKEY" + uuid.uuid4().hex[:6].upper()
        self.secret_key = uuid.uuid4().hex + uuid.uuid4().hex[:8]
        self.region = "us-east-1"
        self.bucket = "codepod-snapshots"
        self.start_seconds = None

    # -- life --------------------------------------------------------------
    @classmethod
    def start(cls, memstore_bytes=2 << 30, timeout=90):
        missing = [b for b in BINARIES if not shutil.which(b)]
        if missing:
            raise CephUnavailable("not installed: %s (scripts/deps.sh)" % " ".join(missing))
        # Unix socket paths are limited to 107 bytes: a short folder.
        root = tempfile.mkdtemp(prefix="cph", dir="/tmp")
        c = cls(root)
        t0 = time.monotonic()
        try:
            c._start(memstore_bytes, time.monotonic() + timeout)
        except BaseException:
            c.stop()
            raise
        c.start_seconds = time.monotonic() - t0
        return c

    def _run(self, *argv, timeout=60):
        r = subprocess.run(list(argv), cwd=self.dir, capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise CephUnavailable("%s failed (%d): %s%s" % (
                argv[0], r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
        return r.stdout

    def _start(self, memstore_bytes, deadline):
        for d in ("run", "log", "mon", "osd", "rgw"):
            os.makedirs(os.path.join(self.dir, d))
        fsid = str(uuid.uuid4())
        with open(self.conf, "w") as f:
            f.write(CONF.format(fsid=fsid, dir=self.dir, mon_port=self.mon_port,
                                rgw_port=self.rgw_port, memstore_bytes=memstore_bytes))
        monmap = os.path.join(self.dir, "monmap")
        self._run("monmaptool", "--create", "--fsid", fsid,
                  "--addv", "a", "[v2:127.0.0.1:%d]" % self.mon_port, monmap)
        c = ("-c", self.conf)
        self._run("ceph-mon", *c, "--mkfs", "-i", "a", "--monmap", monmap)
        self._run("ceph-mon", *c, "-i", "a")
        osd_uuid = str(uuid.uuid4())
        osd_id = self._run("ceph", *c, "osd", "new", osd_uuid).strip()
        if osd_id != "0":
            raise CephUnavailable("unexpected OSD id %r" % osd_id)
        self._run("ceph-osd", *c, "-i", "0", "--mkfs", "--osd-uuid", osd_uuid)
        self._run("ceph-osd", *c, "-i", "0")
        self._run("radosgw", *c, "-n", "client.rgw")
        self._run("radosgw-admin", *c, "user", "create", "--uid", "codepod",
                  "--display-name", "codepod tests", "--access-key", self.access_key,
                  "--secret", self.secret_key)
        # The bucket, made through S3 itself: the first signed PUT that works
        # says the gateway is up.
        last = None
        while time.monotonic() < deadline:
            try:
                st, body = self.request("PUT", "/" + self.bucket)
                if st in (200, 409):
                    return
                last = "HTTP %d %s" % (st, body[:300])
            except OSError as e:
                last = str(e)
            time.sleep(0.1)
        raise CephUnavailable("radosgw did not answer: %s; log: %s" % (
            last, self.log_tail("client.rgw")))

    def log_tail(self, name, n=2000):
        try:
            with open(os.path.join(self.dir, "log", name + ".log"), errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def _pid_of(self, name):
        try:
            with open(os.path.join(self.dir, "run", name + ".pid")) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmdline = f.read().split(b"\0")
        except OSError:
            return None
        # Only a process started with this cluster's config is ours.
        return pid if self.conf.encode() in cmdline else None

    def stop_daemon(self, name, timeout=30):
        """SIGTERM, then SIGKILL, to the daemon @name (client.rgw, osd.0,
        mon.a) when it is still the one this cluster started."""
        pid = self._pid_of(name)
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        end = time.monotonic() + timeout
        while time.monotonic() < end and os.path.exists("/proc/%d" % pid):
            if self._pid_of(name) != pid:
                return
            time.sleep(0.05)
        if self._pid_of(name) == pid:
            os.kill(pid, signal.SIGKILL)

    def stop_gateway(self):
        self.stop_daemon("client.rgw")

    def start_gateway(self, deadline_s=60):
        """Starts radosgw again after stop_gateway(); returns once it answers."""
        self._run("radosgw", "-c", self.conf, "-n", "client.rgw")
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                st, _ = self.request("HEAD", "/" + self.bucket)
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise CephUnavailable("radosgw did not come back")

    def stop(self):
        for name in ("client.rgw", "osd.0", "mon.a"):
            self.stop_daemon(name)
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- a client of its own (tests/store/s3sign.py), to look behind codepod
    def request(self, method, path, body=b"", query="", headers=None, secret=None):
        return s3sign.request(self.endpoint, self.region, self.access_key,
                              secret or self.secret_key, method, path, body=body,
                              query=query, headers=headers)

    def env(self):
        """The environment a codepod uses for this store."""
        return {"AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key}

    def flags(self, prefix="snap"):
        return ["--snapshot-url", "s3://%s/%s" % (self.bucket, prefix),
                "--s3-endpoint", self.endpoint, "--s3-region", self.region]


@contextlib.contextmanager
def running(fail):
    """A started store for a with-block, stopped at its end; `fail(why)`
    (pytest.fail) when it cannot start."""
    try:
        c = Ceph.start()
    except CephUnavailable as e:
        fail("the test store did not start: %s" % e)
    try:
        yield c
    finally:
        c.stop()
