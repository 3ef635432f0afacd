from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SubagentsConfig(AppConfig):
    name = "subagents"
    verbose_name = _("Sub-agents")
