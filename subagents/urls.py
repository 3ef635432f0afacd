from __future__ import annotations

from django.urls import path

from subagents import views

urlpatterns = [
    path("messages/<int:parent_id>/subagent/", views.subagent_run, name="subagent_run"),
]
