"""HTTP routes only: parse, resolve the model, call the engine, serialize."""
