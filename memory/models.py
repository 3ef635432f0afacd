"""The design document's tables, with an `agent_id` scope on every row an agent owns.

Defaults live in the database (`db_default`) so that rows written by plain SQL get them too,
and the design's CHECK constraints are database constraints. Indexes that the design keys on
`session_id` lead with `agent_id`, since every query is scoped to one agent first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import Count, Max, Min, Sum
from django.db.models.fields.related_lookups import RelatedIn
from django.db.models.functions import Coalesce, Now
from django.db.models.lookups import In
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from memory import attributes
from memory.validation import IdentifierValidator, validate_confidence

DEFAULT_AGENT = "default"
# The design embeds only user and assistant messages that carry something: it said "at least
# 10 characters", which counts English. Counted in estimated tokens (memory.tokens, stored as
# `token_count`), 3 is 9 English characters or more (10 before: near enough) and two Chinese
# characters: a two-character word (偏好, 喝茶) is the smallest that means something, and
# "你还记得我吗？" (7 characters, 10 tokens) is a whole question. "ok", "thanks!", "好" stay out.
EMBED_ROLES = ("user", "assistant")
EMBED_MIN_TOKENS = 3


class Role(models.TextChoices):
    USER = "user", _("User")
    ASSISTANT = "assistant", _("Assistant")
    SYSTEM = "system", _("System")
    TOOL = "tool", _("Tool")


class MessageType(models.TextChoices):
    NORMAL = "normal", _("Normal")
    FACT = "fact", _("Fact")
    TODO = "todo", _("Todo")
    DECISION = "decision", _("Decision")
    PREFERENCE = "preference", _("Preference")
    ERROR = "error", _("Error")


class MemoryType(models.TextChoices):
    PREFERENCE = "preference", _("Preference")
    FACT = "fact", _("Fact")
    DECISION = "decision", _("Decision")
    PROJECT = "project", _("Project")


class _InIntegerRange:
    """`__in` without the values an integer column (or a foreign key to one) cannot hold, as
    Django's own `__exact` and `__gt` drop one: no row has them, and SQLite's driver fails on
    an integer beyond 64 bits (OverflowError, a 500) where a form or the admin passes ids a
    visitor typed (`memory=99999999999999999999`, `_selected_action`, `?id__in=`)."""

    def process_rhs(self, compiler: Any, connection: Any) -> Any:
        field = self.lhs.output_field
        field = getattr(field, "target_field", field)  # a foreign key's: the id it holds
        if self.rhs_is_direct_value() and isinstance(field, models.IntegerField):
            low, high = connection.ops.integer_field_range(field.get_internal_type())
            self.rhs = [
                value
                for value in self.rhs
                if not isinstance(value, int)
                or ((low is None or value >= low) and (high is None or value <= high))
            ]
        return super().process_rhs(compiler, connection)


@models.IntegerField.register_lookup
class IntegerFieldIn(_InIntegerRange, In):
    pass


@models.ForeignKey.register_lookup
class ForeignKeyIn(_InIntegerRange, RelatedIn):
    pass


def _one_of(field: str, choices: type[models.TextChoices], name: str) -> models.CheckConstraint:
    return models.CheckConstraint(condition=models.Q(**{f"{field}__in": choices.values}), name=name)


def _between_0_and_1(field: str, name: str) -> models.CheckConstraint:
    return models.CheckConstraint(
        condition=models.Q(**{f"{field}__gte": 0, f"{field}__lte": 1}), name=name
    )


class MainMessageQuerySet(models.QuerySet["MainMessage"]):
    def awaiting_embedding(self) -> MainMessageQuerySet:
        """Messages the embedding worker still owes a vector (the rule of `needs_embedding`)."""
        return self.filter(
            role__in=EMBED_ROLES, token_count__gte=EMBED_MIN_TOKENS, has_embedding=False
        )

    def sessions(self) -> models.QuerySet[MainMessage, dict[str, Any]]:
        """One row per session of these messages, most recently active first: agent_id,
        session_id, message_count, token_count, first_timestamp, last_timestamp."""
        return (
            self.values("agent_id", "session_id")
            .annotate(
                message_count=Count("id"),
                token_count=Sum("token_count"),
                first_timestamp=Min("timestamp"),
                last_timestamp=Max("timestamp"),
            )
            .order_by("-last_timestamp", "agent_id", "session_id")
        )


class MainMessage(models.Model):
    agent_id = models.TextField(
        _("agent"), db_default=DEFAULT_AGENT, validators=[IdentifierValidator("agent_id")]
    )
    session_id = models.TextField(_("session"), validators=[IdentifierValidator("session_id")])
    role = models.TextField(_("role"), choices=Role.choices)
    content = models.TextField(
        _("content"),
    )
    msg_type = models.TextField(
        _("message type"), choices=MessageType.choices, db_default=MessageType.NORMAL
    )
    token_count = models.IntegerField(_("tokens"), db_default=0)
    has_embedding = models.BooleanField(_("embedded"), db_default=False)
    timestamp = models.DateTimeField(_("time"), db_default=Now())
    metadata = models.JSONField(_("metadata"), null=True, blank=True)
    # Set by migrate_jsonl: identifies the imported line, so importing twice adds nothing.
    import_fingerprint = models.TextField(null=True, blank=True, editable=False)

    objects = MainMessageQuerySet.as_manager()

    class Meta:
        db_table = "main_messages"
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        constraints = [
            _one_of("role", Role, "main_messages_role_valid"),
            _one_of("msg_type", MessageType, "main_messages_msg_type_valid"),
            models.CheckConstraint(
                condition=models.Q(token_count__gte=0), name="main_messages_token_count_nonnegative"
            ),
            models.UniqueConstraint(
                fields=["import_fingerprint"],
                condition=models.Q(import_fingerprint__isnull=False),
                name="main_messages_import_fingerprint_unique",
            ),
        ]
        indexes = [
            # Ascending: SQLite reads it backwards for newest-first, ties by id included (the
            # rowid ends every index entry), so working memory streams without a sort.
            models.Index(
                fields=["agent_id", "session_id", "timestamp"], name="idx_main_session_time"
            ),
            models.Index(
                fields=["role"],
                condition=models.Q(role__in=EMBED_ROLES),
                name="idx_main_role",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} #{self.pk} {self.get_role_display()}"

    @property
    def needs_embedding(self) -> bool:
        """The design's rule, as `awaiting_embedding()` applies it in SQL.

        Both read the stored `token_count`, which every write of the text sets
        (message_add, message_update): the two rules cannot disagree about a row.
        """
        return (
            self.role in EMBED_ROLES
            and self.token_count >= EMBED_MIN_TOKENS
            and not self.has_embedding
        )


class ShortTermMemoryQuerySet(models.QuerySet["ShortTermMemory"]):
    def of_session(self, agent_id: str, session_id: str) -> ShortTermMemoryQuerySet:
        """The session's summaries, newest first."""
        return self.filter(agent_id=agent_id, session_id=session_id).order_by("-created_at", "-id")


class Summarizer(models.TextChoices):
    LLM = "llm"  # the chat model
    OFFLINE = "offline"  # each side's first sentence: no chat model, or it failed


class ShortTermMemory(models.Model):
    agent_id = models.TextField(
        _("agent"), db_default=DEFAULT_AGENT, validators=[IdentifierValidator("agent_id")]
    )
    session_id = models.TextField(_("session"), validators=[IdentifierValidator("session_id")])
    content = models.TextField(
        _("content"),
    )
    source_count = models.IntegerField(_("sources"), db_default=1)
    confidence = models.FloatField(
        _("confidence"), db_default=0.8, validators=[validate_confidence]
    )
    created_at = models.DateTimeField(_("created"), db_default=Now())
    updated_at = models.DateTimeField(_("updated"), null=True, blank=True)
    has_embedding = models.BooleanField(_("embedded"), db_default=False)
    # The assistant reply that ended the summarised turn: while that reply is in working
    # memory, the summary would only repeat it (null for summaries written before).
    reply_id = models.BigIntegerField(_("reply"), null=True, blank=True)
    # Who wrote the summary (null for summaries written before it was recorded, or not by
    # memory.summaries).
    summarizer = models.TextField(
        _("summarizer"), choices=Summarizer.choices, null=True, blank=True
    )

    objects = ShortTermMemoryQuerySet.as_manager()

    class Meta:
        db_table = "short_term_memories"
        verbose_name = _("short-term memory")
        verbose_name_plural = _("short-term memories")
        # No CHECK on `summarizer`: adding one makes SQLite copy the table, which drops the
        # lexical index's triggers; only memory.summaries writes it.
        constraints = [_between_0_and_1("confidence", "short_term_memories_confidence_0_1")]
        indexes = [
            models.Index(fields=["agent_id", "session_id", "-updated_at"], name="idx_stm_session"),
        ]

    def __str__(self) -> str:
        return gettext("%(session)s summary #%(id)s") % {"session": self.session_id, "id": self.pk}


class LongTermMemoryQuerySet(models.QuerySet["LongTermMemory"]):
    def active(self) -> LongTermMemoryQuerySet:
        """Not archived; expired ones stay (retrieval down-weights them)."""
        return self.filter(archived_at__isnull=True)

    def expired(self, now: datetime) -> LongTermMemoryQuerySet:
        """Past their `expires_at` at `now` (the rule `is_expired` applies to one memory)."""
        return self.filter(expires_at__lte=now)

    def unexpired(self, now: datetime) -> LongTermMemoryQuerySet:
        return self.filter(models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now))

    def current(self, at: datetime) -> LongTermMemoryQuerySet:
        """Not superseded at `at`: `valid_until` unset or later (expiry and archiving are
        their own states)."""
        return self.filter(models.Q(valid_until__isnull=True) | models.Q(valid_until__gt=at))

    def superseded(self, at: datetime) -> LongTermMemoryQuerySet:
        return self.filter(valid_until__lte=at)

    def as_of(self, at: datetime) -> LongTermMemoryQuerySet:
        """The memories that held at `at`: said by then (`valid_from`, else `created_at`) and
        not yet superseded."""
        said = models.Q(valid_from__lte=at) | models.Q(valid_from__isnull=True, created_at__lte=at)
        return self.current(at).filter(said)

    def newest_said_first(self) -> LongTermMemoryQuerySet:
        """By when each was said (`valid_from`, else `created_at`: `said_at`), newest first."""
        said_at = Coalesce("valid_from", "created_at")
        return self.order_by(said_at.desc(), "-pk")

    def with_origin(self) -> LongTermMemoryQuerySet:
        """Each memory knows whether consolidation made it (`from_extraction`) without a
        query of its own: one subquery on the history's index, for a page of any size."""
        made = LongTermMemoryHistory.objects.filter(
            memory_id=models.OuterRef("pk"), action=MemoryAction.CREATE, actor=CONSOLIDATION
        )
        return self.annotate(made_by_consolidation=models.Exists(made))

    def with_sources(self) -> LongTermMemoryQuerySet:
        """Each memory's sources (`source_list`) loaded with the rows: one more query for a
        page of any size, not one per memory."""
        return self.prefetch_related(sources_prefetch())


class LongTermMemory(models.Model):
    agent_id = models.TextField(
        _("agent"), db_default=DEFAULT_AGENT, validators=[IdentifierValidator("agent_id")]
    )
    content = models.TextField(
        _("content"),
    )
    memory_type = models.TextField(_("memory type"), choices=MemoryType.choices)
    source_session = models.TextField(
        _("source session"),
        null=True,
        blank=True,
        validators=[IdentifierValidator("source_session")],
    )
    confidence = models.FloatField(
        _("confidence"), db_default=0.5, validators=[validate_confidence]
    )
    access_count = models.IntegerField(_("uses"), db_default=0)
    last_accessed = models.DateTimeField(_("last used"), null=True, blank=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), db_default=Now())
    # Added to the design's columns: how many extractions confirmed it, when it last changed,
    # whether it was archived by the cleanup (kept, out of retrieval), and its vector state.
    source_count = models.IntegerField(_("sources"), db_default=1)
    updated_at = models.DateTimeField(_("updated"), null=True, blank=True)
    archived_at = models.DateTimeField(_("archived"), null=True, blank=True)
    has_embedding = models.BooleanField(_("embedded"), db_default=False)
    # Written or reworded by a person (API, dashboard, admin): consolidation may confirm it but
    # never replaces its text, and identity questions rank it first.
    curated = models.BooleanField(
        _("curated"),
        db_default=False,
        help_text=_("a person wrote or edited the text; consolidation keeps it"),
    )
    # Supersession: a newer memory said the same subject's value changed. The old one keeps its
    # text and history and stops being current at `valid_until`; `valid_from` is when the fact
    # was first said (its first source message's time; null: `created_at`), so "as of" a date
    # also holds for conversations imported from the past. Nullable without defaults: SQLite
    # adds such columns in place, and rows written with plain SQL stay valid.
    valid_from = models.DateTimeField(_("valid from"), null=True, blank=True)
    valid_until = models.DateTimeField(_("valid until"), null=True, blank=True)
    # No database constraint and no field index: SQLite adds and drops such a column in place
    # (a constrained one makes it copy the table, which drops the lexical index's triggers).
    # The id may name a memory deleted since: the chain ends there.
    superseded_by = models.ForeignKey(
        "self",
        verbose_name=_("superseded by"),
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="supersedes",
        help_text=_("the newer memory that replaced this one"),
    )

    # The single-valued attribute of the person the text gives a value to ("home",
    # "employer": memory.attributes), derived from the text on every save; "" for none. Null
    # until derived: rows from before migration 0025 or written with plain SQL, derived after
    # each `migrate` (memories.derive_attributes). Nullable without a default, so SQLite adds
    # the column in place.
    attribute = models.TextField(_("attribute"), null=True, blank=True, editable=False)

    objects = LongTermMemoryQuerySet.as_manager()

    class Meta:
        db_table = "long_term_memories"
        verbose_name = _("long-term memory")
        verbose_name_plural = _("long-term memories")
        constraints = [
            _one_of("memory_type", MemoryType, "long_term_memories_type_valid"),
            _between_0_and_1("confidence", "long_term_memories_confidence_0_1"),
            models.CheckConstraint(
                condition=models.Q(access_count__gte=0),
                name="long_term_memories_access_count_nonnegative",
            ),
        ]
        indexes = [
            models.Index(fields=["agent_id", "memory_type", "-confidence"], name="idx_ltm_type"),
            # The few waiting for their vector: the context names them on every call, and
            # without it that read every memory of the agent (docs/BENCHMARKS.md, "Planner
            # statistics and the unembedded memories").
            models.Index(
                fields=["agent_id"],
                condition=models.Q(has_embedding=False),
                name="idx_ltm_unembedded",
            ),
            models.Index(
                fields=["superseded_by"],
                condition=models.Q(superseded_by__isnull=False),
                name="idx_ltm_superseded_by",
            ),
            models.Index(fields=["agent_id", "attribute"], name="idx_ltm_attribute"),
        ]

    def __str__(self) -> str:
        return f"{self.get_memory_type_display()} #{self.pk}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Every save that writes the text writes its attribute too."""
        update_fields = kwargs.get("update_fields")
        if update_fields is None or "content" in update_fields:
            self.attribute = attributes.of_memory(self.content) or ""
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "attribute"}
        super().save(*args, **kwargs)

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())

    def is_superseded(self, now: datetime | None = None) -> bool:
        """A newer memory replaced it by `now` (the rule `current` applies to a queryset)."""
        return self.valid_until is not None and self.valid_until <= (now or timezone.now())

    @property
    def said_at(self) -> datetime:
        """When the fact became true, as far as the memory knows: its first source's time,
        else when it was stored."""
        return self.valid_from or self.created_at

    @property
    def from_extraction(self) -> bool:
        """Consolidation made it (rather than a person through the API, dashboard or admin)."""
        if "made_by_consolidation" not in self.__dict__:
            self.made_by_consolidation = LongTermMemoryHistory.objects.filter(
                memory_id=self.pk, action=MemoryAction.CREATE, actor=CONSOLIDATION
            ).exists()
        return self.made_by_consolidation

    def source_list(self) -> list[MemorySource]:
        """Its sources in order, each message with its session, role and time: read with
        the memory by `with_sources()`, else in one query."""
        models.prefetch_related_objects([self], sources_prefetch())
        return list(self.sources.all())

    @property
    def extractions(self) -> int:
        """How many extractions found it: `source_count` starts at 1 for a memory a person
        wrote too, which no extraction has seen until consolidation confirms it."""
        return self.source_count if self.from_extraction else self.source_count - 1


class MemorySource(models.Model):
    """Where a long-term memory came from: a message it was extracted from, or the person who
    wrote it ("written by <actor>"). A memory may have many; a forget request deletes those of
    the messages it deletes, and the memories left with none."""

    memory = models.ForeignKey(
        LongTermMemory, on_delete=models.DB_CASCADE, related_name="sources", db_index=False
    )
    agent_id = models.TextField(validators=[IdentifierValidator("agent_id")])
    # ON DELETE CASCADE in the database: a message deleted by any route is no longer a source.
    message = models.ForeignKey(
        MainMessage,
        null=True,
        blank=True,
        on_delete=models.DB_CASCADE,
        related_name="memory_sources",
        db_index=False,
    )
    written_by = models.TextField(
        null=True, blank=True, help_text="the person (actor) who wrote or edited the memory"
    )
    added_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "long_term_memory_sources"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(message__isnull=False, written_by__isnull=True)
                | models.Q(message__isnull=True, written_by__isnull=False),
                name="long_term_memory_sources_one_kind",
            ),
            models.UniqueConstraint(
                fields=["memory", "message"],
                condition=models.Q(message__isnull=False),
                name="long_term_memory_sources_message_once",
            ),
        ]
        indexes = [
            models.Index(fields=["memory"], name="idx_ltm_sources_memory"),
            # A forget request finds the memories of the messages it deletes.
            models.Index(fields=["agent_id", "message"], name="idx_ltm_sources_message"),
        ]

    def __str__(self) -> str:
        source = f"message {self.message_id}" if self.message_id else self.written_by
        return f"memory {self.memory_id} from {source}"


# The order a memory's sources are listed in: its messages, oldest first, then the people who
# wrote it, in the order they did.
SOURCE_ORDER = (
    models.F("message__timestamp").asc(nulls_last=True),
    "message_id",
    "added_at",
    "id",
)


def sources_prefetch() -> models.Prefetch:
    """A memory's sources with their messages, in SOURCE_ORDER."""
    listed = MemorySource.objects.select_related("message").order_by(*SOURCE_ORDER)
    return models.Prefetch("sources", queryset=listed)


class MemoryAction(models.TextChoices):
    """What a history row did; its label, as a memory's history says it ("edited by ann")."""

    CREATE = "create", _("created")
    UPDATE = "update", _("edited")
    MERGE = "merge", _("confirmed by an extraction")  # a new extraction matched this memory
    EXPIRE = "expire", _("expired")
    ARCHIVE = "archive", _("archived")
    DELETE = "delete", _("deleted")
    RESTORE = "restore", _("restored")  # an expired memory made active again
    REVERT = "revert", _("reverted")  # back to an earlier version (`changes["reverted_to"]`)
    # A newer memory replaced it (`changes`: valid_until, superseded_by).
    SUPERSEDE = "supersede", _("superseded")
    UNSUPERSEDE = "unsupersede", _("supersession undone")  # current again


# The service's own actors of history rows (every other actor is a person: `api`,
# `admin:<user>`, `ui:<user>`). Migration 0007's backfill names them in its SQL.
CONSOLIDATION = "consolidation"  # the actor of what consolidation writes
CLEANUP = "cleanup"  # the actor of what cleanup archives beyond `long_term_cap`
AUTOMATIC_ACTORS = frozenset({CONSOLIDATION, CLEANUP})
# The key of a history row's `changes` naming the consolidation run that created or merged
# the memory (the session page lists each run's memories by it).
RUN_NOTE = "consolidation_run"
# The key of an imported memory's `create` history row naming the entry it came from
# (memory.importers): importing the same file again adds nothing.
IMPORT_NOTE = "import_fingerprint"
# The history's fields holding times (as ISO text: `changes` and `old_values` are JSON).
TIME_FIELDS = frozenset({"expires_at", "archived_at", "valid_from", "valid_until"})
# What a history row may hold besides the fields it changed.
NOTE_KEYS = frozenset(
    {
        "reverted_to",
        "proposed_content",
        "content_kept",
        RUN_NOTE,
        IMPORT_NOTE,
        "reason",
        "decided_by",
    }
)


@dataclass(frozen=True)
class FieldChange:
    """One field of a history row: its value before (when recorded) and after."""

    name: str
    old: Any
    new: Any
    old_known: bool

    @property
    def is_time(self) -> bool:
        return self.name in TIME_FIELDS


def _value(name: str, value: Any) -> Any:
    if name in TIME_FIELDS and isinstance(value, str):
        return datetime.fromisoformat(value)
    return value


class LongTermMemoryHistory(models.Model):
    """Every change of a long-term memory: who, what, when, the text before and after.

    Keyed by the memory's id, not a foreign key, so the record of a deletion survives it.
    """

    memory_id = models.BigIntegerField(
        _("memory"),
    )
    agent_id = models.TextField(_("agent"), validators=[IdentifierValidator("agent_id")])
    action = models.TextField(_("action"), choices=MemoryAction.choices)
    actor = models.TextField(_("by"), help_text=_("api, admin:<user>, consolidation, cleanup..."))
    old_content = models.TextField(_("text before"), null=True, blank=True)
    new_content = models.TextField(_("text after"), null=True, blank=True)
    changes = models.JSONField(_("changes"), null=True, blank=True)
    # The changed fields' values before (`changes` holds them after); on a delete, every
    # editable field, so the page of a deleted memory can say what it was. Null before 0016.
    old_values = models.JSONField(_("values before"), null=True, blank=True)
    at = models.DateTimeField(_("time"), db_default=Now())

    class Meta:
        db_table = "long_term_memory_history"
        verbose_name = _("long-term memory change")
        verbose_name_plural = _("long-term memory history")
        indexes = [models.Index(fields=["memory_id", "-at"], name="idx_ltm_history_memory")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(action__in=MemoryAction.values),
                name="long_term_memory_history_action_valid",
            )
        ]

    def __str__(self) -> str:
        return gettext("%(action)s: memory %(id)s, by %(actor)s") % {
            "action": self.get_action_display(),
            "id": self.memory_id,
            "actor": self.actor,
        }

    @property
    def label(self) -> str:
        if self.action == MemoryAction.REVERT and self.changes:
            return gettext("reverted to version %(version)s") % {
                "version": self.changes.get("reverted_to")
            }
        if self.action == MemoryAction.UPDATE and self.changes == {"archived_at": None}:
            return gettext("unarchived")
        return self.get_action_display()

    @property
    def field_changes(self) -> list[FieldChange]:
        """The fields this change set, each with its old value when the row recorded it."""
        if self.action == MemoryAction.DELETE:
            return []  # old_values holds the whole memory, not changes
        old_values = self.old_values or {}
        return [
            FieldChange(
                name, _value(name, old_values.get(name)), _value(name, new), name in old_values
            )
            for name, new in (self.changes or {}).items()
            if name not in NOTE_KEYS
        ]

    @property
    def proposed_content(self) -> str | None:
        """The text a merge proposed for a curated memory, which kept its own."""
        return (self.changes or {}).get("proposed_content")


class Extractor(models.TextChoices):
    """What read a run's messages (empty until it starts)."""

    LLM = "llm", _("the chat model")
    RULES = "rules", _("the rules")


class RunStatus(models.TextChoices):
    QUEUED = "queued", _("queued")  # waiting for the worker
    # Waiting for the end of the agent's 30-second window (run_after).
    DEFERRED = "deferred", _("deferred")
    RUNNING = "running", _("running")
    DONE = "done", _("done")
    # The extraction failed; the session's next run covers these messages.
    FAILED = "failed", _("failed")
    # Before deferral existed: a request inside the window, dropped.
    SKIPPED = "skipped", _("skipped")


WAITING = (RunStatus.QUEUED, RunStatus.DEFERRED)


class Trigger(models.TextChoices):
    """What asked for a consolidation run."""

    SESSION_END = "session_end", _("at the session's end")  # POST /sessions/{id}/end, MCP
    TURNS = "turns", _("after 20 turns")  # consolidation.TURNS_PER_CONSOLIDATION replies


class ConsolidationRun(models.Model):
    """One consolidation of a session into long-term memories, from its request to its end.

    A run covers what came since the session's last done run, up to `last_message_id` (and
    `last_summary_id` for the chat model, which reads summaries): a waiting end-of-session run
    leaves it empty and takes everything there is when it starts. A session has at most one
    waiting run; later requests join it.
    """

    agent_id = models.TextField(_("agent"), validators=[IdentifierValidator("agent_id")])
    session_id = models.TextField(_("session"), validators=[IdentifierValidator("session_id")])
    trigger = models.TextField(_("trigger"), choices=Trigger.choices)
    status = models.TextField(_("status"), choices=RunStatus.choices, db_default=RunStatus.QUEUED)
    requested_at = models.DateTimeField(_("requested"), db_default=Now())
    run_after = models.DateTimeField(
        _("runs after"),
        null=True,
        blank=True,
        help_text=_("a deferred run waits for the agent's 30 s window"),
    )
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    last_message_id = models.BigIntegerField(
        _("last message"),
        null=True,
        blank=True,
        help_text=_("the session's last message this run covers"),
    )
    last_summary_id = models.BigIntegerField(
        _("last summary"),
        null=True,
        blank=True,
        help_text=_("the session's last summary this run covers"),
    )
    extractor = models.TextField(
        _("extractor"), choices=Extractor.choices, blank=True, db_default=""
    )
    created = models.IntegerField(_("memories created"), db_default=0)
    merged = models.IntegerField(_("memories merged"), db_default=0)
    reason = models.TextField(
        _("reason"), blank=True, db_default="", help_text=_("why it waited or failed")
    )

    class Meta:
        db_table = "consolidation_runs"
        verbose_name = _("consolidation run")
        verbose_name_plural = _("consolidation runs")
        constraints = [
            _one_of("status", RunStatus, "consolidation_runs_status_valid"),
            # Requests for a session that already waits join that run: one queue entry per
            # session, however many replies or ends ask for it.
            models.UniqueConstraint(
                fields=["agent_id", "session_id"],
                condition=models.Q(status__in=WAITING),
                name="consolidation_runs_one_waiting_per_session",
            ),
        ]
        indexes = [
            models.Index(fields=["agent_id", "-started_at"], name="idx_consolidation_agent"),
            models.Index(fields=["agent_id", "session_id"], name="idx_consolidation_session"),
        ]

    def __str__(self) -> str:
        return gettext("%(agent)s/%(session)s %(status)s (requested %(at)s)") % {
            "agent": self.agent_id,
            "session": self.session_id,
            "status": self.get_status_display(),
            "at": self.requested_at,
        }


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    """A bearer key for one agent. Only its SHA-256 is stored; the key is shown once."""

    agent_id = models.TextField(_("agent"), validators=[IdentifierValidator("agent_id")])
    name = models.TextField(_("name"), blank=True, db_default="")
    prefix = models.TextField(
        _("prefix"), help_text=_("The key's first characters, to tell keys apart.")
    )
    key_hash = models.TextField(_("key hash"), unique=True)
    created_at = models.DateTimeField(_("created"), db_default=Now())
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        db_table = "api_keys"
        verbose_name = _("API key")
        verbose_name_plural = _("API keys")
        indexes = [models.Index(fields=["agent_id"], name="idx_api_keys_agent")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.agent_id})"


class VectorIndexState(models.Model):
    """The one row describing the vector tables: whose vectors they hold, and the last run.

    The tables' dimension is fixed in their DDL, so vectors of two providers cannot mix: the
    signature (provider, model, dimension, prefixes) says which provider filled them.
    """

    provider = models.TextField()
    model = models.TextField()
    dimension = models.IntegerField()
    # An asymmetric model's prefixes (e5's "query: " and "passage: "); empty for the others.
    query_prefix = models.TextField(blank=True, db_default="")
    document_prefix = models.TextField(blank=True, db_default="")
    built_at = models.DateTimeField(db_default=Now())
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, db_default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.IntegerField(db_default=0)

    class Meta:
        db_table = "vector_index_state"

    def __str__(self) -> str:
        return f"{self.provider}/{self.model} ({self.dimension} dims)"


class IdempotencyKey(models.Model):
    """A message post's client key (the `Idempotency-Key` header, MCP's `client_id`), written
    in the transaction of the messages it stored: a retry with the same key answers those
    messages instead of storing them again (memory.idempotency). A key is the agent's own:
    another agent's same key is another record."""

    agent_id = models.TextField(validators=[IdentifierValidator("agent_id")])
    key = models.TextField()
    fingerprint = models.TextField(
        help_text="SHA-256 of the session id and the messages sent: a reuse of the key with "
        "another request is refused"
    )
    message_ids = models.JSONField(default=list, help_text="the messages stored, in order")
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "idempotency_keys"
        constraints = [
            # Concurrent requests with one key: one inserts, the others fail and read its row.
            models.UniqueConstraint(fields=["agent_id", "key"], name="idempotency_keys_unique"),
        ]
        indexes = [
            # The agent's expired records, deleted by its next keyed post.
            models.Index(fields=["agent_id", "created_at"], name="idx_idempotency_keys_age"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}: {self.key} ({len(self.message_ids)} messages)"


class ForgetScope(models.TextChoices):
    SESSION = "session", _("a session")
    AGENT = "agent", _("the whole agent")
    QUERY = "query", _("everything matching a query")


class ForgetReceipt(models.Model):
    """The audit log of forget requests: what was deleted, counted per kind with the ids, who
    asked and when. It stores no content (a query's text neither): only ids and counts."""

    agent_id = models.TextField(validators=[IdentifierValidator("agent_id")])
    scope = models.TextField(choices=ForgetScope.choices)
    session_id = models.TextField(
        null=True, blank=True, help_text="the session forgotten (scope `session`)"
    )
    actor = models.TextField(help_text="api, mcp, ui:<user>, admin:<user>, manage.py")
    at = models.DateTimeField(db_default=Now())
    counts = models.JSONField(default=dict, help_text="rows deleted, per kind")
    ids = models.JSONField(default=dict, help_text="the ids deleted, per kind")

    class Meta:
        db_table = "forget_receipts"
        constraints = [_one_of("scope", ForgetScope, "forget_receipts_scope_valid")]
        indexes = [models.Index(fields=["agent_id", "-at"], name="idx_forget_receipts_agent")]

    def __str__(self) -> str:
        return f"forget {self.scope} of {self.agent_id} at {self.at}"
