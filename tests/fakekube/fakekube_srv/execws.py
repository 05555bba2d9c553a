"""Exec over WebSocket: v5.channel.k8s.io and v4.channel.k8s.io.

The command is a REAL local process. Its cwd is the pod's own folder under
the state dir (standing for the container's filesystem), which a sandboxed
exec of a pod mounting a volume at /workspace (codepod's pod template) sees
there instead, as its working folder. As root, every exec
of a pod joins (nsenter) the pod's own namespaces, made by bwrap on its first
exec: one PID namespace whose PID 1 adopts orphans, no network, host
read-only, a private /tmp; so, as in a real container, one exec can see and
kill the processes of another. Unprivileged, each exec gets a bwrap of its
own in the host's PID namespace; without bwrap, a plain subprocess.

Framing (apimachinery wsstream): every message is binary, byte 0 is the
channel: 0 stdin, 1 stdout, 2 stderr, 3 error/status, 4 resize, 255 close (v5
only, [0xFF, ch] half-closes channel ch). The first server message is a lone
channel byte on the lowest requested output channel. The last data message is
the Status on channel 3, then a close frame 1000.

Backpressure: stdout/stderr are read in 32 KiB pieces and the next read waits
until aiohttp's writer has drained (send_bytes awaits it); stdin is written
one message at a time and the next message is not read before the pipe has
drained. Nothing is buffered without bound in either direction.

Each exec runs in a session and process group of its own (as a runtime's
exec does), so a program signalling its parent's group (`process.kill(
process.ppid, 'SIGKILL')` is kill(0, ...) from inside a PID namespace) hits
only its own exec, never the fake. As root, the fake also applies the parts
of the pod's securityContext that isolation depends on, through setpriv:
runAsUser/runAsGroup (pod level, container level winning), fsGroup and
supplementalGroups, runAsNonRoot (an exec as uid 0 is refused as the
kubelet would refuse the container), capabilities (the runtime's default
set, less `drop`, plus `add`; `ALL` drops every one) as the bounding set,
and allowPrivilegeEscalation: false as no_new_privs, plus a process limit
standing for the kubelet's pids limit (POD_PIDS_LIMIT per uid). The root filesystem is
always read-only (readOnlyRootFilesystem: true or not; stricter than a real
node), the pod's folder and /tmp are writable like emptyDirs (0777, group
fsGroup).

As on a real node, closing the WebSocket does NOT kill the process (see
docs/kubernetes.md §3.5): it sees stdin EOF and, once it writes, EPIPE. Pod deletion
kills every process of the pod (its PID namespace, and anything found by its
FAKEKUBE_POD environment), and server shutdown kills the pods' namespaces
(bwrap --die-with-parent).
"""
import asyncio
import json
import os
import shutil
import subprocess
import time

from aiohttp import web, WSMsgType

from . import status as st
from .store import ApiError

V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
CHUNK = 32 * 1024
# The checkout this fake belongs to (its Node lives in .deps/).
CHECKOUT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _under_tmp(path):
    return path.startswith("/tmp/")


def _closed_ancestor(path):
    """The highest folder on the way to `path` that other users cannot search
    (e.g. /root, mode 0700), or None."""
    parts = path.split("/")
    for i in range(2, len(parts)):
        d = "/".join(parts[:i])
        try:
            if not os.stat(d).st_mode & 0o001:
                return d
        except OSError:
            return None
    return None


def host_binds_over_tmp(exec_path):
    """A pod's /tmp is its own, which would hide a checkout (and its Node)
    living under the host's /tmp: bind those back, read-only, over it. A
    checkout behind a folder other users cannot search (/root, mode 0700)
    would be out of reach of a pod's non-root user, as a node's image is
    not: such a folder becomes an empty searchable one in the pod, with the
    checkout bound back inside it."""
    keep = [CHECKOUT] + [os.path.realpath(d) for d in exec_path.split(":") if d]
    out = []
    covered = []
    for p in dict.fromkeys(keep):
        if not os.path.isdir(p) or any(p == c or p.startswith(c + "/") for c in covered):
            continue
        if _under_tmp(p):
            out += [*_walkable_under_tmp(p), "--ro-bind", p, p]
            covered.append(p)
            continue
        closed = _closed_ancestor(p)
        if closed is not None:
            if not any(a == "--tmpfs" and b == closed for a, b in zip(out, out[1:])):
                out += ["--perms", "0755", "--tmpfs", closed]
            out += [*_walkable_under(closed, p), "--ro-bind", p, p]
            covered.append(p)
    return out


def _walkable_under(top, path):
    """bwrap args making the folders between `top` (exclusive) and `path`
    (exclusive) searchable by any user inside the pod."""
    out = []
    rel = path[len(top):].strip("/").split("/")
    for i in range(1, len(rel)):
        out += ["--perms", "0755", "--dir", top + "/" + "/".join(rel[:i])]
    return out


def _root_entries(own):
    """bwrap args for a pod's root: a tmpfs holding the host's top-level
    entries read-only (what `--ro-bind / /` gave) but /tmp, /workspace and
    those in `own` (mounted by the caller), so the pod's folder can be bound
    at /workspace as the pod template's emptyDir is there. Read per pod:
    a top-level entry the host gains later is in the pods made after it."""
    out = []
    for n in sorted(os.listdir("/")):
        p = "/" + n
        if n in ("tmp", "workspace", *own):
            continue
        if os.path.islink(p):
            out += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p) or os.path.isfile(p):
            out += ["--ro-bind-try", p, p]
    return out


# A pod whose container mounts a volume at /workspace (codepod's pod
# template: an emptyDir, its working folder, k8s/api/pod.c) has the pod's
# folder bound there, last, the root made read-only after it, and its execs
# start there with the HOME the container's env gives; other pods' execs
# start in the pod's folder at its host path.
WORKSPACE = "/workspace"


def _container(pod, container):
    spec = (pod or {}).get("spec") or {}
    return next((c for c in spec.get("containers", []) if c.get("name") == container), {})


def _mounts_workspace(pod, container):
    return any(m.get("mountPath") == WORKSPACE for m in _container(pod, container).get("volumeMounts") or [])


def _at(pod_dir, workspace):
    if not workspace:
        return ["--chdir", pod_dir]
    return ["--dir", WORKSPACE, "--bind", pod_dir, WORKSPACE, "--remount-ro", "/", "--chdir", WORKSPACE]


def bwrap_works():
    if not shutil.which("bwrap"):
        return False
    try:
        r = subprocess.run(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                            "--dev", "/dev", "--proc", "/proc", "true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        return r.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def choose_protocol(header, served=(V5, V4)):
    """The first of the server's protocols the client offers: v5 (stdin close,
    translator path) over v4 by default, whatever the client's order."""
    offered = [p.strip() for p in (header or "").split(",") if p.strip()]
    for p in served:
        if p in offered:
            return p
    return None


def _truthy(v):
    return str(v).lower() in ("1", "true", "yes")


def _has_child(pid, comm):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
    except OSError:
        return False
    for k in kids:
        try:
            with open(f"/proc/{k}/comm") as f:
                if f.read().strip() == comm:
                    return True
        except OSError:
            pass
    return False


# The capabilities a container runtime (containerd, Docker) gives a container
# by default, before the securityContext's drop/add.
RUNTIME_DEFAULT_CAPS = ("chown", "dac_override", "fsetid", "fowner", "mknod", "net_raw",
                        "setgid", "setuid", "setfcap", "setpcap", "net_bind_service",
                        "sys_chroot", "kill", "audit_write")


POD_PIDS_LIMIT = 1024


class SecurityRefused(Exception):
    """The kubelet would not run this container as its securityContext asks."""


def security_prefix(pod, container):
    """setpriv argv applying the securityContext of `container` in `pod`, or []
    for a privileged container."""
    spec = pod.get("spec") or {}
    psc = spec.get("securityContext") or {}
    c = next((c for c in spec.get("containers", []) if c.get("name") == container), {})
    csc = c.get("securityContext") or {}
    if csc.get("privileged"):
        return []

    def pick(key):
        return csc[key] if key in csc else psc.get(key)
    uid, gid = pick("runAsUser"), pick("runAsGroup")
    uid = 0 if uid is None else int(uid)  # the fake's "image" has no USER: root
    gid = 0 if gid is None else int(gid)
    if pick("runAsNonRoot") and uid == 0:
        raise SecurityRefused("container has runAsNonRoot and image will run as root")
    groups = [int(g) for g in [psc.get("fsGroup"), *(psc.get("supplementalGroups") or [])]
              if g is not None]
    caps = csc.get("capabilities") or {}
    drop = {str(x).lower().removeprefix("cap_") for x in caps.get("drop") or []}
    add = {str(x).lower().removeprefix("cap_") for x in caps.get("add") or []}
    keep = set() if "all" in drop else set(RUNTIME_DEFAULT_CAPS) - drop
    keep |= add - {"all"}
    # The kubelet's pod pids limit, roughly: a per-user process limit (shared
    # by the pods of one uid), so a fork bomb in a pod cannot take the host's.
    argv = ["prlimit", f"--nproc={POD_PIDS_LIMIT}:{POD_PIDS_LIMIT}", "--",
            "setpriv", f"--reuid={uid}", f"--regid={gid}"]
    argv += [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
    argv += ["--bounding-set=" + ",".join(["-all"] + [f"+{x}" for x in sorted(keep)]),
             "--inh-caps=-all"]
    if csc.get("allowPrivilegeEscalation") is False:
        argv.append("--no-new-privs")
    return argv + ["--"]


def _walkable_under_tmp(path):
    """bwrap args making the folders on the way to `path` inside the pod's own
    /tmp searchable by any user (bwrap would create them 0700 root), so a pod
    folder under the host's /tmp stays reachable once the exec is not root."""
    out = []
    parts = path.split("/")
    for i in range(3, len(parts)):
        d = "/".join(parts[:i])
        if d.startswith("/tmp/"):
            out += ["--perms", "0755", "--dir", d]
    return out


def _as_empty_dir(path, fs_group):
    """Writable by any user, like an emptyDir (group fsGroup, setgid)."""
    if fs_group is not None:
        os.chown(path, -1, int(fs_group))
        os.chmod(path, 0o2777)
    else:
        os.chmod(path, 0o777)


class Exec:
    def __init__(self, store, faults, use_bwrap, exec_path=""):
        self.store, self.faults = store, faults
        self.use_bwrap = use_bwrap
        self.exec_path = exec_path
        self.protocols = (V5, V4)  # serve --exec-protocols: e.g. only v4, as a pre-1.30 apiserver
        # --exec-latency-ms: the set-up cost of a real exec (API server ->
        # kubelet -> runtime -> process start), paid before the upgrade.
        self.latency_ms = 0
        self.requests = 0  # exec requests received (GET /fakekube/exec-stats)
        self.by_pod = {}   # (ns, name) -> exec requests for that pod
        self.live = 0      # exec streams open right now

    def stats(self):
        return {"requests": self.requests, "live": self.live, "latencyMs": self.latency_ms,
                "pods": [{"namespace": ns, "name": n, "requests": c}
                         for (ns, n), c in sorted(self.by_pod.items())]}

    def _argv(self, ns, name, command, pod=None, container=None):
        pod_dir = self.store.pod_dir(ns, name)
        pod_tmp = os.path.join(self.store.state_dir, "podtmp", ns, name)
        os.makedirs(pod_dir, exist_ok=True)
        os.makedirs(pod_tmp, exist_ok=True)
        env = {"PATH": (self.exec_path + ":" if self.exec_path else "") +
                       os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
               "HOME": pod_dir, "HOSTNAME": name, "TMPDIR": "/tmp",
               "FAKEKUBE_NAMESPACE": ns, "FAKEKUBE_POD": name, "LANG": "C.UTF-8"}
        if not self.use_bwrap:
            env["TMPDIR"] = pod_tmp
            return list(command), pod_dir, env
        workspace = _mounts_workspace(pod, container)
        if workspace:
            env["HOME"] = next((e["value"] for e in _container(pod, container).get("env") or []
                                if e.get("name") == "HOME" and "value" in e), WORKSPACE)
        if os.geteuid() == 0 and shutil.which("nsenter"):
            # As in a real container, every exec joins the pod's own
            # namespaces: one PID namespace per pod, whose PID 1 adopts the
            # orphans of every exec, and one user namespace (the host's), so
            # a second exec can see, read and kill what the first started.
            sec = security_prefix(pod, container) if pod is not None else []
            if sec:
                fs_group = ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
                _as_empty_dir(pod_dir, fs_group)
                os.chmod(pod_tmp, 0o1777)
            init = self._pod_sandbox(ns, name, pod_dir, pod_tmp, workspace)
            # -r -w: the root and working folder of the pod's init (its
            # folder), taken as file descriptors, so the working folder is
            # reachable from the root (a path would be resolved before the
            # root moves, and getcwd() would then fail for a non-root user)
            argv = ["nsenter", "-t", str(init), "-p", "-m", "-n", "-i", "-u", "-r", "-w",
                    "--", *sec, *command]
            return argv, pod_dir, env
        # Unprivileged: a sandbox per exec in the host's PID namespace (bwrap
        # then makes a user namespace per exec, and one exec cannot read
        # another's environment). /tmp is bound before the pod folder so a
        # state dir under /tmp stays reachable.
        argv = ["bwrap", "--unshare-ipc", "--unshare-net",
                "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
                *_root_entries(("dev",)), "--dev", "/dev", "--bind", pod_tmp, "/tmp",
                *host_binds_over_tmp(self.exec_path), "--bind", pod_dir, pod_dir,
                *_at(pod_dir, workspace), "--hostname", name[:63], "--", *command]
        return argv, pod_dir, env

    def _pod_sandbox(self, ns, name, pod_dir, pod_tmp, workspace):
        """The pod's namespaces, made on its first exec: a bwrap whose PID 1
        stands for the container's init, with `sleep infinity` as its main
        process. Returns the host PID of that init, for nsenter. Deleting the
        pod kills it, and with it every process in the pod."""
        box = self.store.pod_sandboxes.get((ns, name))
        if box is not None and box["proc"].poll() is None:
            return box["init"]
        r, w = os.pipe()
        proc = subprocess.Popen(
            ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
             "--unshare-cgroup-try", "--die-with-parent", *_root_entries(("dev", "proc")),
             "--dev", "/dev", "--proc", "/proc", "--bind", pod_tmp, "/tmp",
             *host_binds_over_tmp(self.exec_path), *_walkable_under_tmp(pod_dir),
             "--bind", pod_dir, pod_dir, *_at(pod_dir, workspace), "--hostname", name[:63],
             "--info-fd", str(w), "--", "sleep", "infinity"],
            pass_fds=(w,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(w)
        info = b""
        with os.fdopen(r, "rb") as f:
            while b"}" not in info:
                chunk = f.read1(4096)
                if not chunk:
                    break
                info += chunk
        init = json.loads(info[:info.index(b"}") + 1])["child-pid"]
        # bwrap reports its init before the mounts are done: the pod is up
        # once its main process runs (a child of the init named "sleep").
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not _has_child(init, "sleep"):
            time.sleep(0.002)
        self.store.pod_sandboxes[(ns, name)] = {"proc": proc, "init": init}
        return init

    def _validate(self, request, ns, name):
        """Checks the real apiserver makes before any upgrade (HTTP errors)."""
        q = request.rel_url.query
        pod = self.store.get(ns, name)  # 404
        command = q.getall("command", [])
        want = {k: _truthy(q.get(k, "false")) for k in ("stdin", "stdout", "stderr", "tty")}
        if not (want["stdin"] or want["stdout"] or want["stderr"]):
            raise ApiError(st.bad_request("you must specify at least 1 of stdin, stdout, stderr"))
        if not command:
            raise ApiError(st.bad_request("you must specify at least one command for the container"))
        names = [c["name"] for c in pod["spec"].get("containers", [])]
        container = q.get("container", "")
        if not container:
            if len(names) != 1:
                raise ApiError(st.bad_request(
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"))
            container = names[0]
        elif container not in names:
            raise ApiError(st.bad_request(f"container {container} is not valid for pod {name}"))
        if not pod["spec"].get("nodeName"):
            raise ApiError(st.bad_request(f"pod {name} does not have a host assigned"))
        if want["tty"]:
            want["stderr"] = False  # with a tty stderr is merged into stdout
        cs = next((c for c in pod["status"].get("containerStatuses", []) if c["name"] == container), None)
        running = cs is not None and "running" in (cs.get("state") or {}) and not pod["metadata"].get("deletionTimestamp")
        return command, container, want, running

    async def handle(self, request):
        ns, name = request.match_info["ns"], request.match_info["name"]
        self.requests += 1
        self.by_pod[(ns, name)] = self.by_pod.get((ns, name), 0) + 1
        if self.latency_ms:
            await asyncio.sleep(self.latency_ms / 1000)
        self.live += 1
        try:
            return await self._handle(request, ns, name)
        finally:
            self.live -= 1

    async def _handle(self, request, ns, name):
        if request.headers.get("Upgrade", "").lower() != "websocket":
            # SPDY (kubectl's fallback) is not implemented: say so like a server without it.
            raise ApiError(st.bad_request("Upgrade request required"))
        command, container, want, running = self._validate(request, ns, name)
        proto = choose_protocol(request.headers.get("Sec-WebSocket-Protocol"), self.protocols)
        if proto is None:
            raise ApiError(st.bad_request("fakekube supports only the " + " and ".join(self.protocols) +
                                          " exec subprotocols"))
        not_running = f'unable to upgrade connection: container not found ("{container}")'
        if not running and proto == V4:
            # v4 is proxied to the kubelet, which refuses before any upgrade.
            body = st.exec_internal(not_running)
            raise ApiError({"kind": "Status", "apiVersion": "v1", **body})

        ws = web.WebSocketResponse(protocols=[proto], autoping=True, compress=False,
                                   max_msg_size=32 << 20, timeout=15.0)
        await ws.prepare(request)
        # "connected" notification: one empty message on the lowest output channel.
        first = 1 if want["stdout"] else 2 if want["stderr"] else 3
        await ws.send_bytes(bytes([first]))
        if not running:
            # v5 goes through the apiserver's translator: the failure to reach the
            # container arrives after the upgrade, as a Status on channel 3.
            await ws.send_bytes(b"\x03" + json.dumps(st.exec_internal(not_running), separators=(",", ":")).encode())
            await ws.close(code=1000)
            return ws

        drops = self.faults.take(("exec_drop",), request.method, request.path_qs)
        drop = drops[0] if drops else None
        pod = self.store.get(ns, name)
        try:
            argv, pod_dir, env = self._argv(ns, name, command, pod, container)
        except SecurityRefused as e:
            msg = f"error executing command {command}: {e}"
            await ws.send_bytes(b"\x03" + json.dumps(st.exec_internal(msg), separators=(",", ":")).encode())
            await ws.close(code=1000)
            return ws
        memcg = self.store.memcg
        cgroup = memcg.cgroup_for(ns, name, pod, container) if memcg else None
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=pod_dir, env=env, start_new_session=True,
                stdin=subprocess.PIPE if want["stdin"] else subprocess.DEVNULL,
                stdout=subprocess.PIPE if want["stdout"] else subprocess.DEVNULL,
                stderr=subprocess.PIPE if want["stderr"] else subprocess.DEVNULL,
                limit=CHUNK * 2, preexec_fn=memcg.joiner(cgroup) if memcg else None)
        except OSError as e:
            # e.g. executable not found: containerd reports it as an internal error
            msg = f'error executing command {command}: {e.strerror}'
            await ws.send_bytes(b"\x03" + json.dumps(st.exec_internal(msg), separators=(",", ":")).encode())
            await ws.close(code=1000)
            return ws
        if cgroup:
            memcg.join(cgroup, proc.pid)
        procs = self.store.exec_procs.setdefault((ns, name), set())
        procs.add(proc)
        state = {"sent": 0, "dropped": False}

        def abort():
            # The exec_drop fault: the connection vanishes mid-run, no status, no close frame.
            state["dropped"] = True
            if request.transport is not None:
                request.transport.abort()

        drop_timer = None
        if drop and drop.get("after_ms") is not None:
            drop_timer = asyncio.get_event_loop().call_later(drop["after_ms"] / 1000, abort)

        async def pump_out(stream, ch):
            while True:
                data = await stream.read(CHUNK)
                if not data:
                    return
                if state["dropped"] or ws.closed:
                    continue  # keep draining so the process is not stuck; output is lost
                try:
                    await ws.send_bytes(bytes([ch]) + data)
                except (ConnectionError, RuntimeError):
                    state["dropped"] = True
                    continue
                state["sent"] += len(data)
                if drop and drop.get("after_bytes") is not None and state["sent"] >= drop["after_bytes"]:
                    abort()

        async def pump_in():
            try:
                async for msg in ws:
                    if msg.type != WSMsgType.BINARY or not msg.data:
                        continue  # text or empty messages carry nothing (wsstream ignores them)
                    ch, payload = msg.data[0], msg.data[1:]
                    if ch == 0 and proc.stdin is not None and not proc.stdin.is_closing():
                        if payload:
                            try:
                                proc.stdin.write(payload)
                                await proc.stdin.drain()
                            except (BrokenPipeError, ConnectionResetError):
                                pass
                    elif ch == 255 and proto == V5:
                        if len(payload) != 1:
                            break  # malformed CLOSE: the real server drops the connection
                        if payload[0] == 0 and proc.stdin is not None:
                            proc.stdin.close()
                    # ch 4 (resize) is meaningless without a tty; ignored
            finally:
                # The client is gone (or closed): stdin EOF, like the runtime's pipe.
                if proc.stdin is not None and not proc.stdin.is_closing():
                    proc.stdin.close()

        in_task = asyncio.get_event_loop().create_task(pump_in())
        outs = [pump_out(s, c) for s, c in ((proc.stdout, 1), (proc.stderr, 2)) if s is not None]
        try:
            await asyncio.gather(*outs)
            rc = await proc.wait()
        finally:
            procs.discard(proc)
            if drop_timer:
                drop_timer.cancel()
        if rc == -9 and cgroup:
            # The container's memory limit: the status says OOMKilled before
            # the exec's own Status goes out, as a kubelet's would by then.
            self.store.check_oom(ns, name, container)
        if rc < 0:
            rc = 128 - rc  # killed by a signal: the runtime reports 128+n
        if not state["dropped"] and not ws.closed:
            body = st.EXEC_SUCCESS if rc == 0 else st.exec_exit(rc)
            try:
                await ws.send_bytes(b"\x03" + json.dumps(body, separators=(",", ":")).encode())
                await ws.close(code=1000)
            except (ConnectionError, RuntimeError):
                pass
        in_task.cancel()
        return ws
