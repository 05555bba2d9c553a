"""codepod: run model-written programs in codepod with your tools.

    from codepod import Codepod, Tool
    cp = await Codepod.spawn(["codepod", "serve", "--stdio"])   # or: await Codepod.connect(url, token)
    outcome = await cp.run(conversation="thread-42", js="return 1")
    code = await cp.code_tool(conversation="thread-42", tools={...})
    text = await code(arguments)
    sb = cp.sandbox("thread-42")          # its files and shell commands
    await sb.write_text_file("notes.txt", "hi"); r = await sb.run("wc -c notes.txt")
    await cp.close()
"""

from .approvals import ApprovalMemory
from .client import Codepod
from .commands import Command
from .files import FileStream
from .ops import CodepodError
from .outcome import Outcome, Usage
from .sandbox import WORKSPACE, Sandbox, workspace_path
from .model import CODE_INPUT_SCHEMA, CodeTool, code_description, output_for_model
from .tools import Tool, ToolContext
from .transport import ConnectError
from .webhook import webhook_handler, webhook_signature

__all__ = ["ApprovalMemory", "Codepod", "Tool", "ToolContext", "CodeTool", "ConnectError",
           "CODE_INPUT_SCHEMA", "code_description", "output_for_model", "CodepodError", "Sandbox",
           "Command", "FileStream", "WORKSPACE", "workspace_path", "webhook_handler",
           "webhook_signature", "Outcome", "Usage"]
__version__ = "0.1.0"
