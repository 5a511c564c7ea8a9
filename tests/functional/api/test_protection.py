"""Protection policies between two real clouds, driven as an operator
does: ``openstack dtn policy ...`` and the REST API.

Cloud A's Glance publishes its notifications on A's bus; A's engine
follows them (continuous policies), scans at start-up and when a failed
replication is due again, and grades each policy's recovery point every
second.  A's agent reaches B's through a relay that can cut the DTN
link.  The periodic scan is an hour apart: what replicates within a
test came from a notification, a start-up scan or a retry.

Cloud A accepts the metadata of B's failbacks (``[peer:<B>]
accept_metadata_updates``) while its administrator has one open, and
B's agent knows a third peer, ``evil``, with a key of its own: the
hostile peer of the tests that check what a peer may make a cloud do
(``rawpeer`` and ``transfer.request`` clients, real sockets).
"""

import configparser
import hashlib
import json
import os
import signal
import sys
import time
import uuid

from glanceclient import exc as glance_exc

import devcloud
from dtn_migrate.transfer import config as transfer_config
from dtn_migrate.transfer import request as request_mod
from dtn_migrate.transfer.source import transfer as transfer_source
from dtn_migrate.transfer.wire import protocol as P
from tests.functional.api import harness as api
from tests.functional import base
from tests.functional.api import runbook
from tests.functional.transfer import rawpeer

MiB = 1 << 20
RUNBOOKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), "doc", "source",
    "admin", "runbooks")
#: The notification pool of A's engine ([protection] listener_pool).
LISTENER_POOL = "dtn-migrate-engine"
#: Engine options of both clouds.
PROTECTION = {"protection": {"scan_interval": 3600, "rpo_interval": 1,
                             "retry_interval": 5,
                             "at_risk_fraction": 0.5},
              "engine": {"stall_timeout": 300}}


def reconfigure(cloud, server, sections):
    """Stop SERVER (an engine or agent process of CLOUD), set SECTIONS
    ({section: {key: value}}) in its configuration file, start it again
    and wait until it answers.
    """
    server.kill9()
    parser = configparser.RawConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(server.conf)
    for section, values in sections.items():
        if section != "DEFAULT" and not parser.has_section(section):
            parser.add_section(section)
        for key, value in values.items():
            parser.set(section, key, value)
    with open(server.conf, "w") as f:
        parser.write(f)
    server.start()
    cloud.wait_ready()


class ProtectionTestCase(api.ApiPairTestCase):
    """Protection policies as an operator drives them: helpers."""

    def tag(self):
        return "prot-%s" % uuid.uuid4().hex[:6]

    def create_policy(self, name, tag, *extra, persona="alice"):
        return self.openstack_json(
            persona, "dtn", "policy", "create", name, "--peer",
            self.b.agent_name, "--tag", tag, *extra)

    def create_kept_id_policy(self, name, tag):
        """Alice's policy whose replicas keep their ids: kept ids are an
        administrator's to ask for (dtn:policy:create:keep_id).
        """
        policy = self.create_policy(name, tag)
        return self.openstack_json("admin", "dtn", "policy", "set",
                                   policy["id"], "--keep-id")

    def policy(self, name_or_id, persona="alice"):
        return self.openstack_json(persona, "dtn", "policy", "show",
                                   name_or_id)

    def rest_policy(self, policy_id, persona="alice", cloud=None):
        resp = self.http(persona, "GET", "/v1/policies/%s" % policy_id,
                         cloud=cloud)
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()["policy"]

    def policy_images(self, policy_id, persona="alice"):
        resp = self.http(persona, "GET",
                         "/v1/policies/%s/images" % policy_id)
        self.assertEqual(200, resp.status_code, resp.text)
        return {i["image_id"]: i for i in resp.json()["images"]}

    def wait_replicated(self, policy_id, image_ids, timeout=240):
        def done():
            images = self.policy_images(policy_id)
            states = {i: (images.get(i) or {}).get("state")
                      for i in image_ids}
            return images if all(s == "replicated"
                                 for s in states.values()) else None
        return self.wait_until(done, "images %s replicated" % image_ids,
                               timeout=timeout, interval=0.2)

    def replica_or_none(self, image_id, cloud=None, direction="outgoing"):
        resp = self.http("admin", "GET", "/v1/replicas", cloud=cloud,
                         params={"source_image_id": image_id,
                                 "direction": direction,
                                 "all_projects": "true"})
        self.assertEqual(200, resp.status_code, resp.text)
        found = resp.json()["replicas"]
        self.assertLessEqual(len(found), 1, found)
        return found[0] if found else None

    def replica(self, image_id, cloud=None, direction="outgoing"):
        found = self.replica_or_none(image_id, cloud, direction)
        self.assertIsNotNone(
            found, "no %s replica of %s" % (direction, image_id))
        return found

    def engine_log(self, cloud=None):
        with open((cloud or self.a).engine.log, errors="replace") as f:
            return f.read()

    def assertReplicaIntact(self, source):
        """B holds ``source``'s data verified, and both catalogs say so."""
        out = self.replica(source["id"])
        self.assertEqual("current", out["state"])
        self.assertEqual(source["os_hash_value"], out["hash_value"])
        copy = self.peer_image(out["replica_image_id"])
        self.assertEqual("active", copy["status"])
        self.assertEqual(source["os_hash_value"], copy["os_hash_value"])
        # B catalogs it once its import's flow ends, which may be just
        # after A heard its report.
        back = self.wait_until(lambda: self.replica_or_none(
            source["id"], cloud=self.b, direction="incoming"),
            "B's catalog of %s" % source["id"], timeout=30, interval=0.2)
        self.assertEqual(out["replica_image_id"], back["replica_image_id"])
        self.assertEqual(source["os_hash_value"], back["hash_value"])
        self.assertEqual(self.a.agent_name, back["peer"])


class TestProtection(ProtectionTestCase):

    @classmethod
    def _start_clouds(cls, scope):
        cls.a, cls.b = api.start_pair(scope, notifications=True, relay=True,
                                      extra=PROTECTION)
        cls.a.bus.listen()
        # A applies what B's failback sends back, while A has it open.
        reconfigure(cls.a, cls.a.engine, {"peer:%s" % cls.b.agent_name: {
            "accept_metadata_updates": "true"}})
        # A third peer of B, with a key of its own, that B's import
        # rules take as any peer (the hostile peer of the tests).
        cls.evil = "dtn-evil-%s" % uuid.uuid4().hex[:4]
        cls.evil_key = os.urandom(32).hex()
        parser = configparser.RawConfigParser(interpolation=None)
        parser.read(cls.b.agent.conf)
        reconfigure(cls.b, cls.b.agent, {
            "agent": {"peers": "%s,%s" % (parser.get("agent", "peers"),
                                          cls.evil)},
            "peer:%s" % cls.evil: {"address": "127.0.0.1",
                                   "port": str(base.free_port()),
                                   "key": cls.evil_key}})

    # Continuous sync.

    def test_continuous_sync_once_per_change(self):
        tag = self.tag()
        policy = self.create_policy("gold-%s" % tag, tag, "--rpo", "30")
        self.assertEqual("continuous", policy["mode"])
        start = time.monotonic()
        source = self.upload(2 * MiB + 17, tags=[tag])
        uploaded = time.monotonic()
        self.wait_replicated(policy["id"], [source["id"]])
        delay = time.monotonic() - uploaded
        sys.stderr.write("%s: image.activate to verified replica on B: "
                         "%.1f s (upload %.1f s)\n" % (
                             self.id(), delay, uploaded - start))
        self.assertReplicaIntact(source)
        [migration] = self.migrations_of(source["id"])
        self.assertEqual("complete", migration["state"])
        # Nothing asked for it: the notification did.
        self.assertIn("image.activate of image %s" % source["id"],
                      self.engine_log())

        # The same tag again, a property change: events, no transfer.
        client = self.a.glance.client(
            session=self.a.users["alice"].session())
        client.image_tags.update(source["id"], tag)
        client.images.update(source["id"], x_note="changed metadata")
        self.wait_until(lambda: self.engine_log().count(
            "image.update of image %s" % source["id"]) >= 2,
            "the engine to see both updates", timeout=60)
        time.sleep(2)
        self.assertEqual(1, len(self.migrations_of(source["id"])))
        shown = self.policy(policy["id"])
        self.assertEqual("ok", shown["rpo_state"])
        self.assertEqual(1, shown["images_replicated"])

        # B protecting its replicas back to A sends nothing: A holds
        # those bytes (the catalog's incoming row says so).
        back = self.replica(source["id"], cloud=self.b,
                            direction="incoming")
        reverse = self.openstack_json(
            "admin", "dtn", "policy", "create", "back-%s" % tag, "--peer",
            self.a.agent_name, "--tag", tag, "--project",
            back["project_id"], "--mode", "manual", cloud=self.b)
        self.assertEqual([], self.openstack_json(
            "admin", "dtn", "policy", "sync", reverse["id"], cloud=self.b))
        resp = self.http("admin", "GET", "/v1/policies/%s/images"
                         % reverse["id"], cloud=self.b)
        self.assertEqual(["replicated"], [
            i["state"] for i in resp.json()["images"]])
        resp = self.http("admin", "GET", "/v1/migrations", cloud=self.b,
                         params={"direction": "outgoing",
                                 "all_projects": "true"})
        self.assertEqual([], resp.json()["migrations"])

        # An image that leaves the policy no longer counts; its replica
        # stays (deletion keep).
        client.image_tags.delete(source["id"], tag)
        self.wait_until(lambda: self.policy_images(policy["id"])[
            source["id"]]["state"] == "removed", "the image to leave")
        self.assertEqual("current", self.replica(source["id"])["state"])

    def test_catch_up_after_engine_outage(self):
        tag = self.tag()
        policy = self.create_policy("outage-%s" % tag, tag)
        self.a.engine.kill9()
        try:
            sources = [self.upload(MiB + i, tags=[tag]) for i in range(2)]
            # Lost with the engine (as a broker restart loses them):
            # Glance's notifications waiting in the engine's queue.
            time.sleep(1)
            self.a.broker._ctl("purge_queue", "-p", self.a.broker.vhost,
                               LISTENER_POOL)
        finally:
            self.a.engine.start()
            self.a.wait_ready()
        self.wait_replicated(policy["id"], [s["id"] for s in sources])
        log = self.engine_log()
        for source in sources:
            self.assertReplicaIntact(source)
            self.assertEqual(1, len(self.migrations_of(source["id"])))
            # The start-up scan found it, not a notification.
            self.assertNotIn("image.activate of image %s" % source["id"],
                             log)

    def listener_consumers(self):
        """Consumers of A's engine's notification pool queue."""
        out = base.rabbitmqctl("list_queues", "-p", self.a.broker.vhost,
                               "name", "consumers")
        return sum(int(line.split()[-1]) for line in out.splitlines()
                   if line.split() and line.split()[0] == LISTENER_POOL)

    def test_listener_follows_glance_after_broker_restart(self):
        tag = self.tag()
        policy = self.create_policy("bus-%s" % tag, tag)
        self.assertGreaterEqual(self.listener_consumers(), 1)
        base.restart_broker(self, outage=3.0)
        # The listener declares its queue again and consumes from it (a
        # notification published before that would have no queue).
        self.wait_until(lambda: self.listener_consumers() >= 1,
                        "the engine's listener back on the bus",
                        timeout=120, interval=1)
        source = self.upload(MiB + 9, tags=[tag])
        self.wait_replicated(policy["id"], [source["id"]], timeout=240)
        # The notification did it: the periodic scan is an hour apart.
        self.assertIn("image.activate of image %s" % source["id"],
                      self.engine_log())
        self.assertReplicaIntact(source)

    def test_rpo_breach_and_recovery_on_link_cut(self):
        tag = self.tag()
        policy = self.create_policy("rpo-%s" % tag, tag, "--rpo", "1")
        self.a.relay.cut(down_for=85)
        cut = time.monotonic()
        source = self.upload(MiB, tags=[tag])
        seen = []

        def state():
            value = self.rest_policy(policy["id"])["rpo"]["state"]
            if not seen or seen[-1] != value:
                seen.append(value)
            return value

        self.wait_until(lambda: state() == "at-risk", "at-risk",
                        timeout=60, interval=0.5)
        self.wait_until(lambda: state() == "breached", "breached",
                        timeout=90, interval=0.5)
        self.assertGreaterEqual(time.monotonic() - cut, 55)
        self.wait_until(lambda: "dtn_migrate.policy.rpo_breached" in [
            e for e, p in self.a.bus.notifications
            if p.get("policy_id") == policy["id"]],
            "the rpo_breached notification", timeout=30)
        # The link comes back by itself: so does the recovery point.
        self.wait_replicated(policy["id"], [source["id"]], timeout=300)
        self.wait_until(lambda: state() == "ok", "ok", timeout=60,
                        interval=0.5)
        sys.stderr.write("%s: RPO states %s over %.0f s\n"
                         % (self.id(), seen, time.monotonic() - cut))
        self.assertEqual("ok", seen[-1])
        self.assertLess(seen.index("at-risk"), seen.index("breached"))
        events = [e for e, p in self.a.bus.notifications
                  if p.get("policy_id") == policy["id"]]
        self.assertIn("dtn_migrate.policy.rpo_recovered", events)
        self.assertReplicaIntact(source)

    def upload_file(self, path, persona="alice", **fields):
        client = self.a.glance.client(
            session=self.a.users[persona].session())
        fields.setdefault("container_format", "bare")
        fields.setdefault("name", "api-%s" % uuid.uuid4().hex[:6])
        image = client.images.create(**fields)
        with open(path, "rb") as f:
            client.images.upload(image["id"], f)
        return dict(devcloud.wait_image(client, image["id"]))

    # Drills.

    def drill(self, policy_id, *extra):
        """``openstack dtn drill start --wait`` on B as admin: the
        finished drill (its exit status is 1 unless it passed).
        """
        proc = self.openstack("admin", "dtn", "drill", "start", policy_id,
                              "--wait", "-f", "json", *extra,
                              cloud=self.b, check=False)
        drill = json.loads(proc.stdout)
        self.assertEqual(0 if drill["state"] == "passed" else 1,
                         proc.returncode, proc.stderr)
        resp = self.http("admin", "GET", "/v1/drills/%s" % drill["id"],
                         cloud=self.b)
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()["drill"]

    def test_drill_intact_then_corrupted_replica(self):
        tag = self.tag()
        policy = self.create_policy("drill-%s" % tag, tag)
        raw = self.upload(MiB + 11, tags=[tag])
        path = devcloud.make_qcow2(os.path.join(self.workdir, "d.qcow2"),
                                   2 * MiB, virtual_size=64 * MiB)
        qcow2 = self.upload_file(path, tags=[tag], disk_format="qcow2")
        self.wait_replicated(policy["id"], [raw["id"], qcow2["id"]])
        # B learnt the policy from the migrations that served it.
        learnt = self.rest_policy(policy["id"], persona="admin",
                                  cloud=self.b)
        self.assertEqual("replica", learnt["role"])
        self.assertEqual(policy["name"], learnt["name"])
        self.assertEqual(self.a.agent_name, learnt["peer"])

        drill = self.drill(policy["id"], "--clone")
        self.assertEqual(("passed", 2, 2, 0), (
            drill["state"], drill["images_total"], drill["images_intact"],
            drill["images_bad"]))
        self.assertGreater(drill["rto_seconds"], 0)
        checks = {i["source_image_id"]: i for i in drill["report"]["images"]}
        self.assertEqual({"present": True, "size": True, "hash": True,
                          "qemu_img": True, "clone": True},
                         checks[qcow2["id"]]["checks"])
        self.assertIsNone(checks[raw["id"]]["checks"]["qemu_img"])
        sys.stderr.write("%s: drill of 2 replicas with clones: RTO %.1f s\n"
                         % (self.id(), drill["rto_seconds"]))
        # The clones are gone again.
        admin_b = self.b.glance.client(
            session=self.b.users["admin"].session())
        self.assertEqual([], [
            i["id"] for i in admin_b.images.list(
                filters={"os_hidden": True})
            if i["name"].startswith("drill-")])

        # A byte of B's stored replica changes: the next drill says so.
        replica = self.replica(raw["id"])
        stored = os.path.join(self.b.glance.images_dir,
                              replica["replica_image_id"])
        with open(stored, "r+b") as f:
            f.seek(1000)
            byte = f.read(1)
            f.seek(1000)
            f.write(bytes([byte[0] ^ 0xFF]))
        drill = self.drill(policy["id"])
        self.assertEqual(("failed", 1, 1), (
            drill["state"], drill["images_intact"], drill["images_bad"]))
        checks = {i["source_image_id"]: i for i in drill["report"]["images"]}
        self.assertEqual("corrupt", checks[raw["id"]]["status"])
        self.assertIn("sha512", checks[raw["id"]]["error"])
        self.assertEqual("intact", checks[qcow2["id"]]["status"])
        # The source was not touched.
        self.assertEqual(raw["os_hash_value"], self.a.glance.client(
            session=self.a.users["alice"].session()).images.get(
                raw["id"])["os_hash_value"])

    # Failover and failback.

    def made_at_b(self, policy, tag, size):
        """A new image on B, in the project of ``policy``'s replicas."""
        admin_b = self.b.glance.client(
            session=self.b.users["admin"].session())
        project = self.rest_policy(policy["id"], persona="admin",
                                   cloud=self.b)["project_id"]
        new = admin_b.images.create(
            name="made-at-b-%s" % tag, disk_format="raw",
            container_format="bare", tags=[tag], owner=project)
        path = os.path.join(self.workdir, "new-%s.raw" % tag)
        base.make_file(path, size, seed=7)
        with open(path, "rb") as f:
            admin_b.images.upload(new["id"], f)
        return dict(devcloud.wait_image(admin_b, new["id"]))

    def outgoing_of_b(self):
        resp = self.http("admin", "GET", "/v1/migrations", cloud=self.b,
                         params={"direction": "outgoing",
                                 "all_projects": "true"})
        self.assertEqual(200, resp.status_code, resp.text)
        return [m for m in resp.json()["migrations"]
                if m["peer"] == self.a.agent_name]

    def fail_back_only(self, policy, new, before):
        """``failback --wait`` on B completes, having sent back only
        ``new`` (one complete migration besides those in ``before``),
        which A holds active with its hash; the failback's answer.
        """
        back = self.openstack_json("admin", "dtn", "failback", policy["id"],
                                   "--wait", "--timeout", "300",
                                   cloud=self.b, timeout=400)
        self.assertTrue(back["complete"], back)
        sent = [m for m in self.outgoing_of_b() if m["id"] not in before]
        self.assertEqual([new["id"]], [m["image_id"] for m in sent])
        self.assertEqual("complete", sent[0]["state"])
        admin_a = self.a.glance.client(
            session=self.a.users["admin"].session())
        at_a = dict(admin_a.images.get(new["id"]))
        self.assertEqual(("active", new["os_hash_value"]),
                         (at_a["status"], at_a["os_hash_value"]))
        return back

    def open_failback_at_a(self, policy):
        """``openstack dtn failback`` on A, where ``policy`` is primary:
        A's administrator opens A to B's failback of it.
        """
        opened = self.openstack_json("admin", "dtn", "failback",
                                     policy["id"])
        self.assertEqual(("primary", True, 0), (
            opened["role"], opened["complete"], opened["migrations"]))
        return opened

    def test_failback_resumes_after_kill9_of_the_dr_engine(self):
        tag = self.tag()
        policy = self.create_kept_id_policy("k9-%s" % tag, tag)
        kept = self.upload(MiB + 11, tags=[tag])
        self.wait_replicated(policy["id"], [kept["id"]])
        self.openstack_json("admin", "dtn", "failover", policy["id"],
                            cloud=self.b)
        self.open_failback_at_a(policy)
        new = self.made_at_b(policy, tag, 48 * MiB + 3)
        before = {m["id"] for m in self.outgoing_of_b()}
        first = self.openstack_json("admin", "dtn", "failback",
                                    policy["id"], cloud=self.b)
        self.assertFalse(first["complete"])
        # B's engine dies while its migration back to A runs.
        states = [m["state"] for m in self.outgoing_of_b()
                  if m["id"] not in before]
        self.b.engine.kill9()
        sys.stderr.write("%s: B's migrations back to A at the kill: %s\n"
                         % (self.id(), states))
        self.b.engine.start()
        self.b.wait_ready()
        # One migration, resumed: not asked again after the restart.
        self.fail_back_only(policy, new, before)
        self.assertEqual(1, len(self.migrations_of(kept["id"])))

    def test_failover_and_failback_round_trip(self):
        tag = self.tag()
        policy = self.create_kept_id_policy("dr-%s" % tag, tag)
        kept = self.upload(MiB + 1, tags=[tag])
        self.wait_replicated(policy["id"], [kept["id"]])
        replica = self.replica(kept["id"])

        # Cloud B takes over: its replica becomes a first-class image.
        over = self.openstack_json("admin", "dtn", "failover", policy["id"],
                                   cloud=self.b)
        self.assertEqual(("failed-over", 1), (over["role"], over["promoted"]))
        again = self.openstack_json("admin", "dtn", "failover",
                                    policy["id"], cloud=self.b)
        self.assertEqual(over["reverse_policy_id"],
                         again["reverse_policy_id"])
        admin_b = self.b.glance.client(
            session=self.b.users["admin"].session())
        promoted = dict(admin_b.images.get(replica["replica_image_id"]))
        self.assertNotIn("dtn_migrate_transfer_id", promoted)
        # At B, the promoted replica's metadata changes, not its bytes.
        admin_b.images.update(promoted["id"], x_note="changed at b",
                              min_ram=256)
        admin_b.image_tags.update(promoted["id"], "tier1")

        # Work goes on at B: a new image in the replicas' project.
        new = self.made_at_b(policy, tag, MiB + 2)
        before = {m["id"] for m in self.outgoing_of_b()}

        # Until A's administrator opens A to it, B's failback does not
        # complete: A takes no metadata from B outside a failback.
        first = self.openstack_json("admin", "dtn", "failback",
                                    policy["id"], cloud=self.b)
        self.assertFalse(first["complete"])
        self.assertIn("has no failback of it open", self.rest_policy(
            policy["id"], persona="admin", cloud=self.b)["last_error"])
        self.assertNotIn("x_note", dict(self.a.glance.client(
            session=self.a.users["admin"].session()).images.get(
                kept["id"])))
        self.open_failback_at_a(policy)

        # Failback sends only that one back, and completes; A holds it,
        # verified, with its id (keep id).
        back = self.fail_back_only(policy, new, before)
        self.assertEqual("replica", back["role"])
        admin_a = self.a.glance.client(
            session=self.a.users["admin"].session())
        # The changed replica's metadata came back, its bytes did not.
        source = dict(admin_a.images.get(kept["id"]))
        self.assertEqual(("changed at b", 256),
                         (source.get("x_note"), source["min_ram"]))
        self.assertEqual(sorted([tag, "tier1"]), sorted(source["tags"]))
        self.assertEqual(kept["os_hash_value"], source["os_hash_value"])
        self.assertEqual(1, len(self.migrations_of(kept["id"])))
        # Done: again, nothing moves.
        done = self.openstack_json("admin", "dtn", "failback", policy["id"],
                                   cloud=self.b)
        self.assertEqual((True, 0), (done["complete"], done["migrations"]))

    # Deletion handling.

    def catalog_state(self, image_id, cloud=None, direction="outgoing"):
        return self.replica(image_id, cloud=cloud,
                            direction=direction)["state"]

    def test_deletion_mirror_after_grace_keep_never(self):
        tag = self.tag()
        mirror = self.create_policy("mirror-%s" % tag, tag, "--deletion",
                                    "mirror", "--deletion-grace", "60")
        keep = self.create_policy("keep-%s" % tag, tag + "k")
        gone = self.upload(MiB + 3, tags=[tag])
        kept = self.upload(MiB + 5, tags=[tag + "k"])
        self.wait_replicated(mirror["id"], [gone["id"]])
        self.wait_replicated(keep["id"], [kept["id"]])
        gone_copy = self.replica(gone["id"])["replica_image_id"]
        kept_copy = self.replica(kept["id"])["replica_image_id"]
        client = self.a.glance.client(
            session=self.a.users["alice"].session())
        client.images.delete(gone["id"])
        client.images.delete(kept["id"])

        def state(policy, image):
            return self.policy_images(policy["id"])[image["id"]]["state"]

        # Glance's image.delete: the mirror waits out its grace period,
        # the keep policy is done with it.
        self.wait_until(lambda: state(mirror, gone) == "deleting",
                        "the mirror deletion to wait", timeout=60)
        self.wait_until(lambda: state(keep, kept) == "removed",
                        "the kept image removed", timeout=60)
        time.sleep(3)               # three runs of the deletions
        self.assertEqual("deleting", state(mirror, gone))
        self.assertEqual("active", self.peer_image(gone_copy)["status"])

        # Grace over, DTN link cut: asked again until it answers.
        self.a.relay.cut(down_for=6)
        self.openstack("alice", "dtn", "policy", "set", mirror["id"],
                       "--deletion-grace", "0")
        self.wait_until(
            lambda: "deleting its replica" in (self.policy_images(
                mirror["id"])[gone["id"]]["error"] or ""),
            "the cut link to show", timeout=30, interval=0.3)
        self.assertEqual("active", self.peer_image(gone_copy)["status"])
        self.wait_until(lambda: state(mirror, gone) == "removed",
                        "the replica deleted", timeout=90)
        self.assertIn("replica deleted", self.policy_images(
            mirror["id"])[gone["id"]]["error"])
        self.assertRaises(glance_exc.HTTPNotFound, self.peer_image,
                          gone_copy)
        self.assertEqual("deleted", self.catalog_state(gone["id"]))
        self.assertEqual("deleted", self.catalog_state(
            gone["id"], cloud=self.b, direction="incoming"))
        # B's engine decided, on what A's agent sent over the DTN link.
        self.assertIn("image %s, the replica of %s's image %s, deleted"
                      % (gone_copy, self.a.agent_name, gone["id"]),
                      self.engine_log(self.b))

        # keep: never, whatever the time.
        self.openstack("alice", "dtn", "policy", "set", keep["id"],
                       "--deletion-grace", "0")
        time.sleep(3)
        self.assertEqual("removed", state(keep, kept))
        self.assertEqual("active", self.peer_image(kept_copy)["status"])
        self.assertEqual("current", self.catalog_state(kept["id"]))

    # Tenants and hostile peers.

    def replicas_of(self, image_id, cloud=None, persona="admin", **params):
        """The catalog rows of ``image_id`` (as a source), by owner: {its
        policy id, or None: row}.
        """
        params.update(source_image_id=image_id)
        if persona == "admin":
            params["all_projects"] = "true"
        resp = self.http(persona, "GET", "/v1/replicas", cloud=cloud,
                         params=params)
        self.assertEqual(200, resp.status_code, resp.text)
        found = resp.json()["replicas"]
        out = {r["policy_id"]: r for r in found}
        self.assertEqual(len(found), len(out), found)
        return out

    def test_another_projects_migration_leaves_a_protected_image_alone(
            self):
        # alice's policy protects an image of demo's that other's members
        # may read (shared with other); bob migrates it himself.
        tag = self.tag()
        policy = self.create_policy("tenant-%s" % tag, tag)
        source = self.upload(MiB + 13, tags=[tag], visibility="shared")
        self.wait_replicated(policy["id"], [source["id"]])
        other = self.a.users["bob"]["project_id"]
        for persona, call, args in (
                ("alice", "create", (source["id"], other)),
                ("bob", "update", (source["id"], other, "accepted"))):
            members = self.a.glance.client(
                session=self.a.users[persona].session()).image_members
            getattr(members, call)(*args)
        mine_a = self.replicas_of(source["id"], direction="outgoing")
        mine_b = self.wait_until(lambda: self.replicas_of(
            source["id"], cloud=self.b, direction="incoming"),
            "B's catalog of %s" % source["id"], timeout=30, interval=0.2)
        proc = self.openstack("bob", "dtn", "migrate", source["id"],
                              "--peer", self.b.agent_name, "--wait")
        self.assertIn("complete", (proc.stdout + proc.stderr).lower())
        [bobs] = self.migrations_of(source["id"], persona="bob")
        self.assertEqual(("complete", other),
                         (bobs["state"], bobs["project_id"]))
        self.assertNotEqual(bobs["peer_image_id"],
                            mine_a[policy["id"]]["replica_image_id"])

        # A: the policy's row is as it was; bob's is his own.
        rows = self.replicas_of(source["id"], direction="outgoing")
        self.assertEqual(mine_a[policy["id"]], rows[policy["id"]])
        self.assertEqual((other, bobs["peer_image_id"]), (
            rows[None]["project_id"], rows[None]["replica_image_id"]))
        self.assertEqual([policy["id"]], list(self.replicas_of(
            source["id"], persona="alice", direction="outgoing")))
        self.assertEqual([None], list(self.replicas_of(
            source["id"], persona="bob", direction="outgoing")))
        # The policy still holds its replica: a sync sends nothing.
        self.assertEqual([], self.openstack_json(
            "alice", "dtn", "policy", "sync", policy["id"]))
        self.assertEqual("replicated", self.policy_images(policy["id"])[
            source["id"]]["state"])

        # B: bob's copy lands next to the policy's replica.
        rows_b = self.wait_until(lambda: (lambda r: r if len(r) == 2
                                          else None)(self.replicas_of(
                                              source["id"], cloud=self.b,
                                              direction="incoming")),
                                 "B's catalog of bob's copy", timeout=30,
                                 interval=0.2)
        self.assertEqual(mine_b[policy["id"]], rows_b[policy["id"]])
        self.assertEqual(bobs["peer_image_id"],
                         rows_b[None]["replica_image_id"])
        # A drill of the policy checks its replica alone; a failover
        # promotes it alone.
        drill = self.drill(policy["id"])
        self.assertEqual(("passed", 1), (drill["state"],
                                         drill["images_total"]))
        self.assertEqual([mine_a[policy["id"]]["replica_image_id"]], [
            i["replica_image_id"] for i in drill["report"]["images"]])
        over = self.openstack_json("admin", "dtn", "failover",
                                   policy["id"], cloud=self.b)
        self.assertEqual(1, over["promoted"])
        self.assertNotIn("dtn_migrate_transfer_id", self.peer_image(
            rows_b[policy["id"]]["replica_image_id"]))
        self.assertIn("dtn_migrate_transfer_id", self.peer_image(
            bobs["peer_image_id"]))

    def hostile_transfer(self, data, protection):
        """Peer ``evil`` of B (not A: its own name and key) sends B a
        whole migration of ``data`` whose descriptor says it serves
        ``protection``; B's import of it once it ended, and the
        descriptor's image.
        """
        tid = os.urandom(16)
        image = {"id": str(uuid.uuid4()), "name": "evil-%s" % tid.hex()[:6],
                 "disk_format": "raw", "container_format": "bare",
                 "min_disk": 0, "min_ram": 0, "visibility": "private",
                 "protected": False, "os_hidden": False,
                 "size": len(data), "os_hash_algo": "sha512",
                 "os_hash_value": hashlib.sha512(data).hexdigest(),
                 "checksum": hashlib.md5(data).hexdigest(),
                 "tags": [], "properties": {}}
        descriptor = {"version": 1, "transfer_id": tid.hex(), "attempt": 1,
                      "image": image, "protection": protection,
                      "options": {"keep_id": False, "visibility": None,
                                  "target_project": None, "verify": True,
                                  "mode": "serial"}}
        sess = rawpeer.Session.open(self.b.port, self.evil, self.evil_key,
                                    transfer_id=tid, streams=2,
                                    sink=self.b.agent_name)
        try:
            for file_id, (leaf, body) in enumerate((
                    ("image.json", json.dumps(descriptor).encode()),
                    ("image.data", data))):
                closed = sess.send_file(file_id, "%s/%s" % (tid.hex(), leaf),
                                        body, stream_index=file_id)
                self.assertEqual(P.CloseStatus.OK, closed.status,
                                 closed)
            sess.bye()
        finally:
            sess.close()

        def ended():
            resp = self.http("admin", "GET", "/v1/migrations",
                             cloud=self.b, params={
                                 "direction": "incoming", "peer": self.evil,
                                 "all_projects": "true"})
            self.assertEqual(200, resp.status_code, resp.text)
            return next((m for m in resp.json()["migrations"]
                         if m["os_hash_value"] == image["os_hash_value"]
                         and m["state"] in api.FINAL), None)
        record = self.wait_until(ended, "B's import of %s" % tid.hex(),
                                 timeout=120, interval=0.5)
        return record, image

    def test_hostile_peer_cannot_take_over_a_policy(self):
        tag = self.tag()
        policy = self.create_policy("evil-%s" % tag, tag)
        source = self.upload(MiB + 17, tags=[tag])
        self.wait_replicated(policy["id"], [source["id"]])
        learnt = self.wait_until(lambda: self.http(
            "admin", "GET", "/v1/policies/%s" % policy["id"],
            cloud=self.b).json().get("policy"), "B to learn the policy",
            timeout=30, interval=0.2)
        self.assertEqual(self.a.agent_name, learnt["peer"])

        # Another peer of B names A's policy, with a selector and an RPO
        # of its own: its import lands, the policy stays A's.
        record, image = self.hostile_transfer(os.urandom(200000), {
            "policy_id": policy["id"], "name": "mine now",
            "rpo_minutes": 1, "selector": {"tags": ["everything"]}})
        self.assertEqual("complete", record["state"], record["error"])
        after = self.rest_policy(policy["id"], persona="admin",
                                 cloud=self.b)
        for key in ("peer", "selector", "rpo", "name", "project_id",
                    "role"):
            self.assertEqual(learnt[key], after[key], key)
        self.assertIn("is the replica policy of peer %s here"
                      % self.a.agent_name, self.engine_log(self.b))
        [row] = self.replicas_of(image["id"], cloud=self.b,
                                 direction="incoming").values()
        self.assertEqual((self.evil, None, record["image_id"]), (
            row["peer"], row["policy_id"], row["replica_image_id"]))
        # A drill of the policy checks A's replica only.
        drill = self.drill(policy["id"])
        self.assertEqual(("passed", 1), (drill["state"],
                                         drill["images_total"]))

        # A policy whose selector the API would refuse is never learnt;
        # every listing still answers.
        for selector in ({"properties": ["not", "a", "mapping"]},
                         {"tags": "gold"}, {"projects": ["p"]}):
            policy_id = uuid.uuid4().hex
            record, image = self.hostile_transfer(os.urandom(100000), {
                "policy_id": policy_id, "name": "broken",
                "rpo_minutes": 5, "selector": selector})
            self.assertEqual("complete", record["state"], record["error"])
            self.assertEqual(404, self.http(
                "admin", "GET", "/v1/policies/%s" % policy_id,
                cloud=self.b).status_code)
            [row] = self.replicas_of(image["id"], cloud=self.b,
                                     direction="incoming").values()
            self.assertIsNone(row["policy_id"])
        resp = self.http("admin", "GET", "/v1/policies", cloud=self.b,
                         params={"all_projects": "true"})
        self.assertEqual(200, resp.status_code, resp.text)
        self.assertNotIn("broken", [p["name"] for p in
                                    resp.json()["policies"]])

    def as_b(self, request):
        """``request`` to A's agent over the DTN link, sent as B's agent
        (B's name and key: a compromised B); A's answer.
        """
        answer = request_mod.send_request(
            transfer_source.Peer(self.a.agent_name, "127.0.0.1",
                                 self.a.port, bytes.fromhex(self.scope.key)),
            json.dumps(request).encode(), self.b.agent_name,
            transfer_config.TransferConfig(connect_timeout=10), timeout=90)
        return json.loads(answer)

    def test_hostile_peer_cannot_change_metadata_outside_a_failback(self):
        tag = self.tag()
        policy = self.create_policy("meta-%s" % tag, tag)
        source = self.upload(MiB + 19, tags=[tag], hw_disk_bus="scsi",
                             x_note="a's")
        self.wait_replicated(policy["id"], [source["id"]])
        replica = self.replicas_of(source["id"],
                                   direction="outgoing")[policy["id"]]
        admin_a = self.a.glance.client(
            session=self.a.users["admin"].session())

        def forged(**changes):
            request = {"action": "update_metadata",
                       "policy_id": policy["id"],
                       "source_image_id": source["id"],
                       "replica_image_id": replica["replica_image_id"],
                       "hash_value": source["os_hash_value"],
                       "metadata": {
                           "name": "evil", "min_disk": 0, "min_ram": 0,
                           "tags": [tag, "evil"], "properties": {
                               "x_note": "b's",
                               "hw_machine_type": "pc-i440fx-1.0",
                               "img_signature": "forged",
                               "os_secure_boot": "disabled"}}}
            request.update(changes)
            return self.as_b(request)

        def unchanged():
            image = dict(admin_a.images.get(source["id"]))
            self.assertEqual((source["name"], "a's", "scsi", [tag]), (
                image["name"], image.get("x_note"), image["hw_disk_bus"],
                image["tags"]))
            for key in ("hw_machine_type", "img_signature",
                        "os_secure_boot"):
                self.assertNotIn(key, image)

        # No failback open on A: nothing changes, whatever B says.
        answer = forged()
        self.assertEqual("closed", answer["result"], answer)
        self.assertIn("no failback of policy %s is open" % policy["id"],
                      answer["reason"])
        unchanged()
        # A's administrator opens it: the name, tags and x_* properties
        # come back; signatures and boot properties never, set or
        # removed.
        self.open_failback_at_a(policy)
        for changes, fragment in (
                ({"replica_image_id": str(uuid.uuid4())},
                 "did not replicate"),
                ({"policy_id": uuid.uuid4().hex}, "no such policy"),
                ({"hash_value": "0" * 128}, "not what this cloud sent")):
            answer = forged(**changes)
            self.assertEqual("refused", answer["result"], answer)
            self.assertIn(fragment, answer["reason"])
        unchanged()
        answer = forged()
        self.assertEqual("updated", answer["result"], answer)
        self.assertEqual(["name", "tags", "x_note"], answer["changed"])
        self.assertEqual(["hw_disk_bus", "hw_machine_type",
                          "img_signature", "os_secure_boot"],
                         answer["kept"])
        image = dict(admin_a.images.get(source["id"]))
        self.assertEqual(("evil", "b's", "scsi", source["os_hash_value"]), (
            image["name"], image["x_note"], image["hw_disk_bus"],
            image["os_hash_value"]))
        self.assertEqual(sorted([tag, "evil"]), sorted(image["tags"]))
        for key in ("hw_machine_type", "img_signature", "os_secure_boot"):
            self.assertNotIn(key, image)
        # B says its failback is complete: closed again.
        self.assertEqual({"result": "closed"}, self.as_b(
            {"action": "close_failback", "policy_id": policy["id"]}))
        answer = forged(metadata={"name": "again", "min_disk": 0,
                                  "min_ram": 0, "tags": [], "properties": {}})
        self.assertEqual("closed", answer["result"], answer)
        self.assertEqual("evil", admin_a.images.get(source["id"])["name"])

    def glance_processes(self, cloud):
        """The pids of ``cloud``'s Glance (uwsgi and its workers)."""
        pids = [cloud.glance.proc.pid]
        for pid in list(pids):
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                pids += [int(p) for p in f.read().split()]
        return pids

    def test_drills_one_at_a_time_and_clones_for_administrators(self):
        tag = self.tag()
        policy = self.create_policy("busy-%s" % tag, tag)
        source = self.upload(MiB + 23, tags=[tag])
        self.wait_replicated(policy["id"], [source["id"]])
        # Clones are an administrator's: a member is refused before the
        # engine is asked (any policy; this one is not even hers on B).
        resp = self.http("alice", "POST", "/v1/drills", cloud=self.b,
                         json={"policy_id": policy["id"], "clone": True})
        self.assertEqual(403, resp.status_code, resp.text)
        self.assertIn("dtn:drill:start:clone", resp.text)
        # B's Glance stopped: the first drill runs until it is back; a
        # second one of the policy is refused and names it.
        pids = self.glance_processes(self.b)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            first = self.http("admin", "POST", "/v1/drills", cloud=self.b,
                              json={"policy_id": policy["id"]})
            self.assertEqual(202, first.status_code, first.text)
            first = first.json()["drill"]
            proc = self.openstack("admin", "dtn", "drill", "start",
                                  policy["id"], cloud=self.b, check=False)
            self.assertNotEqual(0, proc.returncode)
            out = proc.stdout + proc.stderr
            self.assertIn("409", out)
            self.assertIn("its drill %s runs" % first["id"], out)
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        done = self.wait_until(lambda: (lambda d: d if d["state"] !=
                                        "running" else None)(self.http(
                                            "admin", "GET",
                                            "/v1/drills/%s" % first["id"],
                                            cloud=self.b).json()["drill"]),
                               "the first drill to end", timeout=120,
                               interval=0.5)
        self.assertEqual("passed", done["state"], done)
        # Then the policy is drilled again.
        self.assertEqual("passed", self.drill(policy["id"])["state"])

    # The runbooks of doc/source/admin/runbooks, as written.

    def test_runbooks_as_written(self):
        tag = self.tag()
        path = os.path.join(self.workdir, "web.raw")
        base.make_file(path, MiB + 7)
        values = {"peer": self.b.agent_name, "tag": tag,
                  "policy": "rb-%s" % tag, "file": path}
        for name in ("protect-a-project.rst", "run-a-drill.rst",
                     "fail-over.rst", "fail-back.rst"):
            outputs = runbook.run(self, os.path.join(RUNBOOKS, name),
                                  values)
            self.assertTrue(outputs, name)

    # The operator's commands.

    def test_policy_commands_and_scope(self):
        tag = self.tag()
        name = "manual-%s" % tag
        policy = self.create_policy(name, tag, "--mode", "manual",
                                    "--property", "x_tier=gold")
        self.assertEqual("manual", policy["mode"])
        source = self.upload(MiB + 3, tags=[tag], x_tier="gold")
        other = self.upload(MiB + 5, tags=[tag], x_tier="silver")
        time.sleep(3)                   # manual: nothing moves by itself
        self.assertEqual([], self.migrations_of(source["id"]))
        started = self.openstack_json("alice", "dtn", "policy", "sync",
                                      name)
        self.assertEqual([source["id"]],
                         [m["Image ID"] for m in started])
        self.wait_replicated(policy["id"], [source["id"]])
        self.assertEqual([], self.migrations_of(other["id"]))
        # A second sync sends nothing: the replica's hash matches.
        again = self.openstack_json("alice", "dtn", "policy", "sync", name)
        self.assertEqual([], again)
        self.assertEqual(1, len(self.migrations_of(source["id"])))

        self.openstack("alice", "dtn", "policy", "set", name, "--rpo",
                       "15", "--mode", "scheduled", "--schedule",
                       "*/5 * * * *")
        shown = self.policy(name)
        self.assertEqual("scheduled", shown["mode"])
        self.assertEqual(15, shown["rpo_target_minutes"])
        listed = self.openstack_json("alice", "dtn", "policy", "list")
        self.assertIn(policy["id"], [p["ID"] for p in listed])

        # Another project's member and a reader.
        self.assertEqual(404, self.http(
            "bob", "GET", "/v1/policies/%s" % policy["id"]).status_code)
        proc = self.openstack("bob", "dtn", "policy", "delete",
                              policy["id"], check=False)
        self.assertNotEqual(0, proc.returncode)
        proc = self.openstack("rita", "dtn", "policy", "create", "x",
                              "--peer", self.b.agent_name, "--tag", tag,
                              check=False)
        self.assertNotEqual(0, proc.returncode)
        self.assertIn("403", proc.stderr + proc.stdout)
        admin = self.openstack_json("admin", "dtn", "policy", "list",
                                    "--all-projects")
        self.assertIn(policy["id"], [p["ID"] for p in admin])

        # Bad input: a clear 4xx, nothing created.
        for body in ({"name": "x", "peer": self.b.agent_name,
                      "selector": {}},
                     {"name": "x", "peer": self.b.agent_name,
                      "selector": {"tags": [tag]}, "mode": "scheduled"},
                     {"name": "x", "peer": self.b.agent_name,
                      "selector": {"tags": [tag]}, "mode": "scheduled",
                      "schedule": "every day"},
                     {"name": "x", "peer": "no-such-dtn",
                      "selector": {"tags": [tag]}},
                     {"name": name, "peer": self.b.agent_name,
                      "selector": {"tags": [tag]}},
                     {"name": "x\u0000", "peer": self.b.agent_name,
                      "selector": {"tags": [tag]}},
                     {"name": "x", "peer": self.b.agent_name,
                      "selector": {"tags": [tag], "projects": ["p"]}}):
            resp = self.http("alice", "POST", "/v1/policies", json=body)
            self.assertTrue(400 <= resp.status_code < 500,
                            "%s -> %s %s" % (body, resp.status_code,
                                             resp.text))
            self.assertIn("message", resp.json()["error"])
        names = [p["Name"] for p in self.openstack_json(
            "alice", "dtn", "policy", "list")]
        self.assertNotIn("x", names)

        self.openstack("alice", "dtn", "policy", "delete", name)
        self.assertEqual(404, self.http(
            "alice", "GET", "/v1/policies/%s" % policy["id"]).status_code)
        # Deleting the policy leaves the replica where it is.
        self.assertEqual("current", self.replica(source["id"])["state"])
