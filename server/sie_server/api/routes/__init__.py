"""One APIRouter module per concern."""
