from __future__ import annotations

from django.contrib import admin

from memory.models import LongTermMemory, MainMessage, ShortTermMemory


@admin.register(MainMessage)
class MainMessageAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "agent_id",
        "session_id",
        "role",
        "msg_type",
        "token_count",
        "has_embedding",
        "timestamp",
    ]
    list_filter = ["agent_id", "role", "msg_type", "has_embedding"]
    search_fields = ["session_id", "content"]
    readonly_fields = ["token_count", "has_embedding", "timestamp"]


@admin.register(ShortTermMemory)
class ShortTermMemoryAdmin(admin.ModelAdmin):
    list_display = ["id", "agent_id", "session_id", "content", "confidence", "updated_at"]
    list_filter = ["agent_id"]
    search_fields = ["session_id", "content"]


@admin.register(LongTermMemory)
class LongTermMemoryAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "agent_id",
        "memory_type",
        "content",
        "confidence",
        "access_count",
        "expires_at",
    ]
    list_filter = ["agent_id", "memory_type"]
    search_fields = ["content"]
    readonly_fields = ["access_count", "last_accessed", "created_at"]
