from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.text import Truncator

from memory.admin import IdentifiersForm
from subagents.models import SubagentMessage


@admin.register(SubagentMessage)
class SubagentMessageAdmin(admin.ModelAdmin):
    form = IdentifiersForm
    list_display = [
        "id",
        "parent_msg_id",
        "session_id",
        "agent_name",
        "role",
        "short_content",
        "timestamp",
    ]
    list_filter = ["agent_name", "role"]
    search_fields = ["session_id", "agent_name", "content"]
    raw_id_fields = ["parent_msg"]
    readonly_fields = ["timestamp"]

    @admin.display(description="content")
    def short_content(self, obj: SubagentMessage) -> str:
        return Truncator(obj.content).chars(80)

    def view_on_site(self, obj: SubagentMessage) -> str:
        url = reverse("subagent_run", args=[obj.parent_msg_id])
        return f"{url}?{urlencode({'agent': obj.agent_name})}"
