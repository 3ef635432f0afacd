"""The project's shared base, under the apps: configuration (`config`), the files the service
writes (`files`), the one error shape (`errors`), the dashboard's page helpers (`pages`) and the
SQLite backend (`db`). The apps import it; it imports no app and nothing of the wiring above
them in `orca_memory` (settings, api, urls, wsgi, ...): tests/test_import_graph.py."""
