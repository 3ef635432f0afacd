"""The SQLite database backend of orca-memory (`ENGINE = "orca_memory.db"`), see `base.py`."""
