"""Certificates and the kubeconfig.

We shell out to the `openssl` CLI (in the project's deps list) instead of
python3-cryptography so the server needs nothing beyond aiohttp and yaml.
Everything is generated fresh into the state dir at every start: tests must
never depend on a certificate from an earlier run.
"""
import base64
import os
import secrets
import subprocess

import yaml

CLIENT_CN = "fakekube-admin"


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def generate(pki_dir):
    """Create ca.{crt,key}, server.{crt,key}, client.{crt,key} and a token."""
    os.makedirs(pki_dir, exist_ok=True)
    d = pki_dir
    # EC keys: fast to generate, accepted by Go's crypto/tls and OpenSSL alike.
    for name in ("ca", "server", "client"):
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout",
                 "-out", f"{name}.key", cwd=d)
    _openssl("req", "-x509", "-new", "-key", "ca.key", "-sha256", "-days", "30",
             "-subj", "/CN=fakekube-ca", "-out", "ca.crt",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", cwd=d)
    # Go refuses a server cert without a SAN matching the URL host, hence the
    # explicit IP/DNS SANs (CN is ignored by Go since 1.15).
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n"
                "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
    for name, subj in (("server", "/CN=fakekube-apiserver"),
                       ("client", f"/O=system:masters/CN={CLIENT_CN}")):
        _openssl("req", "-new", "-key", f"{name}.key", "-subj", subj, "-out", f"{name}.csr", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "30", "-sha256", "-extfile", f"{name}.ext",
                 "-out", f"{name}.crt", cwd=d)
    token = "fakekube-" + secrets.token_hex(16)
    with open(os.path.join(d, "token"), "w") as f:
        f.write(token)
    return {k: os.path.join(d, k) for k in
            ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")} | {"token": token}


def _b64file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def write_kubeconfig(path, server_url, pki, auth):
    """Write a kind-like kubeconfig. auth is 'cert' or 'token'."""
    user = {}
    if auth == "token":
        user["token"] = pki["token"]
    else:
        user["client-certificate-data"] = _b64file(pki["client.crt"])
        user["client-key-data"] = _b64file(pki["client.key"])
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": "fakekube", "cluster": {
            "certificate-authority-data": _b64file(pki["ca.crt"]),
            "server": server_url}}],
        "users": [{"name": "fakekube-admin", "user": user}],
        "contexts": [{"name": "fakekube", "context": {
            "cluster": "fakekube", "user": "fakekube-admin", "namespace": "default"}}],
        "current-context": "fakekube",
    }
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        yaml.safe_dump(cfg, f, default_flow_style=False, sort_keys=False)
    os.chmod(tmp, 0o600)
    # Atomic rename: a test polling for the file never reads half of it.
    os.replace(tmp, path)
