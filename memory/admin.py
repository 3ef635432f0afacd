from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from memory.auth import api_key_create, api_key_revoke
from memory.models import ApiKey, LongTermMemory, MainMessage, ShortTermMemory
from memory.validation import InvalidInput, check_identifier


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


class ApiKeyForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ["agent_id", "name"]

    def clean_agent_id(self) -> str:
        try:
            return check_identifier("agent_id", self.cleaned_data["agent_id"])
        except InvalidInput as exc:
            raise forms.ValidationError(str(exc)) from exc


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    form = ApiKeyForm
    list_display = ["prefix", "agent_id", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["agent_id", ("revoked_at", admin.EmptyFieldListFilter)]
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
            request, f"The new key for {row.agent_id!r} is {key} — copy it now, it is not stored."
        )

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            api_key_revoke(key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")
