from __future__ import annotations

from django.apps import AppConfig


class SubagentsConfig(AppConfig):
    name = "subagents"
    verbose_name = "Sub-agents"
