"""The third-party apps the admin lists, named in the page's language: they ship no Chinese
(axes has no zh_Hans catalogue; django-tasks-db's app name is not marked for translation)."""

from __future__ import annotations

from axes.apps import AppConfig as AxesConfig
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop
from django_tasks_db.apps import TasksAppConfig


class SignInThrottlingConfig(AxesConfig):
    verbose_name = _("Sign-in throttling")


class BackgroundTasksConfig(TasksAppConfig):
    verbose_name = _("Background tasks")


# Their models' names as they mark them for translation: this project's catalogue (in
# LOCALE_PATHS, which Django searches first) has them in Chinese.
MODEL_NAMES = (
    gettext_noop("access attempt"),
    gettext_noop("access attempts"),
    gettext_noop("access failure"),
    gettext_noop("access failures"),
    gettext_noop("access log"),
    gettext_noop("access logs"),
    gettext_noop("Task Result"),
    gettext_noop("Task Results"),
)

# A string of Django 6.1's admin that its Chinese catalogue lacks: the blank choice of the
# admin's select boxes (the actions above a list).
DJANGO_STRINGS = (gettext_noop("- Select an option -"),)
