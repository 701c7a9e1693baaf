"""Model pool: which models are resident, loading them once, and their state."""

from sie_server.memory.pool import ModelPool
from sie_server.memory.slots import ModelState, Slot

__all__ = ["ModelPool", "ModelState", "Slot"]
