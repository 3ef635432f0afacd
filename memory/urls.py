"""The dashboard's pages (the JSON API lives in api.py)."""

from __future__ import annotations

from django.urls import path

from memory import views, views_forget

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("sessions/", views.sessions, name="sessions"),
    path("search/", views.search_page, name="search"),
    # Agent names and session ids never contain "/" (memory.validation), so <str:> fits them.
    path("sessions/<str:agent_id>/<str:session_id>/", views.session, name="session"),
    path(
        "sessions/<str:agent_id>/<str:session_id>/context/",
        views.context_preview,
        name="context_preview",
    ),
    path("memories/", views.memories, name="memories"),
    path("memories/bulk/", views.memories_bulk, name="memories_bulk"),
    path("memories/<int:memory_id>/", views.memory, name="memory"),
    path("memories/<int:memory_id>/revert/", views.memory_revert_view, name="memory_revert"),
    path("memories/<int:memory_id>/history/", views.memory_history, name="memory_history"),
    path("memories/<int:memory_id>/edit/", views.memory_edit, name="memory_edit"),
    path("memories/<int:memory_id>/expire/", views.memory_expire_view, name="memory_expire"),
    path("memories/<int:memory_id>/restore/", views.memory_restore, name="memory_restore"),
    path(
        "memories/<int:memory_id>/unarchive/", views.memory_unarchive_view, name="memory_unarchive"
    ),
    path("memories/<int:memory_id>/delete/", views.memory_delete_view, name="memory_delete"),
    path("forget/", views_forget.forget_page, name="forget"),
    path(
        "memories/<int:memory_id>/unsupersede/",
        views.memory_unsupersede_view,
        name="memory_unsupersede",
    ),
]
