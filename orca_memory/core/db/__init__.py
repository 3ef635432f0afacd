"""The SQLite database backend of orca-memory (`ENGINE = "orca_memory.core.db"`), see `base.py`."""
