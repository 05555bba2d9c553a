"""Admission: what a real apiserver refuses before a pod is stored.

Two of its stages, in the apiserver's order for a create (400 decoding, then
422 validation in store.py, then 403 validating admission, then 409 exists):

1. Field validation (`?fieldValidation=Strict|Warn|Ignore`, default Warn, as
   since 1.27). Unknown and duplicate fields of a Pod are found against the
   API's own models (python3-kubernetes, generated from the OpenAPI of 1.22,
   plus the Pod fields added since, listed in NEWER_FIELDS). Strict answers
   400 BadRequest `Pod in version "v1" cannot be handled as a Pod: strict
   decoding error: unknown field "spec.x", duplicate field "spec.y"`; Warn
   adds one `Warning: 299 - "unknown field \"spec.x\""` header per field
   (kubectl prints them); Ignore says nothing. Checked on create and replace
   (PUT), not on patches.

2. Pod Security admission, enforce mode, from the namespace's labels
   `pod-security.kubernetes.io/enforce` (privileged | baseline | restricted;
   an unknown level counts as restricted) and `.../enforce-version` (latest
   or v1.N, only echoed). The checks and their messages are those of
   k8s.io/pod-security-admission/policy, in its evaluation order (baseline
   checks, then for restricted the restricted ones; a restricted check
   replaces its overlapping baseline one). A violation is the real 403:
   `pods "NAME" is forbidden: violates PodSecurity "restricted:latest":
   reason (detail), reason (detail)`. Not modelled: AppArmor, SELinux,
   sysctls, procMount, Windows host process, host probes and lifecycle
   hooks, user-namespace relaxations, exemptions, audit and warn modes.
"""
import json

from . import status as st

ENFORCE = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION = "pod-security.kubernetes.io/enforce-version"
LEVELS = ("privileged", "baseline", "restricted")

# Pod fields newer than the python3-kubernetes models (1.22): (model, JSON
# name, type of the value in the models' notation).
NEWER_FIELDS = {
    "V1PodSpec": {"os": "object", "hostUsers": "bool", "schedulingGates": "list[object]",
                  "resourceClaims": "list[object]", "resources": "V1ResourceRequirements",
                  "hostnameOverride": "str"},
    "V1Container": {"resizePolicy": "list[object]", "restartPolicy": "str",
                    "restartPolicyRules": "list[object]"},
    "V1SecurityContext": {"appArmorProfile": "object"},
    "V1PodSecurityContext": {"appArmorProfile": "object", "supplementalGroupsPolicy": "str",
                             "seLinuxChangePolicy": "str"},
    "V1Volume": {"image": "object"},
    "V1ResourceRequirements": {"claims": "list[object]"},
    "V1Lifecycle": {"stopSignal": "str"},
    "V1Handler": {"sleep": "object"},
    "V1Probe": {"grpc": "object"},
    "V1EnvVarSource": {"fileKeyRef": "object"},
}
SCALARS = ("object", "str", "int", "bool", "float", "datetime")


# ---------------------------------------------------------------- field validation
class Dups(dict):
    """A JSON object that remembers keys given more than once."""
    dups = ()


def _pairs(pairs):
    d = Dups()
    seen = []
    for k, v in pairs:
        if k in d and k not in seen:
            seen.append(k)
        d[k] = v
    d.dups = tuple(seen)
    return d


def parse_json(raw):
    """json.loads that keeps track of duplicate keys (Dups objects)."""
    return json.loads(raw, object_pairs_hook=_pairs)


def _fields(model):
    import kubernetes.client.models as m
    cls = getattr(m, model)
    out = {json_name: cls.openapi_types[py] for py, json_name in cls.attribute_map.items()}
    out.update(NEWER_FIELDS.get(model, {}))
    return out


def field_problems(obj, model="V1Pod", path=""):
    """Unknown and duplicate fields of obj, as the strict decoder names them,
    in document order."""
    if model in SCALARS:
        return []
    if model.startswith("list["):
        if not isinstance(obj, list):
            return []
        out = []
        for i, x in enumerate(obj):
            out += field_problems(x, model[5:-1], f"{path}[{i}]")
        return out
    if model.startswith("dict("):
        inner = model[5:-1].split(", ", 1)[1]
        if not isinstance(obj, dict):
            return []
        out = []
        for k, x in obj.items():
            out += field_problems(x, inner, f"{path}.{k}" if path else k)
        return out
    if not isinstance(obj, dict):
        return []
    known = _fields(model)
    out = []
    for k, v in obj.items():
        where = f"{path}.{k}" if path else k
        if k not in known:
            out.append(f'unknown field "{where}"')
            continue
        if k in getattr(obj, "dups", ()):
            out.append(f'duplicate field "{where}"')
        out += field_problems(v, known[k], where)
    return out


def validate_fields(obj, mode):
    """Returns the warnings to send (Warn), raises a 400 ApiError (Strict)."""
    from .store import ApiError
    mode = mode or "Warn"
    if mode not in ("Strict", "Warn", "Ignore"):
        raise ApiError(st.bad_request(
            f'fieldValidation: invalid value "{mode}": valid values are "Ignore", "Warn" or "Strict"'))
    if mode == "Ignore" or not isinstance(obj, dict):
        return []
    problems = field_problems(obj)
    if problems and mode == "Strict":
        raise ApiError(st.bad_request('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                                      + ", ".join(problems)))
    return problems


def warning_header(text):
    """An RFC 7234 warning as the apiserver writes it (code 299, agent "-")."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------- pod security
def _join_quote(items):
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(singular, plural, n):
    return singular if n == 1 else plural


def _containers(spec):
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                yield c


def _sc(c):
    return c.get("securityContext") or {}


def _setters(pod_bad, bad_containers):
    out = ["pod"] if pod_bad else []
    if bad_containers:
        out.append(f'{_plural("container", "containers", len(bad_containers))} {_join_quote(bad_containers)}')
    return out


def check_host_namespaces(spec):
    bad = sorted(k for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k) is True)
    return ("host namespaces", ", ".join(bad)) if bad else None


def check_host_ports(spec):
    bad, ports = [], set()
    for c in _containers(spec):
        hp = [p.get("hostPort") for p in c.get("ports") or [] if isinstance(p, dict) and p.get("hostPort")]
        if hp:
            bad.append(c.get("name", ""))
            ports.update(str(p) for p in hp)
    if not bad:
        return None
    return ("hostPort", f'{_plural("container", "containers", len(bad))} {_join_quote(bad)} '
                        f'{_plural("uses", "use", len(bad))} {_plural("hostPort", "hostPorts", len(ports))} '
                        f'{", ".join(sorted(ports))}')


def check_privileged(spec):
    bad = [c.get("name", "") for c in _containers(spec) if _sc(c).get("privileged") is True]
    if not bad:
        return None
    return ("privileged", f'{_plural("container", "containers", len(bad))} {_join_quote(bad)} '
                          "must not set securityContext.privileged=true")


ALLOWED_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def check_capabilities_baseline(spec):
    bad, caps = [], set()
    for c in _containers(spec):
        add = [x for x in (_sc(c).get("capabilities") or {}).get("add") or [] if x not in ALLOWED_CAPS]
        if add:
            bad.append(c.get("name", ""))
            caps.update(add)
    if not bad:
        return None
    return ("non-default capabilities", f'{_plural("container", "containers", len(bad))} {_join_quote(bad)} '
                                        f"must not include {_join_quote(sorted(caps))} in securityContext.capabilities.add")


def check_host_path_volumes(spec):
    bad = [v.get("name", "") for v in spec.get("volumes") or [] if isinstance(v, dict) and "hostPath" in v]
    return ("hostPath volumes", f'{_plural("volume", "volumes", len(bad))} {_join_quote(bad)}') if bad else None


def _seccomp_type(sc):
    prof = sc.get("seccompProfile")
    return None if prof is None else (prof or {}).get("type", "")


def check_seccomp_baseline(spec):
    pod_t = _seccomp_type(spec.get("securityContext") or {})
    values, bad = set(), []
    if pod_t is not None and pod_t not in ("RuntimeDefault", "Localhost"):
        values.add(pod_t)
    for c in _containers(spec):
        t = _seccomp_type(_sc(c))
        if t is not None and t not in ("RuntimeDefault", "Localhost"):
            bad.append(c.get("name", ""))
            values.add(t)
    setters = _setters(pod_t is not None and pod_t not in ("RuntimeDefault", "Localhost"), bad)
    if not setters:
        return None
    return ("seccompProfile", f'{" and ".join(setters)} must not set securityContext.seccompProfile.type to '
                              f"{_join_quote(sorted(values))}")


def check_allow_privilege_escalation(spec):
    bad = [c.get("name", "") for c in _containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return ("allowPrivilegeEscalation != false",
            f'{_plural("container", "containers", len(bad))} {_join_quote(bad)} '
            "must set securityContext.allowPrivilegeEscalation=false")


def check_capabilities_restricted(spec):
    missing, adding, caps = [], [], set()
    for c in _containers(spec):
        cap = _sc(c).get("capabilities")
        if cap is None:
            missing.append(c.get("name", ""))
            continue
        if "ALL" not in (cap.get("drop") or []):
            missing.append(c.get("name", ""))
        add = [x for x in cap.get("add") or [] if x != "NET_BIND_SERVICE"]
        if add:
            adding.append(c.get("name", ""))
            caps.update(add)
    details = []
    if missing:
        details.append(f'{_plural("container", "containers", len(missing))} {_join_quote(missing)} '
                       'must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f'{_plural("container", "containers", len(adding))} {_join_quote(adding)} '
                       f"must not include {_join_quote(sorted(caps))} in securityContext.capabilities.add")
    return ("unrestricted capabilities", "; ".join(details)) if details else None


ALLOWED_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                   "projected", "secret")
RESTRICTED_VOLUMES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
                      "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile",
                      "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume",
                      "scaleIO", "storageos")


def check_restricted_volumes(spec):
    bad, types = [], set()
    for v in spec.get("volumes") or []:
        if not isinstance(v, dict) or any(k in v for k in ALLOWED_VOLUMES):
            continue
        bad.append(v.get("name", ""))
        types.add(next((k for k in RESTRICTED_VOLUMES if k in v), "unknown"))
    if not bad:
        return None
    return ("restricted volume types",
            f'{_plural("volume", "volumes", len(bad))} {_join_quote(bad)} {_plural("uses", "use", len(bad))} '
            f'{_plural("restricted volume type", "restricted volume types", len(types))} '
            f"{_join_quote(sorted(types))}")


def check_run_as_non_root(spec):
    pod = (spec.get("securityContext") or {}).get("runAsNonRoot")
    explicit, implicit = [], []
    for c in _containers(spec):
        v = _sc(c).get("runAsNonRoot")
        if v is not None:
            if v is not True:
                explicit.append(c.get("name", ""))
        elif pod is not True:
            implicit.append(c.get("name", ""))
    setters = _setters(pod is not None and pod is not True, explicit)
    if setters:
        return ("runAsNonRoot != true", f'{" and ".join(setters)} must not set securityContext.runAsNonRoot=false')
    if implicit:
        return ("runAsNonRoot != true",
                f'pod or {_plural("container", "containers", len(implicit))} {_join_quote(implicit)} '
                "must set securityContext.runAsNonRoot=true")
    return None


def check_run_as_user(spec):
    pod_bad = (spec.get("securityContext") or {}).get("runAsUser") == 0
    bad = [c.get("name", "") for c in _containers(spec) if _sc(c).get("runAsUser") == 0]
    setters = _setters(pod_bad, bad)
    return ("runAsUser=0", f'{" and ".join(setters)} must not set runAsUser=0') if setters else None


def check_seccomp_restricted(spec):
    ok = ("RuntimeDefault", "Localhost")
    pod_t = _seccomp_type(spec.get("securityContext") or {})
    pod_bad = pod_t is not None and pod_t not in ok
    values = {pod_t} if pod_bad else set()
    explicit, implicit = [], []
    for c in _containers(spec):
        t = _seccomp_type(_sc(c))
        if t is not None:
            if t not in ok:
                explicit.append(c.get("name", ""))
                values.add(t)
        elif pod_t is None or pod_bad:
            implicit.append(c.get("name", ""))
    setters = _setters(pod_bad, explicit)
    if setters:
        return ("seccompProfile", f'{" and ".join(setters)} must not set securityContext.seccompProfile.type to '
                                  f"{_join_quote(sorted(values))}")
    if implicit:
        return ("seccompProfile",
                f'pod or {_plural("container", "containers", len(implicit))} {_join_quote(implicit)} '
                'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')
    return None


# Evaluation order of the real registry: the baseline checks that no
# restricted check replaces (file order of the policy package), then either
# the overlapping baseline checks (baseline) or the restricted ones.
BASELINE = (check_host_namespaces, check_host_ports, check_privileged)
BASELINE_OVERLAPPING = (check_capabilities_baseline, check_host_path_volumes, check_seccomp_baseline)
RESTRICTED = (check_allow_privilege_escalation, check_capabilities_restricted, check_restricted_volumes,
              check_run_as_non_root, check_run_as_user, check_seccomp_restricted)


def policy(labels):
    """(level, version) to enforce from a namespace's labels."""
    labels = labels or {}
    level = labels.get(ENFORCE, "privileged")
    if level not in LEVELS:
        level = "restricted"
    return level, labels.get(ENFORCE_VERSION) or "latest"


def violations(level, spec):
    if level == "privileged":
        return []
    checks = BASELINE + (BASELINE_OVERLAPPING if level == "baseline" else RESTRICTED)
    return [r for r in (chk(spec or {}) for chk in checks) if r]


def enforce(ns_labels, name, spec):
    """Raises the 403 ApiError for a pod the namespace's policy forbids."""
    from .store import ApiError
    level, version = policy(ns_labels)
    found = violations(level, spec)
    if not found:
        return
    detail = ", ".join(f"{reason} ({d})" if d else reason for reason, d in found)
    body = st.status(403, "Forbidden",
                     f'pods "{name}" is forbidden: violates PodSecurity "{level}:{version}": {detail}',
                     {"name": name, "kind": "pods"})
    raise ApiError(body)
