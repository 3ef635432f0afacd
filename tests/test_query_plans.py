"""SQLite's query plans where a wrong one reads every row of an agent: planner statistics
gathered by each new connection (orca_memory.core.db.base), and the partial index of the memories
waiting for their vector."""

from __future__ import annotations

import json
from contextlib import closing

import pytest

from orca_memory.core.db.base import Driver, _gather_statistics
from tests.helpers import last_line, manage

pytestmark = pytest.mark.sqlite_only

# In a service process: an agent's 2,000 messages and memories stored, then a new connection
# (as after CONN_MAX_AGE), then the plans of the statements the context runs.
PLANS = """
import json
from django.db import connection
from memory.models import LongTermMemory, MainMessage
MainMessage.objects.bulk_create(
    MainMessage(agent_id="a1", session_id=f"s{i % 20}", role="user", content=f"m{i}")
    for i in range(2000)
)
LongTermMemory.objects.bulk_create(
    LongTermMemory(agent_id="a1", content=f"fact {i}", memory_type="fact", has_embedding=True)
    for i in range(2000)
)
connection.close()
ids = list(MainMessage.objects.values_list("pk", flat=True)[:100])
statements = {
    "hits": MainMessage.objects.filter(agent_id="a1").filter(pk__in=ids),
    "unembedded": LongTermMemory.objects.filter(agent_id="a1", has_embedding=False),
}
plans = {}
with connection.cursor() as cursor:
    for name, rows in statements.items():
        sql, params = rows.query.sql_with_params()
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plans[name] = " | ".join(row[3] for row in cursor.fetchall())
    cursor.execute("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'")
    if cursor.fetchone()[0]:
        cursor.execute("SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'main_messages'")
        plans["statistics"] = cursor.fetchone()[0]
    else:
        plans["statistics"] = 0
print(json.dumps(plans))
"""


def test_a_new_connection_gathers_statistics_so_hits_are_read_by_their_ids(tmp_path):
    manage(tmp_path, "migrate", "--no-input")

    plans = json.loads(last_line(manage(tmp_path, "shell", "-c", PLANS)))

    assert plans["statistics"] > 0
    # Not "USING INDEX idx_main_session_time (agent_id=?)": every message of the agent.
    assert plans["hits"] == "SEARCH main_messages USING INTEGER PRIMARY KEY (rowid=?)"
    assert plans["unembedded"] == (
        "SEARCH long_term_memories USING INDEX idx_ltm_unembedded (agent_id=?)"
    )


def test_a_read_only_database_opens_without_statistics(tmp_path):
    path = tmp_path / "read-only.db"
    with closing(Driver.connect(path)) as writable:
        writable.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, agent TEXT)")
        writable.execute("CREATE INDEX t_agent ON t (agent)")
        writable.executemany("INSERT INTO t (agent) VALUES (?)", [("a",)] * 1000)
        writable.commit()
    with closing(Driver.connect(f"file:{path}?mode=ro", uri=True)) as read_only:
        _gather_statistics(read_only)  # ANALYZE cannot write: logged, not raised

        assert read_only.execute("SELECT count(*) FROM t").fetchone() == (1000,)
        tables = read_only.execute("SELECT name FROM sqlite_master WHERE name = 'sqlite_stat1'")
        assert tables.fetchall() == []
