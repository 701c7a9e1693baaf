"""The MCP server: encode, score, extract, generate and list_models as Model Context Protocol tools.

One set of tools (``tools.py``: typed inputs and outputs, the ``Backend`` they call; ``handlers.py``:
the MCP server over a backend) and two ways to serve them: streamable HTTP at ``/mcp`` on the server
and the gateway, over the routes' own ``Service`` (``mount.py``, ``service_backend.py``), and
``sie-server mcp --url`` on stdio, over the Python SDK against a running server (``stdio.py``,
``sdk_backend.py``). Built on the official ``mcp`` SDK; nothing here imports it at module level
except ``handlers.py``, so a server that is never asked for ``/mcp`` does not pay for its import.
"""
