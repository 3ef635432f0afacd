from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from memory.admin import OneLineIdentifiersAdmin
from subagents.forms import SubagentMessageForm
from subagents.models import SubagentMessage
from subagents.runs import subagent_record


@admin.register(SubagentMessage)
class SubagentMessageAdmin(OneLineIdentifiersAdmin):
    form = SubagentMessageForm
    list_display = [
        "id",
        "parent",
        "session_id",
        "agent_name",
        "role",
        "short_content",
        "timestamp",
    ]
    list_filter = ["agent_name", "role"]
    search_fields = ["session_id", "agent_name", "content"]
    raw_id_fields = ["parent_msg"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Which run a reply belongs to is the record; its session is always its parent's.
        fixed = ["parent_msg", "session_id", "agent_name", "role"] if obj is not None else []
        return [*fixed, "timestamp"]

    def save_model(
        self, request: HttpRequest, obj: SubagentMessage, form: Any, change: bool
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        data = form.cleaned_data
        added = subagent_record(
            parent=data["parent_msg"],
            agent_name=data["agent_name"],
            role=data["role"],
            content=data["content"],
        )
        obj.pk, obj.session_id, obj.timestamp = added.pk, added.session_id, added.timestamp
        obj._state.adding = False

    @admin.display(description=_("parent message"), ordering="parent_msg")
    def parent(self, obj: SubagentMessage) -> int:
        return obj.parent_msg_id

    @admin.display(description=_("content"))
    def short_content(self, obj: SubagentMessage) -> str:
        return Truncator(obj.content).chars(80)

    def view_on_site(self, obj: SubagentMessage) -> str:
        url = reverse("subagent_run", args=[obj.parent_msg_id])
        return f"{url}?{urlencode({'agent': obj.agent_name})}"
