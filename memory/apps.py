from __future__ import annotations

from django.apps import AppConfig
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import request_finished
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = _("Memory")

    def ready(self) -> None:
        # The embedding provider is resolved once, as each process starts (web, task worker,
        # command): installing the local model under a running server changes nothing until
        # it restarts, and the web process and the worker started together agree.
        from django.conf import settings
        from threadpoolctl import threadpool_limits

        from memory import auth, embeddings, index, memories, server_settings
        from orca_memory.core.config import log_legacy_notice

        # One BLAS thread a process (numpy is loaded by now: index): each answers a call at a
        # time beside the other web workers and the task worker on the same cores, where
        # numpy's thread per core made a context call twice as slow (docs/BENCHMARKS.md,
        # "One BLAS thread a process").
        threadpool_limits(limits=1, user_api="blas")

        log_legacy_notice(settings.ORCA)  # old configuration keys: once per process
        try:
            embeddings.configured_embedder()  # resolves the provider; loads no model
        except ValueError as exc:  # a local model that is not bundled
            raise ImproperlyConfigured(f"[embedding] model (EMBEDDING_MODEL): {exc}") from exc
        connection_created.connect(index.prepare_connection)
        # Bookkeeping of API keys waits until a request is answered (memory.auth).
        request_finished.connect(auth.record_key_uses)
        post_migrate.connect(memories.derive_attributes, sender=self)
        # PostgreSQL's shared_buffers and maintenance_work_mem, warned about by migrate.
        checks.register(server_settings.check_server_settings, checks.Tags.database)
