"""dtn-migrate-api and ``openstack dtn`` on two real clouds.

One pair of clouds serves the whole class (tests/functional/api): real
Keystones, Glances, agents, engines and the APIs under uwsgi.  Every
``openstack`` run is the real executable as a subprocess, as alice
(member of demo), rita (reader of demo), bob (member of other) or admin.
"""

import json
import os
import re
import time

from testtools import content
import yaml

import dtn_migrate
from tests.functional.api import harness as api
from tests.functional import base
from tests.functional.migration import harness as migration

MiB = api.MiB
OPENAPI = os.path.join(os.path.dirname(dtn_migrate.__file__), "api",
                       "openapi.yaml")
#: Examples schemathesis generates per operation.
MAX_EXAMPLES = 25
NOT_FOUND = r"not (be )?found.*404"


def _ids(rows):
    return {r["id"] if "id" in r else r["ID"] for r in rows}


class TestApi(api.ApiPairTestCase):

    # Migrate, list, show, peers.

    def test_migrate_wait_as_member(self):
        source = self.upload(6 * MiB)
        # Glance A honours the same Keystone users: the image is demo's.
        self.assertEqual(self.a.users["alice"]["project_id"],
                         source["owner"])
        proc = self.openstack("alice", "dtn", "migrate", source["id"],
                              "--peer", self.b.agent_name, "--wait")
        out = proc.stdout + proc.stderr
        # Live progress per stage, then the result.
        self.assertIn("transfer", out.lower())
        self.assertIn("complete", out.lower())
        [rec] = self.migrations_of(source["id"])
        self.assertMigrated(rec, source)
        self.assertEqual(self.a.users["alice"]["project_id"],
                         rec["project_id"])
        self.assertEqual(self.a.users["alice"]["user_id"], rec["user_id"])
        self.assertIn(rec["id"], out)

        listed = self.openstack_json("alice", "dtn", "migration", "list")
        self.assertIn(rec["id"], _ids(listed))
        shown = self.show(rec["id"])
        self.assertEqual("complete", shown["state"])
        self.assertEqual(source["id"], shown["image_id"])
        self.assertEqual(rec["peer_image_id"], shown["peer_image_id"])
        # The event timeline went from queued to finished.
        events = self.rest_show(rec["id"])["events"]
        self.assertEqual("queued", events[0]["event"])
        self.assertIn("finished", [e["event"] for e in events])
        # rita (reader of demo) lists and shows it too.
        self.assertIn(rec["id"], _ids(self.openstack_json(
            "rita", "dtn", "migration", "list")))
        self.assertEqual(rec["id"], self.show(rec["id"], "rita")["id"])

    def test_progress_as_the_api_shows_it(self):
        # 96 MiB at 8 MiB/s, pipelined: polled over REST all the way.
        source = self.upload(96 * MiB)
        rec = self.start_migration(source["id"])
        seen = []

        def ended():
            m = self.rest_show(rec["id"])
            seen.append((time.monotonic(), m))
            return m["state"] in api.FINAL and m
        final = self.wait_until(ended, "the migration to end", timeout=300,
                                interval=0.25)
        end = seen[-1][0]
        self.assertMigrated(final, source)
        running = [(t, m) for t, m in seen if m["state"] == "running"]
        self.assertGreater(len(running), 10)
        # Never back, and no stage ahead of the one before it.
        progress = [m["progress"] for _t, m in seen]
        self.assertEqual(sorted(progress), progress)
        for _t, m in running:
            moved = m["bytes"]
            self.assertLessEqual(moved["import"], moved["transfer"], m)
            self.assertLessEqual(moved["transfer"], moved["export"], m)
            self.assertIsNone(m["peer_silent_since"])
        # No ETA from the first samples; then one close to the time
        # that was really left (of all the stages).
        self.assertIsNone(running[0][1]["eta"])
        timed = [(round(m["eta"], 1), round(end - t, 1))
                 for t, m in running if m["eta"] is not None]
        self.addDetail("eta-and-time-left", content.text_content(
            repr(timed)))
        self.addDetail("samples", content.text_content("\n".join(
            "%.1f %s %s %s %s" % (end - t, m["progress"], m["rate"],
                                  m["eta"], m["bytes"])
            for t, m in running)))
        self.assertTrue(timed, running)
        eta, left = timed[len(timed) // 2]
        self.assertLess(abs(eta - left), max(4.0, left / 2), timed)
        # The CLI's show: the field is there, empty while it answers.
        shown = self.show(rec["id"])
        self.assertIsNone(shown["peer_silent_since"])

    def test_sparse_image_migrates_only_its_data(self):
        """Issue 13, through both Glances: a raw image of 64 MiB holding
        2 MiB of data (four pieces, none aligned to an object) migrates
        bit-exact, and the DTN link carries its data, not its holes:
        the source agent put at most 1.05 x the data + 1 MiB on it.
        """
        data = {(5 + 13 * i) * MiB + 123 * 1024 + i:
                base.random_bytes(MiB // 2, 200 + i) for i in range(4)}
        source = self.upload(64 * MiB, name="sparse-raw", write=(
            lambda path, size: base.write_at(path, size, data)))
        self.openstack("alice", "dtn", "migrate", source["id"], "--peer",
                       self.b.agent_name, "--wait")
        [rec] = self.migrations_of(source["id"])
        self.assertMigrated(rec, source)
        tid = self.a.bus.engine.get_migration(
            migration.ADMIN, rec["id"])["transfer_id"]
        status = self.a.bus.agent().get_transfer({}, self.a.agent_name, tid)
        self.assertEqual("complete", status["state"], status)
        wire = status["bytes_sent_wire"]
        moved = sum(len(p) for p in data.values())
        self.addDetail("link-bytes", content.text_content(
            "%d bytes on the link for %d of data in %d" % (
                wire, moved, source["size"])))
        self.assertGreater(wire, moved)
        self.assertLessEqual(wire, 1.05 * moved + MiB, status)

    def copies_at_b(self, source):
        """Cloud B's active images with SOURCE's name and data."""
        client = self.b.glance.client(
            session=self.b.users["admin"].session())
        return [dict(i) for i in client.images.list(
            filters={"name": source["name"]})
            if i["status"] == "active" and
            i["os_hash_value"] == source["os_hash_value"]]

    def test_reuse_after_a_cancelled_attempt(self):
        """Issue 37 items 1 and 2, with the real ``openstack``: after a
        complete migration and a cancelled --force, a plain migrate
        returns the complete one (Reused, said on stderr) and cloud B
        holds one copy; --force while one runs is a 409 naming it;
        another visibility is a new migration and a second copy.
        """
        # 96 MiB at RATE: about 12 s on the link.
        source = self.upload(96 * MiB, persona="admin")
        peer = self.b.agent_name
        [done] = self.openstack_json("admin", "dtn", "migrate",
                                     source["id"], "--peer", peer, "--wait")
        self.assertEqual(("complete", False), (done["State"],
                                               done["Reused"]))
        [forced] = self.openstack_json("admin", "dtn", "migrate",
                                       source["id"], "--peer", peer,
                                       "--force")
        self.assertNotEqual(done["ID"], forced["ID"])
        running = self.wait_until(
            lambda: (lambda m: m if m["bytes"]["transfer"] else None)(
                self.rest_show(forced["ID"], "admin")),
            "bytes on the DTN link of %s" % forced["ID"], interval=0.2)
        refusal = "is being migrated to %s by migration %s (running " \
            "since" % (peer, forced["ID"])
        proc = self.openstack("admin", "dtn", "migrate", source["id"],
                              "--peer", peer, "--force", check=False)
        self.assertEqual(1, proc.returncode, proc.stderr)
        self.assertIn(refusal, proc.stderr)
        self.assertIn("force asks for another copy while it runs",
                      proc.stderr)
        self.assertIn("(HTTP 409)", proc.stderr)
        # Another mode while it runs: 409 too (over REST, to be quick).
        other_mode = {"serial": "pipelined"}.get(running["mode"], "serial")
        resp = self.http("admin", "POST", "/v1/migrations", json={
            "peer": peer, "images": [source["id"]],
            "options": {"mode": other_mode}})
        self.assertEqual(409, resp.status_code, resp.text)
        self.assertIn(refusal, resp.json()["error"]["message"])
        resp = self.http("admin", "POST", "/v1/migrations/%s/action"
                         % forced["ID"], json={"cancel": None})
        self.assertEqual(202, resp.status_code, resp.text)
        ended = self.wait_until(
            lambda: (lambda m: m if m["state"] in api.FINAL else None)(
                self.rest_show(forced["ID"], "admin")),
            "migration %s to end" % forced["ID"], interval=0.5)
        self.assertEqual("cancelled", ended["state"])

        proc = self.openstack("admin", "dtn", "migrate", source["id"],
                              "--peer", peer, "--wait", "-f", "json")
        [again] = json.loads(proc.stdout)
        self.assertEqual((done["ID"], "complete", True),
                         (again["ID"], again["State"], again["Reused"]))
        self.assertIn("reused migration %s, complete since" % done["ID"],
                      proc.stderr)
        self.assertEqual([done["Peer Image ID"]],
                         [i["id"] for i in self.copies_at_b(source)])

        # Another visibility: another copy, made by a new migration.
        other = "private" if source["visibility"] != "private" \
            else "shared"
        [new] = self.openstack_json("admin", "dtn", "migrate",
                                    source["id"], "--peer", peer,
                                    "--visibility", other, "--wait")
        self.assertNotIn(new["ID"], (done["ID"], forced["ID"]))
        self.assertEqual(("complete", False), (new["State"], new["Reused"]))
        copies = {i["id"]: i["visibility"] for i in self.copies_at_b(source)}
        self.assertEqual({done["Peer Image ID"], new["Peer Image ID"]},
                         set(copies))
        self.assertEqual(other, copies[new["Peer Image ID"]])

    def test_peers(self):
        peers = self.openstack_json("alice", "dtn", "peer", "list")
        names = [p.get("name", p.get("Name")) for p in peers]
        self.assertIn(self.b.agent_name, names)
        peer = self.openstack_json("rita", "dtn", "peer", "show",
                                   self.b.agent_name)
        self.assertEqual(self.b.agent_name, peer["name"])
        self.assertIs(True, peer["reachable"], peer)
        self.assertIsNotNone(peer["rtt_ms"])
        # Where the peer listens is an administrator's to see.
        self.assertNotIn("port", peer)
        peer = self.openstack_json("admin", "dtn", "peer", "show",
                                   self.b.agent_name)
        self.assertEqual(self.b.port, peer["port"])
        proc = self.openstack("alice", "dtn", "peer", "show", "nowhere",
                              check=False)
        self.assertNotEqual(0, proc.returncode)
        self.assertIn("404", proc.stdout + proc.stderr)

    def test_messages(self):
        """What a new operator trying the commands by hand reads (issue
        37): one "Migration X failed", a selector in words, a UUID, a
        finished migration not cancelled, blank empty cells.
        """
        proc = self.openstack("alice", "dtn", "migrate", "--tag",
                              "no-image-has-this", "--peer",
                              self.b.agent_name, check=False)
        self.assertEqual(1, proc.returncode)
        self.assertIn("no active image this project can see has tag "
                      "'no-image-has-this' (HTTP 400)", proc.stderr)
        proc = self.openstack("alice", "dtn", "migrate", "x", "--peer",
                              self.b.agent_name, "--request-id", "r",
                              check=False)
        self.assertEqual(1, proc.returncode)
        self.assertIn("--request-id must be a UUID", proc.stderr)
        source = self.upload(1 * MiB)
        self.openstack("alice", "dtn", "migrate", source["id"], "--peer",
                       self.b.agent_name, "--wait")
        [rec] = self.migrations_of(source["id"])
        proc = self.openstack("alice", "dtn", "migration", "cancel",
                              rec["id"], check=False)
        self.assertEqual(1, proc.returncode)
        self.assertIn("is already complete: cannot cancel it. (HTTP 409)",
                      proc.stderr)
        proc = self.openstack("admin", "dtn", "peer", "list")
        self.assertIn(self.b.agent_name, proc.stdout)
        self.assertNotIn("None", proc.stdout)

    # Who may do what.

    def test_reader_cannot_create(self):
        source = self.upload(1 * MiB)
        proc = self.openstack("rita", "dtn", "migrate", source["id"],
                              "--peer", self.b.agent_name, check=False)
        self.assertNotEqual(0, proc.returncode)
        self.assertRegex(proc.stdout + proc.stderr,
                         r"403|[Ff]orbidden|not allowed")
        self.assertEqual([], self.migrations_of(source["id"]))

    def test_isolation_cancel_and_retry(self):
        # 96 MiB at RATE: about 12 s on the link.
        source = self.upload(96 * MiB)
        rec = self.start_migration(source["id"])
        mid = rec["id"]
        self.wait_transferring(mid)

        # While it runs: bob (other project) cannot cancel it (not
        # found, not forbidden: existence is not leaked), over REST and
        # with the CLI; rita (reader of demo) cannot either.
        resp = self.http("bob", "POST", "/v1/migrations/%s/action" % mid,
                         json={"cancel": None})
        self.assertEqual(404, resp.status_code, resp.text)
        resp = self.http("rita", "POST", "/v1/migrations/%s/action" % mid,
                         json={"cancel": None})
        self.assertEqual(403, resp.status_code, resp.text)
        proc = self.openstack("bob", "dtn", "migration", "cancel", mid,
                              check=False)
        self.assertNotEqual(0, proc.returncode)
        self.assertRegex((proc.stdout + proc.stderr).lower(), NOT_FOUND)

        # alice cancels it.
        self.assertEqual("running", self.rest_show(mid)["state"])
        self.openstack("alice", "dtn", "migration", "cancel", mid)
        rec = self.wait_final(mid)
        self.assertEqual("cancelled", rec["state"])
        self.assertIn("cancelled", [e["event"] for e in rec["events"]])
        self.assertEqual("cancelled", self.show(mid)["state"])

        # bob neither lists nor shows it; rita cannot retry it.
        self.assertNotIn(mid, _ids(self.openstack_json(
            "bob", "dtn", "migration", "list")))
        proc = self.openstack("bob", "dtn", "migration", "show", mid,
                              check=False)
        self.assertNotEqual(0, proc.returncode)
        self.assertRegex((proc.stdout + proc.stderr).lower(), NOT_FOUND)
        proc = self.openstack("rita", "dtn", "migration", "retry", mid,
                              check=False)
        self.assertNotEqual(0, proc.returncode)
        # The admin (on its own project) sees it with --all-projects
        # only.
        self.assertIn(mid, _ids(self.openstack_json(
            "admin", "dtn", "migration", "list", "--all-projects")))
        self.assertNotIn(mid, _ids(self.openstack_json(
            "admin", "dtn", "migration", "list")))

        # Retried, it completes.
        self.openstack("alice", "dtn", "migration", "retry", mid)
        self.openstack("alice", "dtn", "migration", "wait", mid)
        rec = self.rest_show(mid)
        self.assertMigrated(rec, source)
        self.assertGreater(rec["attempt"], 1)
        self.assertIn("retried", [e["event"] for e in rec["events"]])
        # Retrying a complete migration is a conflict (409), not a 500.
        resp = self.http("alice", "POST", "/v1/migrations/%s/action" % mid,
                         json={"retry": None})
        self.assertEqual(409, resp.status_code, resp.text)

    # Bad input.

    def hostile_requests(self, image_id, mid):
        big = "x" * (2 * MiB)
        yield "GET", "/v1/migrations/%s" % ("f" * 32), {}, 404
        yield "GET", "/v1/migrations/not-a-uuid", {}, None
        yield "GET", "/v1/migrations/%s" % ("\u00e9" * 40), {}, None
        yield "GET", "/v1/migrations/..%2F..%2Fetc%2Fpasswd", {}, None
        yield "GET", "/v1/peers/%s" % ("p" * 300), {}, None
        yield "GET", "/v1/peers/nowhere", {}, 404
        yield "GET", "/v2/", {}, None
        for query in ({"limit": "0"}, {"limit": "-1"}, {"limit": "abc"},
                      {"limit": "1001"}, {"limit": "1e9"},
                      {"marker": "f" * 32}, {"marker": "'; DROP TABLE"},
                      {"sort_key": "password"}, {"sort_key": "id;"},
                      {"sort_dir": "sideways"},
                      {"changes-since": "yesterday"},
                      {"changes-since": "2026-13-45T99:00:00"},
                      {"state": "exploded"}, {"direction": "sideways"},
                      {"all_projects": "true"},
                      {"image_id": "\U0001F600"},
                      {"request_id": "\U00010348" * 8},
                      {"all_projects": "maybe"}):
            yield "GET", "/v1/migrations", {"params": query}, None
        bodies = [
            {"data": "{not json"},
            {"data": "null"},
            {"data": "[]"},
            {"data": "\"peer\""},
            {"json": {}},
            {"json": {"images": [image_id]}},
            {"json": {"peer": self.b.agent_name}},
            {"json": {"peer": 7, "images": [image_id]}},
            {"json": {"peer": "", "images": [image_id]}},
            {"json": {"peer": "x" * 10000, "images": [image_id]}},
            {"json": {"peer": self.b.agent_name, "images": []}},
            {"json": {"peer": self.b.agent_name, "images": "abc"}},
            {"json": {"peer": self.b.agent_name, "images": ["nope"]}},
            {"json": {"peer": self.b.agent_name,
                      "images": [image_id] * 1001}},
            {"json": {"peer": self.b.agent_name, "images": [image_id],
                      "surprise": 1}},
            {"json": {"peer": self.b.agent_name, "images": [image_id],
                      "options": {"visibility": "everyone"}}},
            {"json": {"peer": self.b.agent_name, "images": [image_id],
                      "options": {"keep_id": "yes"}}},
            {"json": {"peer": self.b.agent_name, "images": [image_id],
                      "options": {"mode": "teleport"}}},
            {"json": {"peer": self.b.agent_name, "images": [image_id],
                      "options": {"rate": 1}}},
            {"json": {"peer": self.b.agent_name, "images": [image_id],
                      "request_id": "not-a-uuid"}},
            {"json": {"peer": self.b.agent_name, "properties": "k=v"}},
            {"json": {"peer": self.b.agent_name, "tag": ["a"]}},
            {"json": {"peer": self.b.agent_name, "images": [image_id],
                      "tag": "t"}},
            {"json": {"peer": "nowhere", "images": [image_id]}},
            {"json": {"peer": self.b.agent_name, "images": ["f" * 32]}},
            {"json": {"peer": self.b.agent_name, "images": [big]}},
            {"data": "[" * 5000 + "]" * 5000},
            {"data": "{\"peer\": \"\\ud800\", \"images\": []}"},
            {"data": b"\xff\xfe\x00garbage"},
            {"data": json.dumps({"peer": "p", "images": [image_id]}),
             "headers": {"Content-Type": "text/plain"}},
        ]
        for kw in bodies:
            yield "POST", "/v1/migrations", kw, None
        for body in ({}, {"cancel": None, "retry": None}, {"explode": None},
                     {"cancel": {"now": True}}, {"retry": 1}, []):
            yield "POST", "/v1/migrations/%s/action" % mid, {
                "json": body}, None
        yield "POST", "/v1/migrations/%s/action" % ("f" * 32), {
            "json": {"cancel": None}}, 404
        yield "DELETE", "/v1/migrations", {}, None
        yield "PUT", "/v1/migrations/%s" % mid, {"json": {}}, None
        yield "PATCH", "/v1/peers", {"json": {}}, None

    def test_bad_requests_are_4xx(self):
        source = self.upload(1 * MiB)
        [rec] = self.migrations_of(source["id"]) or [
            self.start_migration(source["id"])]
        token = self.token("alice")
        seen = []
        for method, path, kw, want in self.hostile_requests(source["id"],
                                                            rec["id"]):
            kw.setdefault("headers", {})["X-Auth-Token"] = token
            resp = self.http(None, method, path, **kw)
            seen.append((method, path, str(kw)[:80], resp.status_code))
            self.assertTrue(400 <= resp.status_code < 500, seen[-1])
            if want is not None:
                self.assertEqual(want, resp.status_code, seen[-1])
            if resp.status_code not in (405,):
                error = resp.json()["error"]
                self.assertEqual(resp.status_code, error["code"], seen[-1])
                self.assertTrue(error["message"], seen[-1])
        # Without a token: 401, with a wrong one too.
        for headers in ({}, {"X-Auth-Token": "forged"}):
            resp = self.http(None, "GET", "/v1/migrations", headers=headers)
            self.assertEqual(401, resp.status_code)
        # None of them made a migration of another image.
        self.assertEqual(0, len(self.migrations_of("f" * 32)))
        # A well-formed filter in 4-byte UTF-8 (outside MySQL's utf8mb3,
        # in which oslo.db connected: a 503) matches nothing.
        resp = self.http(None, "GET", "/v1/migrations",
                         params={"peer": "\U0001F600"},
                         headers={"X-Auth-Token": token})
        self.assertEqual(200, resp.status_code, resp.text)
        self.assertEqual([], resp.json()["migrations"])

    def test_schemathesis(self):
        import hypothesis
        import schemathesis
        from schemathesis import checks

        with open(OPENAPI) as f:
            yaml.safe_load(f)       # a readable document
        schema = schemathesis.openapi.from_path(OPENAPI)
        headers = {"X-Auth-Token": self.token("alice")}
        failures = []
        operations = 0
        calls = []
        for result in schema.get_all_operations():
            operation = result.ok()
            operations += 1

            @hypothesis.settings(
                max_examples=MAX_EXAMPLES, deadline=None, database=None,
                derandomize=True,
                suppress_health_check=list(hypothesis.HealthCheck),
                phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])
            @hypothesis.given(case=operation.as_strategy())
            def run(case):
                calls.append((case.method, case.path))
                case.call_and_validate(
                    base_url=self.a.api.endpoint, headers=headers,
                    checks=[checks.not_a_server_error,
                            checks.response_schema_conformance])

            try:
                run()
            except Exception as exc:  # noqa: B902 - collected, then failed
                failures.append("%s %s: %s" % (
                    operation.method.upper(), operation.path, exc))
        self.addDetail("schemathesis", content.text_content(
            "%d operations, %d calls" % (operations, len(calls))))
        self.assertGreaterEqual(operations, 7)
        # Every operation was exercised with several examples.
        self.assertGreaterEqual(len(calls), 5 * operations)
        self.assertEqual([], failures)

    # Restarts.

    def test_api_restart_during_migration(self):
        source = self.upload(48 * MiB)
        proc = self.openstack("alice", "dtn", "migrate", source["id"],
                              "--peer", self.b.agent_name, "-f", "json")
        self.assertIn(source["id"], proc.stdout)
        [rec] = self.migrations_of(source["id"])
        self.wait_transferring(rec["id"])
        # Twice: the second kill comes right after the first restart.
        for _round in range(2):
            self.a.api.stop(kill=True)
            self.a.api.start()
        self.openstack("alice", "dtn", "migration", "wait", rec["id"])
        shown = self.show(rec["id"])
        self.assertEqual("complete", shown["state"])
        self.assertMigrated(self.rest_show(rec["id"]), source)

    def test_mariadb_restart_during_migration(self):
        source = self.upload(48 * MiB)
        rec = self.start_migration(source["id"])
        self.wait_transferring(rec["id"])
        # Whatever happens, the server is up for the next test.
        self.addCleanup(lambda: self.mariadb.proc is not None or
                        self.mariadb.start())
        # Twice: the second restart comes while the engine and the API
        # recover from the first.
        for _round in range(2):
            self.mariadb.restart(down=2)
        rec = self.wait_final(rec["id"])
        self.assertMigrated(rec, source)
        self.assertEqual(1, rec["attempt"])
        shown = self.show(rec["id"])
        self.assertEqual("complete", shown["state"])
        self.assertTrue(re.match(r"\d{4}-\d\d-\d\dT", rec["finished_at"]))
