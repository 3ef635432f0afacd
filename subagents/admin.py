from __future__ import annotations

from django.contrib import admin

from subagents.models import SubagentMessage


@admin.register(SubagentMessage)
class SubagentMessageAdmin(admin.ModelAdmin):
    list_display = ["id", "parent_msg_id", "session_id", "agent_name", "role", "timestamp"]
    list_filter = ["agent_name", "role"]
    search_fields = ["session_id", "content"]
    raw_id_fields = ["parent_msg"]
