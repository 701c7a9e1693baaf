"""The request contract that the server, the gateway and the queue worker share.

Header names and how they parse, the limits every request is checked against, model
lookup, the msgpack-numpy codec, the error envelopes, and the wire models of every
request and answer. Nothing outside this package spells a header or builds an envelope.
This package imports no engine code (and so no torch): the gateway uses it as it is.
"""
