"""Values shown as words in the page's language, never as the code holds them: what the
memory package says (memory.phrases), memory types held as plain values, a history's field
names and the people and processes that made a change (`{% load words %}`). A model's own
fields with choices show their labels (`get_role_display`)."""

from __future__ import annotations

from typing import Any

from django import template
from django.core.exceptions import FieldDoesNotExist

from memory.models import LongTermMemory, MemoryType
from memory.phrases import actor_label, attribute_label
from memory.phrases import translated as translated_text

register = template.Library()


@register.filter
def translated(text: str | None) -> str:
    """A reason, method or status of the memory package (a Phrase, or a word it marked)."""
    return translated_text(text) if text else ""


@register.filter
def attribute_name(name: str) -> str:
    """A memory's attribute (`LongTermMemory.attribute`) in the active language."""
    return translated_text(attribute_label(name))


@register.filter
def memory_type(value: str) -> str:
    return str(dict(MemoryType.choices).get(value, value))


@register.filter
def field_label(name: str) -> str:
    """A memory's field by its label (the admin's), as a history names what changed."""
    try:
        return str(LongTermMemory._meta.get_field(name).verbose_name)
    except FieldDoesNotExist:
        return name


@register.filter
def actor(value: Any) -> str:
    return actor_label(str(value))
