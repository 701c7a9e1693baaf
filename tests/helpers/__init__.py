"""Test helpers: tiny random-weight models, catalog folders and a real server process."""
