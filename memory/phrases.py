"""What the memory package says in words about what it did (why a context item is there or
was left out, the method that chose it, why search went lexical), in English, as the API, MCP
and logs give it, and translatable where the dashboard shows it.

A `Phrase` is that English text (a str: JSON, comparisons and logs see nothing new) which also
keeps its msgid and values, so `translated()` can say it in the page's language. Fixed words
are plain strings marked with gettext_noop where they are written, or listed in SHOWN_VALUES
when they are values the code keeps (a method, a status); `translated()` looks both up.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext, gettext_noop

from memory import attributes
from memory.models import AUTOMATIC_ACTORS

# Values the code keeps as words and the dashboard shows: roles and memory types inside a
# sentence or a context item (a model's choices have their own labels), the service's own
# processes where they made a change, the methods that choose context items and answer
# searches, and the service's status.
SHOWN_VALUES = (
    gettext_noop("user"),
    gettext_noop("assistant"),
    gettext_noop("system"),
    gettext_noop("tool"),
    gettext_noop("preference"),
    gettext_noop("fact"),
    gettext_noop("decision"),
    gettext_noop("project"),
    gettext_noop("consolidation"),
    gettext_noop("cleanup"),
    gettext_noop("similarity"),
    gettext_noop("lexical"),
    gettext_noop("hybrid"),
    gettext_noop("vector"),
    gettext_noop("mixed"),
    gettext_noop("newest"),
    gettext_noop("access_count"),
    gettext_noop("identity"),
    gettext_noop("attribute"),
    gettext_noop("neighbour"),
    gettext_noop("none"),
    gettext_noop("ok"),
    gettext_noop("degraded"),
    gettext_noop("error"),
)


class Phrase(str):
    """English text made from a msgid (%-placeholders) and its values; a value that is itself
    a Phrase is translated with it."""

    msgid: str
    values: dict[str, Any]

    def __new__(cls, msgid: str, **values: Any) -> Phrase:
        phrase = super().__new__(cls, msgid % values if values else msgid)
        phrase.msgid, phrase.values = msgid, values
        return phrase

    def __reduce__(self) -> tuple[Any, ...]:  # copies and pickles keep the msgid
        return (_phrase, (self.msgid, self.values))


def _phrase(msgid: str, values: dict[str, Any]) -> Phrase:
    return Phrase(msgid, **values)


# A weekday as `memory.attributes` keys it ("thurs", or 四), by the name Django translates.
_WEEKDAYS = {
    "mon": gettext_noop("Monday"),
    "tues": gettext_noop("Tuesday"),
    "wednes": gettext_noop("Wednesday"),
    "thurs": gettext_noop("Thursday"),
    "fri": gettext_noop("Friday"),
    "satur": gettext_noop("Saturday"),
    "sun": gettext_noop("Sunday"),
    "一": gettext_noop("Monday"),
    "二": gettext_noop("Tuesday"),
    "三": gettext_noop("Wednesday"),
    "四": gettext_noop("Thursday"),
    "五": gettext_noop("Friday"),
    "六": gettext_noop("Saturday"),
    "日": gettext_noop("Sunday"),
}
gettext_noop("music")  # the one kind of favourite named by the table (memory.attributes)


def attribute_label(name: str) -> Phrase:
    """An attribute's name (`LongTermMemory.attribute`) for a person to read: its parts
    translated, "a weekday's activity: thurs" as the activity of Thursday, "favourite film"
    with its kind (a kind the table does not name stays as said)."""
    activity, _, day = name.partition(": ")
    if activity == attributes.WEEKDAY_ACTIVITY and day:
        return Phrase(
            gettext_noop("%(activity)s: %(day)s"),
            activity=Phrase(activity),
            day=Phrase(_WEEKDAYS.get(day, day)),
        )
    if name.startswith(attributes.FAVOURITE):
        return Phrase(
            gettext_noop("favourite %(kind)s"), kind=Phrase(name.removeprefix(attributes.FAVOURITE))
        )
    return Phrase(name)


def as_phrase(text: str) -> Phrase:
    """`text` as a value to translate inside another Phrase: a word marked with gettext_noop
    (or a message nobody translates, which stays as it is)."""
    return text if isinstance(text, Phrase) else Phrase(text)


def translated(text: str) -> str:
    """`text` in the active language: a Phrase by its msgid, its Phrase values translated too;
    a plain string as the catalogue has it (a marked word), else unchanged (a provider's
    error message, say)."""
    if not isinstance(text, Phrase):
        return gettext(text) if text else text
    if not text.values:
        return gettext(text.msgid)
    values = {
        name: translated(value) if isinstance(value, Phrase) else value
        for name, value in text.values.items()
    }
    return gettext(text.msgid) % values


def actor_label(actor: str) -> str:
    """Who made a change, in the page's language: a person by name ("ui:ann" -> "ann
    (dashboard)"), the API or MCP, or the service's own process by what it does."""
    kind, _, name = actor.partition(":")
    if name and kind == "ui":
        return gettext("%(user)s (dashboard)") % {"user": name}
    if name and kind == "admin":
        return gettext("%(user)s (admin)") % {"user": name}
    if actor in AUTOMATIC_ACTORS:
        return gettext(actor)
    return actor.upper() if actor in ("api", "mcp") else actor
