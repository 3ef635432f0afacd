"""Sub-agent transcripts, kept apart from the main conversation (design: 子 Agent 隔离)."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from memory.models import MainMessage
from memory.subagent_run import REPLIES
from memory.validation import IdentifierValidator


class SubagentRole(models.TextChoices):
    ASSISTANT = "assistant", _("Assistant")
    SYSTEM = "system", _("System")


class SubagentMessage(models.Model):
    # ON DELETE CASCADE in the database, so deleting a main message by any route (ORM, admin,
    # plain SQL) takes its sub-agent transcript with it.
    parent_msg = models.ForeignKey(
        MainMessage,
        verbose_name=_("parent message"),
        on_delete=models.DB_CASCADE,
        db_column="parent_msg_id",
        db_index=False,
        related_name=REPLIES,  # memory reads the replies through it (memory.subagent_run)
    )
    session_id = models.TextField(_("session"), validators=[IdentifierValidator("session_id")])
    agent_name = models.TextField(_("sub-agent"), validators=[IdentifierValidator("agent_name")])
    role = models.TextField(_("role"), choices=SubagentRole.choices)
    content = models.TextField(
        _("content"),
    )
    timestamp = models.DateTimeField(_("time"), db_default=Now())

    class Meta:
        db_table = "subagent_messages"
        verbose_name = _("sub-agent message")
        verbose_name_plural = _("sub-agent messages")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(role__in=SubagentRole.values),
                name="subagent_messages_role_valid",
            ),
        ]
        indexes = [models.Index(fields=["parent_msg"], name="idx_subagent_parent")]

    def __str__(self) -> str:
        return f"{self.agent_name} #{self.pk} {self.get_role_display()}"
