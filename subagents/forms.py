"""The sub-agent app's forms (its admin's)."""

from __future__ import annotations

from typing import Any

from django import forms

from memory.validation import Conflict, InvalidInput, check_content
from subagents.models import SubagentMessage
from subagents.runs import subagent_check


class SubagentMessageForm(forms.ModelForm):
    """A reply added here goes through subagent_record (its checks; the parent's session);
    an edit can change the text only, checked as any content is."""

    class Meta:
        model = SubagentMessage
        fields = ["parent_msg", "agent_name", "role", "content"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        try:
            if self.instance.pk is None:
                subagent_check(
                    parent=data["parent_msg"],
                    agent_name=data["agent_name"],
                    role=data["role"],
                    content=data["content"],
                )
            else:
                check_content("content", data["content"])
        except (InvalidInput, Conflict) as exc:
            self.add_error(None, str(exc))
        return data
