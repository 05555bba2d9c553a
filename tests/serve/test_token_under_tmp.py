"""serve --listen with its token file next to Node in a folder under /tmp (a
checkout under /tmp, say): the token is out of sight in the sandbox's private
/tmp, and covering it anyway made bubblewrap create the folders on the way
0700 root, so, as root, the sandbox user could not reach Node and serve did
not start ("Node does not run as the sandbox user")."""
import json
import os

from harness import local_backend_only, node_under_tmp
from util import Pump
from wssession import Server


@local_backend_only
def test_a_token_file_next_to_node_under_tmp():
    with node_under_tmp("codepod-token-tmp-") as (top, node):
        # the token file goes next to the state dir: top/checkout/token-*
        srv = Server(os.path.join(top, "checkout", "state"), args=["--node", node])
        try:
            assert os.path.dirname(srv.token_file) == os.path.join(top, "checkout")
            pump = Pump(srv.connect())
            js = ("const fs = require('node:fs');\n"
                  f"let tok; try {{ fs.readFileSync({json.dumps(str(srv.token_file))}); tok = 'ok'; }}"
                  " catch (e) { tok = e.code; }\n"
                  "return [process.execPath, tok];")
            pump.send({"type": "execute", "id": "t1", "conversation": "t1", "js": js, "tools": []})
            m = pump.result("t1")
            assert m["type"] == "result" and m["status"] == "succeeded", m
            assert m["result"] == [node, "ENOENT"], m
            pump.ws.close()
        finally:
            assert srv.stop() == 0
