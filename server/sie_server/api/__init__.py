"""The HTTP layer the server and the gateway share: routes parse and check a request, then call a
``Service`` (``api/service.py``). No engine, memory or cluster imports here (``tests/server/test_layers.py``)."""
