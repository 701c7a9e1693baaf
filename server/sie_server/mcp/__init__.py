"""The MCP server: encode, score, extract, generate and list_models as Model Context Protocol tools, and
beside them the seven pipeline tasks (``docs_to_markdown``, ``answer_questions``, ``redact_pii``,
``extract_structured``, ``summarize_document``, ``extract_entities``, ``describe_image``; ``task_tools.py``
over ``sie_server/tasks``, described in ``docs/tasks/pipelines.md``).

One set of tools (``tools.py``: typed inputs and outputs, the ``Backend`` they call; ``handlers.py``:
the MCP server over a backend) and two ways to serve them: streamable HTTP at ``/mcp`` on the server
and the gateway, over the routes' own ``Service`` (``mount.py``, ``service_backend.py``), and
``sie-server mcp --url`` on stdio, over the Python SDK against a running server (``stdio.py``,
``sdk_backend.py``). ``/mcp`` answers only a ``Host`` and ``Origin`` on its allow-list (loopback by default,
``--mcp-allowed-hosts`` to extend it; ``allowed_hosts.py``), so a browser page cannot drive a keyless local
server through DNS rebinding. Built on the official ``mcp`` SDK; nothing here imports it at module level
except ``handlers.py``, so a server that is never asked for ``/mcp`` does not pay for its import.
"""
