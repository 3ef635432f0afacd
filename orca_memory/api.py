"""The NinjaAPI at /api/v1/: mounts each app's router; OpenAPI docs at /api/v1/docs."""

from __future__ import annotations

from ninja import NinjaAPI

from memory.api import router as memory_router

api = NinjaAPI(title="orca-memory", version="1", urls_namespace="api-v1")
api.add_router("/", memory_router)
