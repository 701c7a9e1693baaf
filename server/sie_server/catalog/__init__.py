"""Model catalog: the config schema and the folder of YAML files that holds it."""

from sie_server.catalog.loader import Catalog
from sie_server.catalog.schema import ModelConfig, Profile

__all__ = ["Catalog", "ModelConfig", "Profile"]
