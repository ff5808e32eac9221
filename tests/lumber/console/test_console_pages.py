"""Every console page in a real Chromium (Debian's, headless, driven by Playwright) against the real stack
of ``conftest.py``: each page loads with status 200 and no console error, shows the stack's exact figures,
and is saved as a screenshot under the test's temporary folder; each JSON twin gives the same figures."""

from __future__ import annotations

import json

from tests.lumber.console.conftest import HOUR_08, HOUR_09, NOT_AVRO, ConsoleStack, Visit, json_of

AUDIT_RANGE = {"since": "2026-11-22T00", "until": "2026-11-23T00"}


def test_cluster_page(visit: Visit, console_stack: ConsoleStack) -> None:
    page = visit.open("/", "cluster")
    assert console_stack.cluster.brokers[0].address in page.inner_text("main")
    data = json_of(console_stack, "/")
    assert [b["address"] for b in data["brokers"]] == [console_stack.cluster.brokers[0].address]
    (topic,) = [t for t in data["topics"] if t["topic"] == console_stack.topic]
    assert [
        (p["partition"], p["leader"], p["replicas"], p["isr"], p["log_start_offset"], p["log_end_offset"])
        for p in topic["partitions"]
    ] == [(0, 0, [0], [0], 0, 7), (1, 0, [0], [0], 0, 7)]
    assert [p["under_replicated"] for p in topic["partitions"]] == [False, False]
    assert (topic["messages"], topic["under_replicated_partitions"]) == (14, 0)
    assert data["controller_id"] == 0
    assert data["problems"] == []
    assert page.inner_text("#health") == "Healthy: every broker up, every partition led and fully replicated."
    assert (visit.shots / "cluster.png").stat().st_size > 1000
    # internal topics (the audit topic, the group coordinator's offsets) hidden until asked for
    internal = sorted(t["topic"] for t in data["topics"] if t["internal"])
    assert {"__consumer_offsets", "_audit"} <= set(internal)  # and the load job's, when it writes one
    assert all(name.startswith("_") for name in internal)
    topics_shown = {
        row.split("\t")[0] for row in page.locator("main table").nth(1).inner_text().splitlines()[1:]
    }
    assert topics_shown == {console_stack.topic, *console_stack.other_topics}
    page.click(f"text=show internal topics ({len(internal)})")
    page.wait_for_url("**/?internal=1")
    assert visit.errors == []
    topics_shown = {
        row.split("\t")[0] for row in page.locator("main table").nth(1).inner_text().splitlines()[1:]
    }
    assert topics_shown == {console_stack.topic, *console_stack.other_topics, *internal}
    assert page.inner_text("#internal-toggle") == "hide internal topics"


def test_topic_page_shows_decoded_records(visit: Visit, console_stack: ConsoleStack) -> None:
    stack = console_stack
    page = visit.open(f"/topics/{stack.topic}?partition=0&offset=0", "topic-p0")
    rows = page.locator("main table").nth(1).locator("tr")
    assert rows.count() == 1 + 7  # header, 6 views and the record that is not Avro
    for offset, view in enumerate(stack.values[0][:6]):
        cells = rows.nth(1 + offset).locator("td")
        assert cells.nth(0).inner_text() == str(offset)
        assert cells.nth(2).inner_text() == f"key-0-{offset}"
        assert cells.nth(3).inner_text() == "host: console-test"
        assert cells.nth(4).inner_text() == f"id {stack.schema_ids['v1']} · {stack.topic}-value v1"
        assert json.loads(cells.nth(5).inner_text()) == view
    bad = rows.nth(7).locator("td")
    assert "not Avro" in bad.nth(5).inner_text()
    assert "magic byte is 0x07" in bad.nth(5).inner_text()
    assert "0x" + NOT_AVRO.hex() in bad.nth(5).inner_text()  # not printable: shown as hex

    data = json_of(stack, f"/topics/{stack.topic}", partition=1)
    records = data["page"]["records"]
    assert [r["offset"] for r in records] == list(range(7))
    assert [r["value"] for r in records] == stack.values[1]
    assert [r["version"] for r in records] == [2, 2, 2, 2, 1, 1, 1]
    assert records[0]["timestamp_ms"] == HOUR_08
    assert records[4]["timestamp_ms"] == HOUR_09

    # the schema link leads to the subject's version, which diffs against v1
    page.click(f"text={stack.topic}-value v1")
    assert page.url.endswith(f"/schemas/{stack.topic}-value?version=1")
    visit.open(f"/topics/{stack.topic}?partition=1&time=2026-11-22T09:00:00Z", "topic-p1-by-time")
    assert page.locator("main table").nth(1).locator("tr").count() == 1 + 3
    visit.open(f"/topics/{stack.topic}/0/3", "record")
    assert json.loads(page.locator("main pre").first.inner_text()) == stack.values[0][3]


def test_group_page(visit: Visit, console_stack: ConsoleStack) -> None:
    stack = console_stack
    page = visit.open("/groups", "groups")
    page.click(f"text={stack.group}")
    page.wait_for_url(f"**/groups/{stack.group}?kind=zookeeper")
    visit.open(f"/groups/{stack.group}", "group")
    data = json_of(stack, f"/groups/{stack.group}")
    assert (data["kind"], len(data["members"])) == ("zookeeper", 1)
    assert data["members"][0]["subscription"] == {stack.topic: 1}
    member = data["members"][0]["id"]
    assert [
        (p["partition"], p["owner"], p["committed"], p["log_end"], p["lag"]) for p in data["partitions"]
    ] == [
        (0, member, 5, 7, 2),
        (1, member, 7, 7, 0),
    ]
    assert data["total_lag"] == 2


def test_kafka_group_page(visit: Visit, console_stack: ConsoleStack) -> None:
    """The confluent-kafka group K beside the zookeeper group G: listed with its kind and state, its page
    showing the member's client id and assignment, committed offsets, log ends and lag per partition."""
    stack = console_stack
    listed = {(g["group"], g["kind"]): g for g in json_of(stack, "/groups")["groups"]}
    assert (
        listed[(stack.group, "zookeeper")]["members"],
        listed[(stack.group, "zookeeper")]["generation"],
    ) == (
        1,
        1,
    )
    assert listed[(stack.kafka_group, "kafka")] == {
        "group": stack.kafka_group,
        "kind": "kafka",
        "members": 1,
        "generation": None,
        "state": "Stable",
        "partitions": 2,
        "total_lag": 4,  # partition 0 committed at 3 of 7
        "status": None,  # no lag exporter watches this stack
    }
    assert (
        listed[(stack.group, "zookeeper")]["total_lag"],
        listed[(stack.group, "zookeeper")]["status"],
    ) == (
        2,
        None,
    )
    page = visit.open("/groups", "groups-both-kinds")
    row = page.locator("main tr", has_text=stack.kafka_group)
    assert row.locator("td").all_inner_texts() == [
        stack.kafka_group,
        "kafka",
        "1",
        "-",
        "Stable",
        "2",
        "4",
        "-",
    ]
    row = page.locator("main tr", has_text=stack.group)
    assert row.locator("td").all_inner_texts()[5:] == ["2", "2", "-"]
    page.click(f"text={stack.kafka_group}")
    page.wait_for_url(f"**/groups/{stack.kafka_group}?kind=kafka")
    page = visit.open(f"/groups/{stack.kafka_group}", "kafka-group")
    data = json_of(stack, f"/groups/{stack.kafka_group}")
    assert (data["kind"], data["state"], data["protocol"], data["coordinator"]) == (
        "kafka",
        "Stable",
        "range",
        0,
    )
    [member] = data["members"]
    assert (member["client_id"], member["host"], member["assignment"]) == (
        "console-k",
        "127.0.0.1",
        [f"{stack.topic}-0", f"{stack.topic}-1"],
    )
    assert [
        (p["partition"], p["member"], p["committed"], p["log_end"], p["lag"]) for p in data["partitions"]
    ] == [
        (0, member["id"], 3, 7, 4),
        (1, member["id"], 7, 7, 0),
    ]
    assert data["total_lag"] == 4
    # one commit each (at the member's commit), the records stamped 2026-11-22: the log ends of now
    assert [[(h["committed"], h["log_end"], h["lag"]) for h in p["history"]] for p in data["partitions"]] == [
        [(3, 7, 4)],
        [(7, 7, 0)],
    ]
    assert [(h["committed"], h["log_end"], h["lag"]) for h in data["lag_history"]["total"]] == [(10, 14, 4)]
    assert data["partitions"][0]["history"][0]["time_ms"] == data["lag_history"]["total"][0]["time_ms"]
    text = page.inner_text("main")
    assert "A kafka group. State Stable, protocol range, coordinator broker 0; total lag 4" in text
    members = page.locator("main table").nth(0).locator("tr").nth(1).locator("td").all_inner_texts()
    assert members == [member["id"], "console-k", "127.0.0.1", "-", f"{stack.topic}-0, {stack.topic}-1"]
    partitions = page.locator("main table").nth(1).locator("tr")
    assert [partitions.nth(i).locator("td").all_inner_texts()[:6] for i in (1, 2)] == [
        [stack.topic, "0", member["id"], "3", "7", "4"],
        [stack.topic, "1", member["id"], "7", "7", "0"],
    ]
    assert page.locator("main svg.sparkline").count() == 3  # a partition's each, and the total
    assert page.locator("main svg:not(.sparkline) text").all_text_contents() == [
        f"{stack.topic}-0",
        "4",
        f"{stack.topic}-1",
        "0",
    ]


def test_schema_pages(visit: Visit, console_stack: ConsoleStack) -> None:
    stack = console_stack
    subject = f"{stack.topic}-value"
    visit.open("/schemas", "schemas")
    page = visit.open(f"/schemas/{subject}", "subject")
    assert "Compatibility BACKWARD" in page.inner_text("main")
    page = visit.open(f"/schemas/{subject}/diff?from=1&to=2", "diff")
    added = page.locator("span.add").all_inner_texts()
    assert any('"name": "load_time_ms"' in line for line in added), added
    data = json_of(stack, f"/schemas/{subject}")
    assert [(v["version"], v["id"]) for v in data["versions"]] == [
        (1, stack.schema_ids["v1"]),
        (2, stack.schema_ids["v2"]),
    ]
    visit.open(f"/schemas/ids/{stack.schema_ids['v2']}", "schema-id")


def test_loads_page(visit: Visit, console_stack: ConsoleStack) -> None:
    stack = console_stack
    page = visit.open(f"/loads?job={stack.job}", "loads")
    data = json_of(stack, "/loads", job=stack.job)
    # hour 08 is complete by the audit (11 produced = 10 loaded + 1 quarantined): the load marked it
    (hour,) = data["hours"]
    marker = hour["marker"]
    assert (hour["topic"], hour["hour"], hour["state"], hour["overdue"], hour["error"]) == (
        stack.topic,
        "2026-11-22T08",
        "COMPLETE",
        False,
        None,
    )
    assert (marker["revision"], marker["expected"], marker["loaded"], marker["quarantined"]) == (1, 11, 10, 1)
    assert marker["manifest_sequence"] == 1
    row = page.locator("main table").nth(1).locator("tr").nth(1).locator("td").all_inner_texts()
    assert row[:8] == [stack.topic, "2026-11-22T08", "COMPLETE", "1", "11", "10", "1", "1"]
    (run,) = data["runs"]
    assert (run["outcome"], run["rows"], run["quarantined"], run["sequence"]) == ("committed", 10, 1, 1)
    assert (run["first_hour"], run["last_hour"]) == ("2026-11-22T08", "2026-11-22T08")
    assert run["duration_ms"] > 0
    tree = {(h["topic"], h["dataset"], h["dt"], h["hr"]): h for h in data["tree"]}
    assert set(tree) == {
        (stack.topic, "data", "2026-11-22", "08"),
        (stack.topic, "errors", "2026-11-22", "08"),
    }
    data_files = sorted((stack.warehouse / stack.topic / "dt=2026-11-22" / "hr=08").glob("*.parquet"))
    assert tree[(stack.topic, "data", "2026-11-22", "08")]["files"] == len(data_files) == run["files"] - 1
    assert tree[(stack.topic, "data", "2026-11-22", "08")]["bytes"] == sum(
        f.stat().st_size for f in data_files
    )


def test_audit_heatmap_shows_the_incomplete_window(visit: Visit, console_stack: ConsoleStack) -> None:
    stack = console_stack
    query = f"since={AUDIT_RANGE['since']}&until={AUDIT_RANGE['until']}&job={stack.job}"
    page = visit.open(f"/audit?{query}", "audit")
    assert page.locator('rect[data-label="INCOMPLETE"]').count() == 1
    assert page.locator('rect[data-label="COMPLETE"]').count() == 1
    page.click('a:has(rect[data-label="INCOMPLETE"])')
    page.wait_for_url(f"**/audit/{stack.topic}/{HOUR_09}?*")
    page.screenshot(path=str(visit.shots / "audit-window.png"), full_page=True)
    assert visit.errors == []
    row = page.locator("main table").first.locator("tr").nth(1).locator("td").all_inner_texts()
    assert row[2:] == ["3", "0", "3", "0", "0", "0", "INCOMPLETE"]

    data = json_of(stack, "/audit", job=stack.job, **AUDIT_RANGE)
    windows = {w["window_start_ms"]: w for w in data["windows"] if w["topic"] == stack.topic}
    assert {
        s: (w["expected"], w["loaded"], w["malformed"], w["missing"], w["status"]) for s, w in windows.items()
    } == {
        HOUR_08: (11, 10, 1, 0, "COMPLETE"),
        HOUR_09: (3, 0, 0, 3, "INCOMPLETE"),
    }
    page = visit.open(f"/audit?{query}", "audit")
    assert page.locator("#legend span").count() == 7
    # as of 10:30, hour 09 (ended 10:00) is within its grace (1 h): OPEN, drawn apart from INCOMPLETE
    page = visit.open(f"/audit?{query}&now=2026-11-22T10:30", "audit-open")
    assert page.locator('rect[data-label="INCOMPLETE"]').count() == 0
    open_cell = page.locator('rect[data-label="OPEN"]')
    assert open_cell.count() == 1
    assert open_cell.get_attribute("fill") == "#e0a526"  # the legend's OPEN swatch
    assert page.locator('#legend span[data-legend="OPEN"]').inner_text() == (
        "OPEN: within the grace period, more may arrive"
    )
    window = json_of(stack, f"/audit/{stack.topic}/{HOUR_08}", job=stack.job, **AUDIT_RANGE)
    assert window["hosts"] == {"web-1": 11}


def test_record_search_by_key_header_and_value_within_a_bounded_range(
    visit: Visit, console_stack: ConsoleStack
) -> None:
    """Partition 0 holds page views 0-5 (keys key-0-0..5, header host: console-test) and a record that is
    not Avro at offset 6; page_key profile_view is in views 1 and 4."""
    stack = console_stack
    page = visit.open(f"/topics/{stack.topic}?partition=0", "topic-search-form")
    page.fill('input[name="q"]', "profile_view")
    page.click('button:has-text("Search")')
    page.wait_for_url(f"**/topics/{stack.topic}/search?q=profile_view&partition=0")
    assert visit.errors == []
    assert page.inner_text("#searched").startswith(
        f'2 of 7 records of {stack.topic}-0 in offsets [0, 7) contain "profile_view" in any'
    )
    cells = [r.locator("td").all_inner_texts()[:3] for r in page.locator("main table tr").all()[1:]]
    assert [(c[0], c[2]) for c in cells] == [("1", "value"), ("4", "value")]

    def hits(**params: object) -> list[tuple[int, list[str]]]:
        found = json_of(stack, f"/topics/{stack.topic}/search", partition=0, **params)
        return [(h["offset"], h["matched_in"]) for h in found["hits"]]

    assert hits(q="key-0-3", **{"in": "key"}) == [(3, ["key"])]
    assert hits(q="console-test", **{"in": "header"}) == [(o, ["header"]) for o in range(7)]
    assert hits(q="key-0-3", **{"in": "value"}) == []
    # bounded: two offsets from 0 read, view 4 not reached; the answer names the range read
    bounded = json_of(
        stack, f"/topics/{stack.topic}/search", partition=0, q="profile_view", span=2, **{"from": 0}
    )
    assert (bounded["from_offset"], bounded["until_offset"], bounded["records_read"]) == (0, 2, 2)
    assert [h["offset"] for h in bounded["hits"]] == [1]
    too_wide = stack.get(f"/topics/{stack.topic}/search", q="x", span=10_001, format="json")
    assert (too_wide.status_code, too_wide.json()["message"]) == (
        400,
        "parameter span=10001: expected 1 to 10000 offsets",
    )
