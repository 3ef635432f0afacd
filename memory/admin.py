from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.widgets import AdminTextInputWidget
from django.db.models import Field, Model, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from memory import scheduling
from memory.auth import api_key_create, api_key_revoke, api_keys_delete
from memory.forms import MESSAGE_FIELDS, LongTermMemoryForm, MainMessageForm, ShortTermMemoryForm
from memory.memories import (
    memories_apply,
    memory_create,
    memory_delete,
    memory_unarchive,
    memory_update,
)
from memory.messages import message_add, message_update, messages_delete
from memory.models import (
    ApiKey,
    ConsolidationRun,
    LongTermMemory,
    LongTermMemoryHistory,
    MainMessage,
    MemoryAction,
    ShortTermMemory,
)
from memory.phrases import actor_label
from memory.vectors import delete_with_vectors


def _actor(request: HttpRequest) -> str:
    return f"admin:{request.user.get_username()}"


def _short(text: str | None) -> str:
    return Truncator(text or "").chars(80)


@admin.action(description=gettext_lazy("Embed the selected rows again"))
def reembed(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Any]) -> None:
    # The worker embeds every row without a vector; vector_put replaces the old one.
    count = queryset.update(has_embedding=False)
    scheduling.with_the_write(scheduling.schedule_embedding)
    modeladmin.message_user(request, _("%(n)s row(s) queued for embedding.") % {"n": count})


# Identifiers and labels are one line; the admin's default for a TextField is a text area.
ONE_LINE_FIELDS = frozenset({"agent_id", "session_id", "source_session", "name", "agent_name"})


class OneLineIdentifiersAdmin(admin.ModelAdmin):
    """Its identifier and label fields as one-line inputs."""

    def formfield_for_dbfield(self, db_field: Field, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name in ONE_LINE_FIELDS:
            kwargs["widget"] = AdminTextInputWidget()
        return super().formfield_for_dbfield(db_field, request, **kwargs)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records written by the service itself: to read, never to edit."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


def _save_edit(obj: ShortTermMemory, fields: set[str], *, embedded: set[str]) -> None:
    """Write an edited row's changed fields; when what is embedded changed, queue a new vector.

    Only what changed is written. Rewriting a timestamp set by SQLite's default (milliseconds)
    from Python (microseconds) would change its text, and with it its order among rows of the
    same millisecond.
    """
    if fields & embedded:
        obj.has_embedding = False
        fields = fields | {"has_embedding"}
        scheduling.with_the_write(scheduling.schedule_embedding)
    obj.save(update_fields=sorted(fields))


class WithVectorsAdmin(OneLineIdentifiersAdmin):
    """Rows that have vectors: their scope is fixed once stored (a vector cannot move to another
    agent's partition), and deleting a row deletes its vector too."""

    fixed_fields: tuple[str, ...] = ("agent_id", "session_id")

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> list[str]:
        return [*(self.fixed_fields if obj is not None else ()), *self.readonly_fields]

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        delete_with_vectors(type(obj)._default_manager.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        delete_with_vectors(queryset)


@admin.register(MainMessage)
class MainMessageAdmin(WithVectorsAdmin):
    form = MainMessageForm
    list_display = [
        "id",
        "agent_id",
        "session_id",
        "role",
        "msg_type",
        "short_content",
        "token_count",
        "has_embedding",
        "timestamp",
    ]
    list_filter = ["agent_id", "role", "msg_type", "has_embedding"]
    search_fields = ["session_id", "content"]
    readonly_fields = ["token_count", "has_embedding", "timestamp"]
    fixed_fields = ("agent_id", "session_id", "role")  # who said it, where: the record
    actions = [reembed]

    @admin.display(description=gettext_lazy("content"))
    def short_content(self, obj: MainMessage) -> str:
        return _short(obj.content)

    def view_on_site(self, obj: MainMessage) -> str:
        return reverse("session", args=[obj.agent_id, obj.session_id]) + f"#message-{obj.pk}"

    def save_model(self, request: HttpRequest, obj: MainMessage, form: Any, change: bool) -> None:
        if not change:
            added = message_add(**{name: form.cleaned_data[name] for name in MESSAGE_FIELDS})
            obj.pk, obj.token_count, obj.timestamp = added.pk, added.token_count, added.timestamp
            obj._state.adding = False
            return
        # `obj` already holds the new values; message_update compares against the stored row.
        stored = MainMessage.objects.get(pk=obj.pk)
        message_update(stored, **{name: form.cleaned_data[name] for name in form.changed_data})

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[MainMessage]) -> None:
        messages_delete(messages=queryset)

    def delete_model(self, request: HttpRequest, obj: MainMessage) -> None:
        messages_delete(messages=MainMessage.objects.filter(pk=obj.pk))


@admin.register(ShortTermMemory)
class ShortTermMemoryAdmin(WithVectorsAdmin):
    form = ShortTermMemoryForm
    list_display = ["id", "agent_id", "session_id", "content", "confidence", "updated_at"]
    list_filter = ["agent_id", "has_embedding"]
    search_fields = ["session_id", "content"]
    readonly_fields = ["has_embedding", "created_at"]
    actions = [reembed]

    def save_model(
        self, request: HttpRequest, obj: ShortTermMemory, form: Any, change: bool
    ) -> None:
        if change:
            _save_edit(obj, set(form.changed_data), embedded={"content"})
        else:
            super().save_model(request, obj, form, change)
            scheduling.with_the_write(scheduling.schedule_embedding)


class ExpiryFilter(admin.SimpleListFilter):
    title = gettext_lazy("expiry")
    parameter_name = "expired"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        return [("no", _("not expired")), ("yes", _("expired"))]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[LongTermMemory]
    ) -> QuerySet[LongTermMemory]:
        now = timezone.now()
        if self.value() == "yes":
            return queryset.expired(now)
        if self.value() == "no":
            return queryset.unexpired(now)
        return queryset


class SupersessionFilter(admin.SimpleListFilter):
    """Current or superseded now: a newer memory took its place (memory.supersession)."""

    title = gettext_lazy("supersession")
    parameter_name = "superseded"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        return [("no", _("current")), ("yes", _("superseded"))]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[LongTermMemory]
    ) -> QuerySet[LongTermMemory]:
        now = timezone.now()
        if self.value() == "yes":
            return queryset.superseded(now)
        if self.value() == "no":
            return queryset.current(now)
        return queryset


class WhenSetFilter(admin.SimpleListFilter):
    """A moment that either happened or not, in words ("archived", "not archived"): Django's
    EmptyFieldListFilter says "Empty" and "Not empty", which reads as the opposite."""

    field: str
    choices_in_words: tuple[str, str]  # not set, set

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        return [("no", self.choices_in_words[0]), ("yes", self.choices_in_words[1])]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in ("yes", "no"):
            return queryset.filter(**{f"{self.field}__isnull": self.value() == "no"})
        return queryset


class ArchivedFilter(WhenSetFilter):
    title = gettext_lazy("archived")
    parameter_name = "archived"
    field = "archived_at"
    choices_in_words = (gettext_lazy("not archived"), gettext_lazy("archived"))


class RevokedFilter(WhenSetFilter):
    # "revoked" alone is the field's label, "revoked at" in Chinese (吊销于).
    title = pgettext_lazy("a key's state", "revoked")
    parameter_name = "revoked"
    field = "revoked_at"
    choices_in_words = (gettext_lazy("not revoked"), pgettext_lazy("a key's state", "revoked"))


@admin.register(LongTermMemory)
class LongTermMemoryAdmin(OneLineIdentifiersAdmin):
    """Every change goes through memory.memories, so the memory's history records it."""

    form = LongTermMemoryForm
    # What fits beside the admin's sidebar and filters at 1440 px (twelve columns ran off the
    # right); the sources, archiving, vector and last change are on each memory's page, and
    # most in the filters.
    list_display = [
        "id",
        "agent_id",
        "memory_type",
        "short_content",
        "confidence",
        "access_count",
        "curated",
        "expires_at",
    ]
    list_filter = [
        "agent_id",
        "memory_type",
        "curated",
        ExpiryFilter,
        SupersessionFilter,
        ArchivedFilter,
        "has_embedding",
    ]
    search_fields = ["content", "source_session"]
    readonly_fields = [
        "access_count",
        "last_accessed",
        "extractions",
        "curated",
        "has_embedding",
        "created_at",
        "updated_at",
        "archived_at",
        "valid_from",
        "sources",
    ]
    actions = ["expire", "restore", "unarchive", reembed]

    @admin.display(description=gettext_lazy("content"))
    def short_content(self, obj: LongTermMemory) -> str:
        return _short(obj.content)

    # source_count's own label ("sources") named the list below too, beside a count that
    # was not its length: the page shows what the count means, as the dashboard does.
    @admin.display(description=gettext_lazy("seen in extractions"))
    def extractions(self, obj: LongTermMemory) -> int | str:
        return "-" if obj.pk is None else obj.extractions

    @admin.display(description=gettext_lazy("sources"))
    def sources(self, obj: LongTermMemory) -> str:
        """Where it came from, to read: consolidation and memory.memories write the sources."""
        if obj.pk is None:
            return "-"
        rows = [
            format_html(
                '<li><a href="{}">{}</a> · {} · {} {} · {}: {}</li>',
                reverse("admin:memory_mainmessage_change", args=[source.message.pk]),
                _("message #%(id)s") % {"id": source.message.pk},
                source.message.get_role_display(),
                _("session"),
                source.message.session_id,
                source.message.timestamp.isoformat(),
                _short(source.message.content),
            )
            if source.message is not None
            else format_html(
                "<li>{}</li>",
                _("written by %(actor)s") % {"actor": actor_label(source.written_by or "")},
            )
            for source in obj.source_list()
        ]
        return (
            format_html("<ul>{}</ul>", format_html_join("", "{}", ((row,) for row in rows)))
            if rows
            else "-"
        )

    def view_on_site(self, obj: LongTermMemory) -> str:
        return reverse("memory", args=[obj.pk])

    def get_readonly_fields(self, request: HttpRequest, obj: LongTermMemory | None = None) -> list:
        # A memory belongs to its agent for good (its vector is partitioned by agent).
        return self.readonly_fields if obj is None else ["agent_id", *self.readonly_fields]

    def save_model(
        self, request: HttpRequest, obj: LongTermMemory, form: LongTermMemoryForm, change: bool
    ) -> None:
        fields = {name: form.cleaned_data[name] for name in form.changed_data}
        if change:
            # `obj` already holds the new values; compare against the stored row.
            stored = LongTermMemory.objects.get(pk=obj.pk)
            memory_update(stored, actor=_actor(request), **fields)
            return
        fields.pop("agent_id", None)
        created = memory_create(
            agent_id=obj.agent_id,
            content=obj.content,
            memory_type=obj.memory_type,
            actor=_actor(request),
            **{k: v for k, v in fields.items() if k not in ("content", "memory_type")},
        )
        obj.pk = created.pk

    def delete_model(self, request: HttpRequest, obj: LongTermMemory) -> None:
        memory_delete(obj, actor=_actor(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[LongTermMemory]) -> None:
        memories_apply(memories=queryset, action=MemoryAction.DELETE, actor=_actor(request))

    @admin.action(description=gettext_lazy("Expire the selected memories now"))
    def expire(self, request: HttpRequest, queryset: QuerySet[LongTermMemory]) -> None:
        actor = _actor(request)
        changed = memories_apply(memories=queryset, action=MemoryAction.EXPIRE, actor=actor)
        self.message_user(request, _("Expired %(n)s memory(ies).") % {"n": changed})

    @admin.action(description=gettext_lazy("Restore the selected expired memories"))
    def restore(self, request: HttpRequest, queryset: QuerySet[LongTermMemory]) -> None:
        actor = _actor(request)
        changed = memories_apply(memories=queryset, action=MemoryAction.RESTORE, actor=actor)
        self.message_user(request, _("Restored %(n)s memory(ies).") % {"n": changed})

    @admin.action(
        description=gettext_lazy("Bring the selected archived memories back into retrieval")
    )
    def unarchive(self, request: HttpRequest, queryset: QuerySet[LongTermMemory]) -> None:
        archived = queryset.filter(archived_at__isnull=False)
        for memory in archived:
            memory_unarchive(memory, actor=_actor(request))
        self.message_user(
            request,
            _("Brought back %(n)s memory(ies); each waits for a new vector.")
            % {"n": len(archived)},
        )


@admin.register(LongTermMemoryHistory)
class LongTermMemoryHistoryAdmin(ReadOnlyAdmin):
    list_display = ["at", "memory_id", "agent_id", "action", "by", "short_content"]
    list_filter = ["action", "agent_id"]
    search_fields = ["=memory_id", "actor", "old_content", "new_content"]

    @admin.display(description=gettext_lazy("content"))
    def short_content(self, obj: LongTermMemoryHistory) -> str:
        return _short(obj.new_content or obj.old_content)

    @admin.display(description=gettext_lazy("by"), ordering="actor")
    def by(self, obj: LongTermMemoryHistory) -> str:
        return actor_label(obj.actor)


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(ReadOnlyAdmin):
    list_display = [
        "requested_at",
        "agent_id",
        "session_id",
        "trigger",
        "status",
        "run_after",
        "started_at",
        "extractor",
        "created",
        "merged",
        "reason",
    ]
    list_filter = ["agent_id", "status", "trigger", "extractor"]
    search_fields = ["session_id", "reason"]


@admin.register(ApiKey)
class ApiKeyAdmin(OneLineIdentifiersAdmin):
    list_display = ["prefix", "agent_id", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["agent_id", RevokedFilter]
    search_fields = ["agent_id", "name", "prefix"]
    fields = ["agent_id", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        # A key's agent is fixed once it exists; only its label can change.
        fixed = ["prefix", "created_at", "last_used_at", "revoked_at"]
        return fixed if obj is None else ["agent_id", *fixed]

    def save_model(self, request: HttpRequest, obj: ApiKey, form: object, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        row, key = api_key_create(agent_id=obj.agent_id, name=obj.name)
        obj.pk = row.pk
        messages.warning(
            request,
            _("The new key for %(agent)s is %(key)s — copy it now, it is not stored.")
            % {"agent": repr(row.agent_id), "key": key},
        )

    def delete_model(self, request: HttpRequest, obj: ApiKey) -> None:
        api_keys_delete(ApiKey.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        api_keys_delete(queryset)

    @admin.action(description=gettext_lazy("Revoke the selected keys"))
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            api_key_revoke(key)
        self.message_user(request, _("Revoked %(n)s key(s).") % {"n": queryset.count()})
