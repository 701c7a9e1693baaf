"""The engine: one queue for every model and caller, batches formed by token cost."""

from sie_server.engine.scheduler import Scheduler, WorkItem

__all__ = ["Scheduler", "WorkItem"]
