"""The memory app's forms: the dashboard's (views.py) and the admin's (admin.py).

The rules of a single field (identifiers, the confidence bound) are the model fields'
validators, which every ModelForm applies; a form adds what a field cannot say alone, and
calls the flows' own checks so that their messages appear beside the field at fault.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from typing import Any

from django import forms
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from memory.messages import message_check, message_update_check, session_messages
from memory.models import (
    ForgetScope,
    LongTermMemory,
    MainMessage,
    MemoryAction,
    MemoryType,
    MessageType,
    Role,
    ShortTermMemory,
)
from memory.search import MODES, SearchQuery, SearchResult, search_agents
from memory.validation import InvalidInput, check_content, check_identifier, check_query

# --- the dashboard -------------------------------------------------------------------------


class ContextForm(forms.Form):
    query = forms.CharField(
        required=False,
        widget=forms.TextInput(attrs={"placeholder": _("what the user just asked")}),
    )
    # The API's bounds for the same field.
    model_window = forms.IntegerField(min_value=256, max_value=10_000_000)


class _ListFilterForm(forms.Form):
    """A list's filters with an agent to choose and a `?sort=` among the subclass's `SORTS`
    (value -> (label, order)); an unknown sort is refused (`bad_sort`), other invalid values
    are ignored."""

    SORTS: dict[str, tuple[Any, tuple[Any, ...]]]
    DEFAULT_SORT: str

    agent = forms.ChoiceField(required=False)
    sort = forms.ChoiceField(
        required=False, error_messages={"invalid_choice": _("Unknown sort “%(value)s”.")}
    )

    def __init__(self, data: dict[str, Any], *, agents: list[str]) -> None:
        super().__init__(data)
        self.fields["agent"].choices = [("", _("all agents")), *((a, a) for a in agents)]
        self.fields["sort"].choices = [(value, label) for value, (label, _) in self.SORTS.items()]
        self.is_valid()  # cleaned_data: the valid values only

    @property
    def bad_sort(self) -> bool:
        """An unknown `?sort=`: the page answers 400 rather than an order nobody asked for."""
        return "sort" in self.errors

    def order(self) -> tuple[Any, ...]:
        _, order = self.SORTS[self.cleaned_data.get("sort") or self.DEFAULT_SORT]
        return order


class MemoryFilterForm(_ListFilterForm):
    STATES = {
        "": _("any state"),
        "active": _("active"),
        "expired": _("expired"),
        "archived": _("archived"),
        "superseded": _("superseded"),
    }

    # `?sort=` values (a leading "-" is descending, as in the admin) and their orders.
    SORTS = {
        "-created": (_("newest first"), (F("created_at").desc(), F("id").desc())),
        "created": (_("oldest first"), (F("created_at").asc(), F("id").asc())),
        "-confidence": (_("most confident"), (F("confidence").desc(), F("id").desc())),
        "confidence": (_("least confident"), (F("confidence").asc(), F("id").asc())),
        "-uses": (_("most used"), (F("access_count").desc(), F("id").desc())),
        "uses": (_("least used"), (F("access_count").asc(), F("id").asc())),
        "-last_used": (
            _("recently used"),
            (F("last_accessed").desc(nulls_last=True), F("id").desc()),
        ),
        "last_used": (
            _("longest unused"),
            (F("last_accessed").asc(nulls_first=True), F("id").asc()),
        ),
    }
    DEFAULT_SORT = "-created"

    q = forms.CharField(
        required=False, widget=forms.TextInput(attrs={"type": "search", "placeholder": _("text")})
    )
    memory_type = forms.ChoiceField(
        required=False, choices=[("", _("any type")), *MemoryType.choices]
    )
    state = forms.ChoiceField(required=False, choices=STATES.items())
    # The memories that held at the end of that day (server time): said by then, superseded
    # later or never.
    as_of = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def memories(self, now: datetime) -> QuerySet[LongTermMemory]:
        """The memories the valid filters select in the chosen order, newest first by default
        (invalid filters are ignored). Active ones are current (a newer memory replaced
        none of them); superseded ones are their own state."""
        choice = self.cleaned_data
        memories = LongTermMemory.objects.with_origin()
        if choice.get("agent"):
            memories = memories.filter(agent_id=choice["agent"])
        if choice.get("memory_type"):
            memories = memories.filter(memory_type=choice["memory_type"])
        if choice.get("q"):
            memories = memories.filter(content__icontains=choice["q"])
        if choice.get("as_of"):
            memories = memories.as_of(_end_of(choice["as_of"]))
        state = choice.get("state")
        if state == "active":
            memories = memories.active().unexpired(now).current(now)
        elif state == "expired":
            memories = memories.active().expired(now)
        elif state == "archived":
            memories = memories.filter(archived_at__isnull=False)
        elif state == "superseded":
            memories = memories.superseded(now)
        return memories.order_by(*self.order())


class SessionFilterForm(_ListFilterForm):
    """The session list's `?q=` (session id or message text), `agent`, `since` and `until`
    (sessions with messages in those days, both included, in the server's time zone) and
    `sort`; an unknown sort is refused (`bad_sort`), other invalid values are ignored."""

    DURATION = ExpressionWrapper(
        F("last_timestamp") - F("first_timestamp"), output_field=DurationField()
    )
    SORTS = {
        "-last": (_("last message, newest first"), (F("last_timestamp").desc(),)),
        "last": (_("last message, oldest first"), (F("last_timestamp").asc(),)),
        "-start": (_("started, newest first"), (F("first_timestamp").desc(),)),
        "start": (_("started, oldest first"), (F("first_timestamp").asc(),)),
        "-messages": (_("most messages"), (F("message_count").desc(),)),
        "-tokens": (_("most tokens"), (F("token_count").desc(),)),
        "-duration": (_("longest"), (F("duration").desc(),)),
    }
    DEFAULT_SORT = "-last"

    q = forms.CharField(
        required=False,
        widget=forms.TextInput(
            attrs={"type": "search", "placeholder": _("session id or message text")}
        ),
    )
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    @property
    def narrowed(self) -> bool:
        """Some sessions may not be listed."""
        return any(self.cleaned_data.get(name) for name in ("q", "agent", "since", "until"))

    def sessions(self) -> QuerySet[MainMessage, dict[str, Any]]:
        """One row per session (MainMessage.objects.sessions()) with its `duration`."""
        choice = self.cleaned_data
        messages = MainMessage.objects.all()
        if choice.get("agent"):
            messages = messages.filter(agent_id=choice["agent"])
        sessions = messages.sessions().annotate(duration=self.DURATION)
        if choice.get("q"):
            query = choice["q"]
            sessions = sessions.annotate(
                matches=Count("id", filter=Q(content__icontains=query))
            ).filter(Q(session_id__icontains=query) | Q(matches__gt=0))
        if choice.get("since"):
            sessions = sessions.filter(last_timestamp__gte=_start_of(choice["since"]))
        if choice.get("until"):
            sessions = sessions.filter(first_timestamp__lte=_end_of(choice["until"]))
        return sessions.order_by(*self.order(), "agent_id", "session_id")


class TimelineForm(forms.Form):
    """A session page's `?q=` (text in the session), `role`, `type` and `order`; an invalid
    value is ignored, as the memory list's filters are."""

    ORDERS = {"oldest": _("oldest first"), "newest": _("newest first")}

    q = forms.CharField(
        required=False,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": _("text in this session")}),
    )
    role = forms.ChoiceField(required=False, choices=[("", _("any role")), *Role.choices])
    type = forms.ChoiceField(required=False, choices=[("", _("any type")), *MessageType.choices])
    order = forms.ChoiceField(required=False, choices=ORDERS.items())

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.is_valid()  # cleaned_data: the valid values only

    @property
    def newest_first(self) -> bool:
        return self.cleaned_data.get("order") == "newest"

    @property
    def narrowed(self) -> bool:
        """Some messages of the session may not be shown."""
        return any(self.cleaned_data.get(name) for name in ("q", "role", "type"))

    def messages(self, agent_id: str, session_id: str) -> QuerySet[MainMessage]:
        choice = self.cleaned_data
        messages = session_messages(agent_id, session_id)
        if choice.get("role"):
            messages = messages.filter(role=choice["role"])
        if choice.get("type"):
            messages = messages.filter(msg_type=choice["type"])
        if choice.get("q"):
            messages = messages.filter(content__icontains=choice["q"])
        return messages.reverse() if self.newest_first else messages


class SearchForm(forms.Form):
    """The search page's `?q=` and filters, as the API's `GET /search` takes them; `agent`
    narrows to one agent (all of them otherwise), `since` and `until` are days in the
    server's time zone, both included."""

    q = forms.CharField(
        max_length=1000,
        widget=forms.TextInput(
            attrs={"type": "search", "placeholder": _("words, in any language")}
        ),
    )
    agent = forms.ChoiceField(required=False)
    mode = forms.ChoiceField(required=False, choices=[(m, m) for m in MODES])  # hybrid first
    session = forms.CharField(
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"placeholder": _("session id")}),
    )
    role = forms.ChoiceField(required=False, choices=[("", _("any role")), *Role.choices])
    type = forms.ChoiceField(required=False, choices=[("", _("any type")), *MessageType.choices])
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, data: dict[str, Any] | None, *, agents: list[str]) -> None:
        super().__init__(data)
        self.agents = agents
        self.fields["agent"].choices = [("", _("all agents")), *((a, a) for a in agents)]

    def clean_q(self) -> str:
        """The API's rule: a query of only spaces, punctuation or symbols finds nothing (the
        page shows why, as for an empty one)."""
        try:
            return check_query("q", self.cleaned_data["q"])
        except InvalidInput as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError(_("“since” must not be after “until”."))
        return data

    def search(self, k: int) -> SearchResult:
        """The best `k` messages of the chosen agent, or of every agent."""
        choice = self.cleaned_data
        since, until = choice.get("since"), choice.get("until")
        query = SearchQuery(
            choice["q"],
            mode=choice.get("mode") or "hybrid",
            k=k,
            session_id=choice.get("session") or None,
            role=choice.get("role") or None,
            msg_type=choice.get("type") or None,
            since=_start_of(since) if since else None,
            until=_end_of(until) if until else None,
            # A person searching wants every message: none is dropped as an echo.
            drop_echoes=False,
        )
        return search_agents(
            agent_ids=[choice["agent"]] if choice.get("agent") else self.agents, query=query
        )


# A day a day away from the calendar's ends: its bounds in any time zone are still dates
# (0001-01-01 in UTC+8 would be a year 0 in UTC).
FIRST_DAY, LAST_DAY = date.min + timedelta(days=1), date.max - timedelta(days=1)


def _start_of(day: date) -> datetime:
    """Midnight at the start of `day` in the server's time zone."""
    return timezone.make_aware(datetime.combine(max(day, FIRST_DAY), time.min))


def _end_of(day: date) -> datetime:
    """The last instant of `day` in the server's time zone (search's `until` is included)."""
    return timezone.make_aware(datetime.combine(min(day, LAST_DAY), time.max))


class BulkMemoryForm(forms.Form):
    """Memories ticked in the list and what to do with them; `confirmed` once the person has
    seen the confirmation page. `next` is the list (with its filters) to go back to."""

    ACTIONS = {
        MemoryAction.EXPIRE: _("Expire"),
        MemoryAction.RESTORE: _("Restore"),
        MemoryAction.DELETE: _("Delete"),
    }

    memory = forms.ModelMultipleChoiceField(
        queryset=LongTermMemory.objects.all(),
        error_messages={"required": _("Select at least one memory.")},
    )
    action = forms.ChoiceField(choices=ACTIONS.items())
    confirmed = forms.BooleanField(required=False)
    next = forms.CharField(required=False)


class MemoryForm(forms.ModelForm):
    """A curator's edit of a memory. Validating it sets the new values on its instance: the
    view saves only `changed_data`, through memory_update, which keeps the history."""

    # Without the empty choice a ModelForm adds for a field without a default.
    memory_type = forms.ChoiceField(label=_("Memory type"), choices=MemoryType.choices)

    class Meta:
        model = LongTermMemory
        fields = ["content", "memory_type", "confidence", "expires_at"]
        labels = {
            "content": _("Content"),
            "confidence": _("Confidence"),
            "expires_at": _("Expires (UTC)"),
        }
        widgets = {
            "content": forms.Textarea(attrs={"rows": 4}),
            # min and max let the browser say it first; the field's validator decides.
            "confidence": forms.NumberInput(attrs={"step": "0.05", "min": "0", "max": "1"}),
            "expires_at": forms.DateTimeInput(
                attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"
            ),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The browser's datetime input keeps minutes only: an untouched expiry must compare
        # equal, or saving any other field would move it.
        if expires_at := self.instance.expires_at:
            self.initial["expires_at"] = expires_at.replace(second=0, microsecond=0)


# --- the admin -----------------------------------------------------------------------------


def _add_invalid_input(form: forms.BaseForm, exc: InvalidInput) -> None:
    """Show a domain check's message beside the field it names, or above the form when that
    field is not in it."""
    named = exc.field or re.split(r"[\s.]", str(exc), maxsplit=1)[0]
    form.add_error(named if named in form.fields else None, str(exc))


# What a person writes of a message; the rest (token count, vector state, time) is derived.
MESSAGE_FIELDS = ("agent_id", "session_id", "role", "content", "msg_type", "metadata")


class MainMessageForm(forms.ModelForm):
    """A message added here goes through message_add (its checks, token count, embedding,
    turn summary); an edit through message_update (its checks, the derived data)."""

    class Meta:
        model = MainMessage
        fields = MESSAGE_FIELDS

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        try:
            if self.instance.pk is None:
                message_check(**{name: data[name] for name in MESSAGE_FIELDS})
            else:  # `instance` is still the stored row: the form's values go in after clean()
                changed = {name: data[name] for name in self.changed_data}
                message_update_check(self.instance, **changed)
        except InvalidInput as exc:
            _add_invalid_input(self, exc)
        return data


class ContentCheckedForm(forms.ModelForm):
    """Runs the service's check of a text (check_content: its size limit among others)."""

    def clean_content(self) -> str:
        try:
            return check_content("content", self.cleaned_data["content"])
        except InvalidInput as exc:
            raise forms.ValidationError(str(exc)) from exc


class ShortTermMemoryForm(ContentCheckedForm):
    class Meta:
        model = ShortTermMemory
        fields = ["agent_id", "session_id", "content", "source_count", "confidence"]


class LongTermMemoryForm(ContentCheckedForm):
    class Meta:
        model = LongTermMemory
        fields = [
            "agent_id",
            "content",
            "memory_type",
            "confidence",
            "expires_at",
            "source_session",
        ]

    def clean_source_session(self) -> str | None:
        return self.cleaned_data["source_session"] or None  # an empty field is no session


class ForgetForm(forms.Form):
    """The dashboard's forget request: a session, a whole agent, or a query's matches."""

    scope = forms.ChoiceField(label=_("Forget"), choices=ForgetScope.choices)
    agent_id = forms.CharField(label=_("Agent"))
    session_id = forms.CharField(label=_("Session"), required=False)
    query = forms.CharField(label=_("Query"), required=False, max_length=2000)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        try:
            check_identifier("agent_id", data.get("agent_id") or "")
        except InvalidInput as exc:
            self.add_error("agent_id", str(exc))
        scope = data.get("scope")
        if scope == ForgetScope.SESSION and not data.get("session_id"):
            self.add_error("session_id", _("Name the session to forget."))
        if scope == ForgetScope.QUERY:
            try:
                check_query("query", data.get("query") or "")
            except InvalidInput as exc:
                self.add_error("query", str(exc))
        return data
