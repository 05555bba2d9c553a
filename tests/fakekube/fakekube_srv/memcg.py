"""The container's memory limit, enforced on exec'd processes with a memory
cgroup per pod where the machine lets us make one (root, and cgroup v2 with
the memory controller, or the v1 memory hierarchy), and OOM kills reported
as the kubelet reports them.

A pod whose container (the exec's) has `resources.limits.memory` gets a
cgroup under `<memory root>/fakekube-<pidns>-<pid>/` with that limit (v2: memory.max,
memory.swap.max 0, memory.oom.group 1; v1: memory.limit_in_bytes); every
exec'd process joins it before it runs. When the kernel's OOM killer fires
in it (memory.events / memory.oom_control `oom_kill` goes up), the fake does
what the kubelet does on cgroup v2 since 1.28 (the whole container is one OOM
group): every process of the container is killed, and the container status
says `terminated` with reason `OOMKilled` and exit code 137 (restartPolicy
Never: the pod is Failed; otherwise the container restarts and `lastState`
holds the OOMKilled termination, restartCount + 1). The exec'd process
itself ends with 137 on its exec stream, after the status was written.

Without such a cgroup (unprivileged, no memory controller) the limit is not
enforced and nothing is reported: the fake says so at start (`memcg none`).
"""
import os
import re
import signal
import time

V2_ROOT = "/sys/fs/cgroup"
V1_ROOT = "/sys/fs/cgroup/memory"
_UNITS = {"": 1, "k": 1000, "M": 1000 ** 2, "G": 1000 ** 3, "T": 1000 ** 4, "P": 1000 ** 5, "E": 1000 ** 6,
          "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}


def quantity_bytes(q):
    """A Kubernetes quantity (128Mi, 1G, 1e9, 500000) in bytes, or None."""
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)\s*([kMGTPE]i?|m)?\s*", str(q))
    if not m:
        return None
    num, unit = float(m.group(1)), m.group(2) or ""
    if unit == "m":
        return int(num / 1000)
    return int(num * _UNITS.get(unit, 1))


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)



def _pidns():
    """This process's PID namespace (its inode number)."""
    return os.stat("/proc/self/ns/pid").st_ino

class MemCg:
    def __init__(self):
        self.kind, self.base = self._detect()
        self.pods = {}  # (ns, name) -> {"path", "limit", "oom_kills", "container"}
        self.stale = []  # cgroups of gone pods whose processes were still exiting

    @staticmethod
    def _sweep(root):
        """Remove the cgroups of fakes that died without cleaning up (a
        SIGKILL): cgroups outlive their processes."""
        try:
            names = os.listdir(root)
        except OSError:
            return
        for d in names:
            # A pid means something only in its own PID namespace: fakes in
            # another one (a container sharing /sys) are left alone.
            # (Names without one come from older fakes: judged as before.)
            m = re.fullmatch(r"fakekube-(?:(\d+)-)?(\d+)", d)
            if not m or (m.group(1) and m.group(1) != str(_pidns())):
                continue
            try:
                os.kill(int(m.group(2)), 0)
                continue  # that fake is alive
            except ProcessLookupError:
                pass
            except OSError:
                continue
            top = os.path.join(root, d)
            for sub in os.listdir(top):
                if os.path.isdir(os.path.join(top, sub)):
                    try:
                        os.rmdir(os.path.join(top, sub))
                    except OSError:
                        pass
            try:
                os.rmdir(top)
            except OSError:
                pass

    def _detect(self):
        if os.geteuid() != 0:
            return None, None
        for root in (V2_ROOT, V1_ROOT):
            self._sweep(root)
        base = f"fakekube-{_pidns()}-{os.getpid()}"
        path = os.path.join(V2_ROOT, base)
        try:
            with open(os.path.join(V2_ROOT, "cgroup.controllers")) as f:
                if "memory" in f.read().split():
                    os.makedirs(path, exist_ok=True)
                    _write(os.path.join(path, "cgroup.subtree_control"), "+memory")
                    return "v2", path
        except OSError:
            # e.g. our own cgroup holds processes (a container's cgroup
            # namespace), so no controller can be handed down
            try:
                os.rmdir(path)
            except OSError:
                pass
        if os.path.exists(os.path.join(V1_ROOT, "memory.limit_in_bytes")):
            try:
                path = os.path.join(V1_ROOT, base)
                os.makedirs(path, exist_ok=True)
                return "v1", path
            except OSError:
                pass
        return None, None

    def describe(self):
        return self.kind or "none"

    def limit_of(self, pod, container):
        for c in pod["spec"].get("containers", []):
            if c.get("name") == container:
                return quantity_bytes(((c.get("resources") or {}).get("limits") or {}).get("memory", ""))
        return None

    def cgroup_for(self, ns, name, pod, container):
        """The pod's cgroup folder (made on first use), or None."""
        if not self.kind:
            return None
        cg = self.pods.get((ns, name))
        if cg is not None:
            return cg["path"]
        limit = self.limit_of(pod, container)
        if not limit:
            return None
        path = os.path.join(self.base, f"{ns}_{name}_{pod['metadata']['uid'][:8]}")
        try:
            os.makedirs(path, exist_ok=True)
            if self.kind == "v2":
                _write(os.path.join(path, "memory.max"), str(limit))
                for k, v in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    try:
                        _write(os.path.join(path, k), v)
                    except OSError:
                        pass
            else:
                _write(os.path.join(path, "memory.limit_in_bytes"), str(limit))
        except OSError:
            return None
        self.pods[(ns, name)] = {"path": path, "limit": limit, "oom_kills": 0, "container": container}
        return path

    @staticmethod
    def joiner(path):
        """A preexec_fn putting the new process in the cgroup before it runs
        (it may run after a switch to the pod's user, who cannot: then
        join() below, from the parent, does it a moment later)."""
        if not path:
            return None
        procs = os.path.join(path, "cgroup.procs")

        def join_self():
            try:
                with open(procs, "w") as f:
                    f.write("0")
            except OSError:
                pass
        return join_self

    @staticmethod
    def join(path, pid):
        if path:
            try:
                _write(os.path.join(path, "cgroup.procs"), str(pid))
            except OSError:
                pass  # it already ended

    def _oom_count(self, path):
        name = "memory.events" if self.kind == "v2" else "memory.oom_control"
        try:
            with open(os.path.join(path, name)) as f:
                for line in f:
                    k, _, v = line.partition(" ")
                    if k == "oom_kill":
                        return int(v)
        except (OSError, ValueError):
            pass
        return 0

    def new_oom_kill(self, ns, name):
        """True once per OOM kill in the pod's cgroup since the last call; the
        rest of the container is killed with it (one OOM group)."""
        cg = self.pods.get((ns, name))
        if cg is None:
            return False
        n = self._oom_count(cg["path"])
        if n <= cg["oom_kills"]:
            return False
        cg["oom_kills"] = n
        self.kill_all(cg["path"])
        return True

    @staticmethod
    def kill_all(path):
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(x) for x in f.read().split()]
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def release(self, ns, name):
        """The pod is gone: kill what is left in its cgroup and remove it (a
        cgroup goes only once empty, so a busy one is tried again later)."""
        cg = self.pods.pop((ns, name), None)
        if cg is not None:
            self.kill_all(cg["path"])
            self.stale.append(cg["path"])
        left = []
        for path in self.stale:
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError:
                left.append(path)
        self.stale = left

    def close(self):
        if not self.base or not os.path.isdir(self.base):
            return
        for key in list(self.pods):
            self.release(*key)
        for _ in range(100):
            self.stale = [os.path.join(self.base, d) for d in os.listdir(self.base)
                          if os.path.isdir(os.path.join(self.base, d))]
            for p in self.stale:
                self.kill_all(p)
            self.release("", "")
            if not self.stale:
                break
            time.sleep(0.01)
        try:
            os.rmdir(self.base)
        except OSError:
            pass
