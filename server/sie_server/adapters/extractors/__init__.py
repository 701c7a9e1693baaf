"""Span extractors for extract on text: GLiNER and GLiNER2."""
