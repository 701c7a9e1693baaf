"""Pipeline tasks in one call (document to markdown, grounded QA, redaction), each a small composition of
the service calls the routes use (``encode``, ``score``, ``extract``, ``generate``); served on
``POST /v1/tasks/{task}`` and as MCP tools. ``registry.TASKS`` lists them."""
