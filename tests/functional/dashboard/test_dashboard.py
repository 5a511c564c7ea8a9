"""The Disaster Recovery panel of Horizon, driven in chromium.

Real Keystones, Glances, agents, engines and APIs (tests/functional/api),
the real Horizon with the plugin, and a real browser: what a user sees
and clicks.  Cloud A's agent sends at 8 MiB/s, so that progress can be
watched and a migration cancelled while it runs.
"""

import time
import uuid

import requests
from testtools import content

from devcloud import api as devcloud_api
from dtn_migrate.common import text
from tests.functional.dashboard import harness as dashboard

MiB = dashboard.api.MiB
INDEX = "/project/dtn_migrations/"
MIGRATE = INDEX + "migrate/"
PEERS = "/project/dtn_peers/"
IMAGES = "/project/images/"
ADMIN_INDEX = "/admin/dtn_migrations/"
POLICIES = "/project/dtn_policies/"
#: Every action button of the policies panel (ids end with these).
POLICY_ACTION_IDS = ("__action_create", "__action_sync", "__action_drill",
                     "__action_delete")
#: The cells' texts of one row of a table, by column name (the header's
#: texts are the keys), and the window's marker.
ROW_CELLS_JS = """(rowId) => {
  const row = document.getElementById(rowId);
  if (!row) { return null; }
  const heads = Array.from(row.closest("table").querySelectorAll(
    "tr.table_column_header th")).map(th => th.innerText.trim());
  const cells = {};
  Array.from(row.cells).forEach((c, i) => {
    cells[heads[i] || String(i)] = c.innerText.trim(); });
  return {cells: cells, pending: row.classList.contains("warning"),
          marker: window.dtnmMarker || null};
}"""
#: Every action button of the panel's tables (ids end with these).
ACTION_IDS = ("__action_migrate", "__action_cancel", "__action_retry",
              "__action_dtn_migrate")
#: What the page reports about one row of the migrations table, in one
#: JavaScript call: the progress bar's value, the status cell's text,
#: whether Horizon still polls the row (its status class is "warning" while
#: the state is pending; every row of an ajax table has "ajax-update"),
#: the rate and ETA texts under the bar (when shown), and the window's
#: marker.
ROW_STATE_JS = """(rowId) => {
  const row = document.getElementById(rowId);
  if (!row) { return null; }
  const bar = row.querySelector(".progress-bar[data-progress]");
  const cell = row.querySelector("td.status_up, td.status_down, td.warning");
  return {
    progress: bar ? bar.getAttribute("data-progress") : null,
    state: cell ? cell.innerText.trim() : "",
    pending: row.classList.contains("warning"),
    done: row.classList.contains("status_up"),
    rate: (row.querySelector(".dtn-rate") || {}).innerText || null,
    eta: (row.querySelector(".dtn-eta") || {}).innerText || null,
    marker: window.dtnmMarker || null,
  };
}"""


def row_id(migration_id):
    return "migrations__row__%s" % migration_id


class TestDashboard(dashboard.DashboardTestCase):

    # Helpers.

    def migrate_from_form(self, page, image_id, step):
        """Fill the open migrate form for IMAGE_ID to cloud B; submit."""
        form = page.locator("form:has(#id_peer)")
        form.wait_for()
        page.select_option("#id_images", [image_id], force=True)
        page.select_option("#id_peer", self.b.agent_name, force=True)
        self.shot(page, step)
        # The modal posts by AJAX, then Horizon loads the index.
        with page.expect_navigation():
            form.locator(".modal-footer .btn-primary, "
                         "[type=submit].btn-primary").first.click()
        self.assertTrue(page.url.endswith(INDEX), page.url)
        page.wait_for_selector(".messages .alert-success")

    def wait_final_as(self, migration_id, persona, timeout=120):
        """wait_final, as PERSONA (whose project owns the migration)."""
        return self.wait_until(
            lambda: (lambda m: m if m["state"] in dashboard.api.FINAL
                     else None)(self.rest_show(migration_id, persona)),
            "migration %s to end" % migration_id, timeout=timeout,
            interval=0.5)

    def wait_row_state(self, page, migration_id, state, timeout=120):
        """Until the row (updated by AJAX, no reload) shows STATE in its
        status cell and is no longer pending; the row's state.
        """
        deadline = time.monotonic() + timeout
        while True:
            found = page.evaluate(ROW_STATE_JS, row_id(migration_id))
            if found and not found["pending"] and \
                    found["state"].lower() == state:
                return found
            if time.monotonic() > deadline:
                self.fail("row %s never showed %r: %s" % (
                    migration_id, state, found))
            time.sleep(0.25)

    def click_row_action(self, page, table, obj_id, action):
        """Click row action ACTION (opening the row's dropdown if the
        action is in it).
        """
        button = page.locator("#%s__row_%s__action_%s"
                              % (table, obj_id, action))
        if not button.is_visible():
            page.locator("#%s__row__%s .dropdown-toggle" % (
                table, obj_id)).click()
        button.click()

    def confirm(self, page):
        """Press the confirmation dialog's primary button."""
        footer = page.locator(".modal.in .modal-footer, "
                              ".modal.show .modal-footer").last
        footer.locator(".btn-danger, .btn-primary").first.click()

    def headers(self, page, table):
        """The column headers' texts of TABLE."""
        return [t.strip() for t in page.locator(
            "table#%s tr.table_column_header th" % table).all_inner_texts()]

    def cells(self, page, migration_id):
        """The texts of a migrations table row's cells, by header."""
        found = page.evaluate(ROW_CELLS_JS, row_id(migration_id))
        self.assertIsNotNone(found, "no row %s" % migration_id)
        return found["cells"]

    def assertOneLineCut(self, element, full, cut=True):
        """ELEMENT (a locator) shows FULL on one line, cut with an
        ellipsis when CUT (else when too long for its place), the whole
        in its title (or its cell's).
        """
        box = element.evaluate("""(el) => {
          const style = window.getComputedStyle(el);
          return {cut: el.scrollWidth > el.clientWidth,
                  overflow: style.textOverflow, nowrap: style.whiteSpace,
                  height: el.getBoundingClientRect().height,
                  line: parseFloat(style.lineHeight) || 20,
                  title: el.getAttribute("title") ||
                         el.closest("td, dd").getAttribute("title") ||
                         (el.querySelector("[title]") || {}).title};
        }""")
        self.assertEqual(("ellipsis", "nowrap"),
                         (box["overflow"], box["nowrap"]), box)
        if cut:
            self.assertTrue(box["cut"], box)
        self.assertLess(box["height"], 1.5 * box["line"], box)
        self.assertEqual(full, box["title"])

    def assertNoActions(self, page):
        for suffix in ACTION_IDS:
            found = page.locator("[id$='%s']" % suffix)
            self.assertEqual(0, found.count(), "%s offered on %s" % (
                suffix, page.url))

    # The tests.

    def test_migrate_watch_progress_and_detail(self):
        # 128 MiB at 8 MiB/s: about 16 s on the DTN link, long enough
        # for several AJAX updates of the row, and for an ETA: none is
        # shown before each moving stage's rate is known (at least
        # stages.MIN_SECONDS of samples; a 64 MiB migration had one in
        # its last second only).
        source = self.upload(128 * MiB, name="dash-progress")
        page = self.goto("alice", INDEX)
        self.shot(page, "01-migrations-index")
        page.click("#migrations__action_migrate")
        self.migrate_from_form(page, source["id"], "02-migrate-form")
        self.assertIn("dash-progress",
                      " ".join(self.messages(page, "success")))
        [rec] = self.migrations_of(source["id"])
        mid = rec["id"]
        row = page.locator("#" + row_id(mid))
        row.wait_for()

        # From now on the page must not reload: a marker on window lives
        # as long as the document.
        page.evaluate("() => { window.dtnmMarker = 'kept'; }")
        # rates: (progress, rate, ETA) of the updates that showed both.
        seen, shot_running, rates = [], 0, []
        # What the API said meanwhile (a diagnostic: Horizon polls less
        # often while a row does not change, so it skips some values).
        api_seen, t0 = [], time.monotonic()
        token = self.token("alice")
        deadline = time.monotonic() + 180
        while True:
            state = page.evaluate(ROW_STATE_JS, row_id(mid))
            self.assertIsNotNone(state, "row %s vanished" % mid)
            self.assertEqual("kept", state["marker"],
                             "the page was reloaded")
            if state["progress"] is not None:
                value = float(state["progress"])
                if not seen or seen[-1] != value:
                    seen.append(value)
                shown = (value, state["rate"], state["eta"])
                if state["rate"] and state["eta"] and value < 100 and \
                        (not rates or rates[-1] != shown):
                    rates.append(shown)
                # The screenshot of a running row: the first one, replaced
                # once by one in mid-transfer with a rate and an ETA.
                good = 40 <= value <= 85 and bool(state["rate"])
                if 0 < value < 100 and shot_running < 1 + good:
                    self.shot(page, "03-progress-running")
                    shot_running = 1 + good
            api_rec = requests.get(
                "%s/v1/migrations/%s" % (self.a.api.endpoint, mid),
                headers={"X-Auth-Token": token}, timeout=30).json()[
                    "migration"]
            api_value = (round(100 * (api_rec["progress"] or 0), 1),
                         api_rec["rate"], api_rec["eta"])
            if not api_seen or api_seen[-1][1:] != api_value:
                api_seen.append((round(time.monotonic() - t0, 1),)
                                + api_value)
            if state["done"] and not state["pending"]:
                break
            if time.monotonic() > deadline:
                self.fail("migration %s did not complete in the table; "
                          "progress seen %s, row %r"
                          % (mid, seen, state["state"]))
            time.sleep(0.2)
        self.shot(page, "04-progress-complete")
        self.addDetail("progress-seen", content.text_content(
            "table: %r\ntable (%%, rate, ETA): %r\napi (s, %%, rate B/s, "
            "eta s): %r" % (seen, rates, api_seen)))
        # Several distinct values, never going back, ending at 100 %.
        self.assertEqual(sorted(seen), seen)
        self.assertEqual(100.0, seen[-1])
        self.assertGreaterEqual(len([v for v in seen if 0 < v < 100]), 2,
                                seen)
        self.assertEqual("kept", page.evaluate("() => window.dtnmMarker"))
        # While it ran, the bar also told the rate and the ETA.
        self.assertTrue(rates, "no AJAX update showed a rate and an ETA; "
                        "the API said (s, %%, rate, eta) %r" % (api_seen,))
        self.assertRegex(rates[-1][1], r"/s")
        self.assertIn("complete", state["state"].lower())
        self.assertEqual("complete", self.rest_show(mid)["state"])

        # The detail page: the peer image and its verified hash.
        row.locator("a[href*='%s']" % mid).first.click()
        page.wait_for_url(lambda url: url.endswith("%s%s/" % (INDEX, mid)))
        self.shot(page, "05-migration-detail")

        def field(name):
            return page.locator("dd[data-field='%s']" % name).inner_text(
            ).strip()

        self.assertEqual("complete", field("state").lower())
        peer_image_id = field("peer_image_id")
        peer = self.peer_image(peer_image_id)
        self.assertEqual("active", peer["status"])
        self.assertEqual(peer["os_hash_value"], field("peer_image_hash"))
        self.assertEqual(source["os_hash_value"], field("os_hash_value"))
        self.assertEqual("yes", field("verified").lower())
        self.assertEqual(source["id"], field("image_id"))
        # The 128-character hashes on one line, whole in their title.
        for key in ("os_hash_value", "peer_image_hash"):
            self.assertOneLineCut(page.locator(
                "dd[data-field='%s'] .dtn-ellipsis" % key),
                source["os_hash_value"], cut=False)
        stages = page.locator("table#stages tbody tr")
        self.assertEqual(3, stages.count())
        stage_text = page.locator("table#stages").inner_text().lower()
        for stage in ("export", "transfer", "import"):
            self.assertIn(stage, stage_text)
        self.assertGreater(page.locator("table#events tbody tr").count(),
                           0)
        self.assertReadable(page)

    def filter_rows(self, page, field, text):
        """Filter the migrations table on the server by FIELD (state or
        peer) = TEXT; the ids of the rows shown.
        """
        page.select_option("select[name='migrations__filter__q_field']",
                           field, force=True)
        page.fill("input[name='migrations__filter__q']", text)
        with page.expect_navigation():
            page.locator(".table_search button[type=submit]").click()
        page.locator("table#migrations").wait_for()
        return set(page.eval_on_selector_all(
            "tr[id^='migrations__row__']",
            "rows => rows.map(r => r.id.split('__row__')[1])"))

    def test_filters_by_state_and_peer(self):
        # bob's project, whose migrations no other test cancels.
        rec = self.start_migration(
            self.upload(1 * MiB, persona="bob")["id"], persona="bob")
        self.assertEqual("complete",
                         self.wait_final_as(rec["id"], "bob")["state"])
        page = self.goto("bob", INDEX)
        page.locator("#" + row_id(rec["id"])).wait_for()
        # The filters reach the real API, which does the filtering.
        self.assertIn(rec["id"], self.filter_rows(page, "state",
                                                  "complete"))
        self.shot(page, "18-filter-state")
        self.assertNotIn(rec["id"], self.filter_rows(page, "state",
                                                     "cancelled"))
        self.assertIn(rec["id"], self.filter_rows(page, "peer",
                                                  self.b.agent_name))
        self.assertEqual(set(), self.filter_rows(page, "peer", "nowhere"))
        self.assertReadable(page)
        # A state the API does not know: a readable message, no rows.
        self.assertEqual(set(), self.filter_rows(page, "state", "bogus"))
        self.assertTrue(self.messages(page, "danger"), page.url)
        self.assertReadable(page)
        # Cleared: every row again (the filter is kept in the session).
        self.assertIn(rec["id"], self.filter_rows(page, "state", ""))

    def test_images_row_action_preselects(self):
        source = self.upload(1 * MiB, name="dash-rowaction")
        page = self.goto("alice", IMAGES)
        action = page.locator("#images__row_%s__action_dtn_migrate"
                              % source["id"])
        self.assertEqual(1, action.count(), "no migrate action on the "
                         "Images table")
        self.assertIn("%s?image_id=%s" % (MIGRATE, source["id"]),
                      action.get_attribute("href"))
        self.click_row_action(page, "images", source["id"], "dtn_migrate")
        page.locator("#id_images").wait_for(state="attached")
        selected = page.eval_on_selector(
            "#id_images",
            "(el) => Array.from(el.selectedOptions).map(o => o.value)")
        self.assertEqual([source["id"]], selected)
        self.shot(page, "06-images-row-action")

    def test_reader_sees_tables_without_actions(self):
        # A demo migration: rita sees the tables, and no action anywhere.
        source = self.upload(1 * MiB, name="dash-reader")
        rec = self.start_migration(source["id"])
        self.wait_final(rec["id"])
        page = self.goto("rita", INDEX)
        page.locator("table#migrations").wait_for()
        page.locator("#" + row_id(rec["id"])).wait_for()
        self.assertNoActions(page)
        # Nor an empty Actions column.
        self.assertNotIn("Actions", self.headers(page, "migrations"))
        self.assertEqual(0, page.locator(
            "table#migrations td.actions_column").count())
        self.shot(page, "07-reader-migrations")
        page = self.goto("rita", "%s%s/" % (INDEX, rec["id"]))
        page.locator("dd[data-field='state']").wait_for()
        self.assertNoActions(page)
        page = self.goto("rita", PEERS)
        page.locator("table#peers").wait_for()
        self.assertNoActions(page)
        page = self.goto("rita", IMAGES)
        page.locator("#images__row__%s" % source["id"]).wait_for()
        self.assertNoActions(page)
        self.shot(page, "08-reader-images")
        self.assertReadable(page)

    def test_cancel_running_migration(self):
        # 192 MiB at 8 MiB/s: about 24 s on the link, so that the retry
        # near the end still runs when its cancel is clicked (with 96 MiB
        # a loaded CI machine saw the retry complete first).
        source = self.upload(192 * MiB, name="dash-cancel")
        rec = self.start_migration(source["id"])
        mid = rec["id"]
        self.wait_transferring(mid)

        # rita sees it running, with nothing to press.
        page = self.goto("rita", INDEX)
        page.locator("#" + row_id(mid)).wait_for()
        self.assertNoActions(page)

        page = self.goto("alice", INDEX)
        page.locator("#" + row_id(mid)).wait_for()
        self.shot(page, "09-cancel-running")
        self.click_row_action(page, "migrations", mid, "cancel")
        self.confirm(page)
        page.wait_for_selector(".messages .alert-success")
        self.shot(page, "10-cancel-confirmed")
        # The row turns to cancelled by itself (AJAX), with no reload.
        page.evaluate("() => { window.dtnmMarker = 'kept'; }")
        found = self.wait_row_state(page, mid, "cancelled")
        self.assertEqual("kept", found["marker"])
        self.shot(page, "11-cancelled")
        final = self.wait_final(mid, timeout=120)
        self.assertEqual("cancelled", final["state"])
        self.assertIn("cancelled", [e["event"] for e in final["events"]])
        # alice may retry it now; rita still may not.
        self.assertEqual(1, page.locator(
            "#migrations__row_%s__action_retry" % mid).count())
        page = self.goto("rita", INDEX)
        page.locator("#" + row_id(mid)).wait_for()
        self.assertNoActions(page)

        # The detail page's buttons: retry, then cancel the new attempt
        # (the 100-odd MiB left take seconds more than the clicks).
        detail = "%s%s/" % (INDEX, mid)
        page = self.goto("alice", detail)
        page.click("#migrations__row_%s__action_retry" % mid)
        page.wait_for_selector(".messages .alert-success")
        page = self.goto("alice", detail)
        self.shot(page, "17-detail-retried")
        page.click("#migrations__row_%s__action_cancel" % mid)
        self.confirm(page)
        page.wait_for_selector(".messages .alert-success")
        final = self.wait_final(mid, timeout=120)
        self.assertEqual("cancelled", final["state"])
        self.assertGreater(final["attempt"], 1)
        self.assertIn("retried", [e["event"] for e in final["events"]])

    def test_failure_reason_long_names_and_form_options(self):
        # admin may ask for a target project: cloud B allows none, and
        # refuses the import.  A name of 200 characters does not wrap;
        # nor do the detail page's 128-character hashes.  (The peer here
        # is named for B's agent: a long peer name is the unit tests',
        # tests.unit.dashboard.content.migrations.test_tables.)
        name = "dash-long-%s-" % uuid.uuid4().hex[:6]
        name += "n" * (200 - len(name))
        source = self.upload(1 * MiB, persona="admin", name=name)
        page = self.goto("admin", INDEX)
        page.click("#migrations__action_migrate")
        form = page.locator("form:has(#id_peer)")
        form.wait_for()
        for field in ("#id_keep_id", "#id_visibility",
                      "#id_target_project", "#id_force"):
            self.assertEqual(1, form.locator(field).count(), field)
        option = page.locator("#id_images option[value='%s']"
                              % source["id"])
        self.assertIn(name[:64], option.get_attribute("title"))
        self.assertIn("(200 characters)", option.inner_text())
        page.select_option("#id_images", [source["id"]], force=True)
        page.select_option("#id_peer", self.b.agent_name, force=True)
        page.fill("#id_target_project", "no-such-project")
        self.shot(page, "24-migrate-form-options")
        with page.expect_navigation():
            form.locator(".modal-footer .btn-primary, "
                         "[type=submit].btn-primary").first.click()
        page.wait_for_selector(".messages .alert-success")
        # The message names the image shortened, once.
        started = " ".join(self.messages(page, "success"))
        self.assertIn(text.shorten(name), started)
        self.assertNotIn(name, started)
        # (Horizon's project of admin may not be the persona's own.)
        resp = self.http("admin", "GET", "/v1/migrations", params={
            "image_id": source["id"], "all_projects": "true"})
        self.assertEqual(200, resp.status_code, resp.text)
        [rec] = resp.json()["migrations"]
        mid = rec["id"]
        page.locator("#" + row_id(mid)).wait_for()
        self.wait_row_state(page, mid, "failed")
        final = self.rest_show(mid, persona="admin")
        self.assertEqual("failed", final["state"])
        self.assertTrue(final["error"])

        # The reason, shortened, whole in its title; the stage that
        # failed (of the last failed event naming one).
        cells = self.cells(page, mid)
        self.addDetail("failed-row", content.text_content(repr(cells)))
        reason = page.locator("#%s .dtn-reason" % row_id(mid))
        self.assertEqual(final["error"], reason.get_attribute("title"))
        self.assertEqual(text.shorten(final["error"]).strip(),
                         cells["Failure Reason"])
        failed = [e["stage"] for e in final["events"]
                  if e["event"] == "failed" and e["stage"]] or \
            [final["stage"]]
        self.addDetail("failed-events", content.text_content(
            repr(final["events"])))
        self.assertTrue(failed[-1], final)
        self.assertEqual("%s (failed)" % failed[-1].capitalize(),
                         cells["Stage"])
        self.assertOneLineCut(page.locator(
            "#%s td a.dtn-ellipsis" % row_id(mid)), name)
        # The table, its Failure Reason and Actions columns included,
        # fits the window: nothing overflows it.
        widths = page.evaluate(
            "() => [document.documentElement.scrollWidth, "
            "window.innerWidth]")
        self.assertLessEqual(widths[0], widths[1], widths)
        self.shot(page, "23-failure-reason")

        # The detail page: the stage that failed.
        page = self.goto("admin", "%s%s/" % (INDEX, mid))
        self.assertEqual("%s (failed)" % failed[-1].capitalize(),
                         page.locator("dd[data-field='stage']")
                         .inner_text().strip())
        self.assertReadable(page)

    def test_peers_page(self):
        page = self.goto("alice", PEERS)
        row = page.locator("#peers__row__%s" % self.b.agent_name)
        row.wait_for()
        self.shot(page, "12-peers")
        text = row.inner_text().lower()
        self.assertIn("yes", text)
        self.assertRegex(text, r"\d+(\.\d+)?\s*ms")
        self.assertReadable(page)

    def test_api_errors_are_readable(self):
        # A migration that does not exist.
        missing = str(uuid.uuid4())
        page = self.goto("alice", "%s%s/" % (INDEX, missing))
        page.wait_for_selector(".messages .alert-danger")
        self.shot(page, "13-error-not-found")
        errors = " ".join(self.messages(page, "danger"))
        self.assertTrue(errors.strip(), "no error message")
        self.assertReadable(page)

        # The API down: a form sent then, and the index, give messages.
        source = self.upload(1 * MiB, name="dash-api-down")
        page = self.goto("alice", MIGRATE)
        page.locator("#id_peer").wait_for(state="attached")
        page.select_option("#id_images", [source["id"]], force=True)
        self.a.api.stop()
        try:
            page.locator("form:has(#id_peer) [type=submit].btn-primary, "
                         "form:has(#id_peer) .btn-primary").first.click()
            page.wait_for_selector(".messages .alert-danger")
            self.shot(page, "14-error-api-down")
            self.assertReadable(page)
            self.assertTrue(" ".join(self.messages(page, "danger")))
            page = self.goto("alice", INDEX)
            page.wait_for_selector(".messages .alert-danger")
            self.assertReadable(page)
        finally:
            self.a.api.start()
        self.assertEqual([], self.migrations_of(source["id"]))

    def incoming_from_b(self):
        """Cloud A's incoming migration of an image that cloud B sent
        (complete).
        """
        name = "dash-from-b-%s" % uuid.uuid4().hex[:6]
        image = self.upload(1 * MiB, cloud=self.b, name=name)
        resp = self.http("alice", "POST", "/v1/migrations", cloud=self.b,
                         json={"peer": self.a.agent_name,
                               "images": [image["id"]]})
        self.assertEqual(202, resp.status_code, resp.text)

        def arrived():
            resp = self.http("admin", "GET", "/v1/migrations", params={
                "all_projects": "true", "direction": "incoming"})
            self.assertEqual(200, resp.status_code, resp.text)
            for found in resp.json()["migrations"]:
                if image["id"] in (found["image_id"],
                                   found["peer_image_id"]) or \
                        found["image_name"] == name:
                    self.assertNotIn(found["state"], ("failed",
                                                      "cancelled"), found)
                if found["state"] == "complete" and (
                        found["image_name"] == name or image["id"] in (
                            found["image_id"], found["peer_image_id"])):
                    return found
            return None

        return self.wait_until(arrived, "the import of %s" % image["id"],
                               timeout=120, interval=0.5)

    def test_admin_sees_all_projects(self):
        mine = self.start_migration(self.upload(1 * MiB)["id"])
        bobs = self.start_migration(
            self.upload(1 * MiB, persona="bob")["id"], persona="bob")
        incoming = self.incoming_from_b()
        self.wait_final(mine["id"], timeout=120)
        self.wait_final_as(bobs["id"], "bob")
        page = self.goto("admin", ADMIN_INDEX)
        for rec in (mine, bobs, incoming):
            page.locator("#" + row_id(rec["id"])).wait_for()
        self.shot(page, "15-admin-migrations")
        # A Direction column; an import names the project it went to.
        self.assertIn("Direction", self.headers(page, "migrations"))
        for rec in (mine, bobs):
            self.assertEqual("Outgoing",
                             self.cells(page, rec["id"])["Direction"])
        cells = self.cells(page, incoming["id"])
        self.addDetail("incoming-row", content.text_content(repr(cells)))
        self.assertEqual("Incoming", cells["Direction"])
        self.assertNotEqual("-", cells["Project"])
        self.assertRegex(cells["Project"],
                         r"\(imported into\)$|^Service project")
        # A project column: the project's name or id.
        for rec, persona in ((mine, "alice"), (bobs, "bob")):
            user = self.a.users[persona]
            text = page.locator("#" + row_id(rec["id"])).inner_text()
            self.assertTrue(user["project_id"] in text or
                            user["project_name"] in text, text)
        # bob sees only his own.
        page = self.goto("bob", INDEX)
        page.locator("#" + row_id(bobs["id"])).wait_for()
        self.assertEqual(0, page.locator("#" + row_id(mine["id"])).count())
        self.assertReadable(page)

    def test_protection_policy_sync_now(self):
        # A manual policy for a tag of this test: the form, Sync Now, the
        # row turning replicated with its RPO state ok by itself.
        tag = "dash-dr-%s" % uuid.uuid4().hex[:8]
        name = "dash-gold-%s" % tag[-4:]
        source = self.upload(1 * MiB, name="dash-protected", tags=[tag])
        page = self.goto("alice", POLICIES)
        page.locator("table#policies").wait_for()
        page.click("#policies__action_create")
        form = page.locator("form:has(#id_rpo_minutes)")
        form.wait_for()
        page.fill("#id_name", name)
        page.select_option("#id_peer", self.b.agent_name, force=True)
        page.fill("#id_tags", tag)
        page.fill("#id_properties", "")
        page.select_option("#id_mode", "manual", force=True)
        page.fill("#id_rpo_minutes", "30")
        self.shot(page, "19-policy-create-form")
        with page.expect_navigation():
            form.locator(".modal-footer .btn-primary, "
                         "[type=submit].btn-primary").first.click()
        self.assertTrue(page.url.endswith(POLICIES), page.url)
        page.wait_for_selector(".messages .alert-success")
        self.assertIn(name, " ".join(self.messages(page, "success")))
        resp = self.http("alice", "GET", "/v1/policies",
                         params={"name": name})
        self.assertEqual(200, resp.status_code, resp.text)
        [created] = resp.json()["policies"]
        pid = created["id"]
        self.assertEqual("manual", created["mode"])
        self.assertEqual([tag], created["selector"]["tags"])
        self.assertEqual(30, created["rpo"]["target_minutes"])
        row = "policies__row__%s" % pid
        page.locator("#" + row).wait_for()

        # Sync Now: one migration, then the row (AJAX, no reload) shows
        # the image replicated and the recovery point ok.
        self.click_row_action(page, "policies", pid, "sync")
        page.wait_for_selector(".messages .alert-success")
        self.assertIn("dash-protected",
                      " ".join(self.messages(page, "info")))
        self.assertReadable(page)
        page.evaluate("() => { window.dtnmMarker = 'kept'; }")
        deadline = time.monotonic() + 240
        seen = []
        while True:
            found = page.evaluate(ROW_CELLS_JS, row)
            self.assertIsNotNone(found, "row %s vanished" % pid)
            self.assertEqual("kept", found["marker"],
                             "the page was reloaded")
            cells = found["cells"]
            if not seen or seen[-1] != cells:
                seen.append(cells)
            if cells.get("Replicated") == "1" and \
                    cells.get("RPO State") == "OK" and \
                    not found["pending"]:
                break
            if time.monotonic() > deadline:
                self.fail("policy %s never showed replicated and OK: %r"
                          % (pid, seen))
            time.sleep(0.5)
        self.addDetail("policy-rows-seen", content.text_content(
            "\n".join(repr(c) for c in seen)))
        self.assertEqual("0", cells["Pending"])
        self.assertEqual("0", cells["Failed"])
        self.assertEqual("Manual", cells["Mode"])
        self.assertEqual("30", cells["RPO Target (min)"])
        self.shot(page, "20-policies-synced")
        [image] = self.http("alice", "GET", "/v1/policies/%s/images"
                            % pid).json()["images"]
        self.assertEqual((source["id"], "replicated"),
                         (image["image_id"], image["state"]))
        migration = self.rest_show(image["migration_id"])
        self.assertEqual("complete", migration["state"])
        self.assertEqual(source["os_hash_value"], self.peer_image(
            migration["peer_image_id"])["os_hash_value"])

        # The detail page: the policy, its image with its migration, and
        # no drill action (cloud A holds the sources: role primary).
        page.locator("#%s a[href*='%s']" % (row, pid)).first.click()
        page.wait_for_url(lambda url: url.endswith("%s%s/" % (POLICIES,
                                                              pid)))
        page.locator("table#images").wait_for()
        self.shot(page, "21-policy-detail")

        def field(key):
            return page.locator("dd[data-field='%s']" % key).inner_text(
            ).strip()

        self.assertEqual("OK", field("rpo_state"))
        self.assertEqual("Primary", field("role"))
        self.assertEqual(self.b.agent_name, field("peer"))
        image_row = page.locator("#images__row__%s" % source["id"])
        self.assertIn("Replicated", image_row.inner_text())
        self.assertEqual(1, image_row.locator(
            "a[href$='/dtn_migrations/%s/']" % image["migration_id"]).count())
        self.assertEqual(1, page.locator(
            "#policies__row_%s__action_sync" % pid).count())
        self.assertEqual(0, page.locator("[id$='__action_drill']").count())
        self.assertReadable(page)

        # rita, a reader: the same table and page, and nothing to press.
        page = self.goto("rita", POLICIES)
        page.locator("#" + row).wait_for()
        for suffix in POLICY_ACTION_IDS:
            self.assertEqual(0, page.locator("[id$='%s']" % suffix).count(),
                             suffix)
        self.shot(page, "22-reader-policies")
        page = self.goto("rita", "%s%s/" % (POLICIES, pid))
        page.locator("table#images").wait_for()
        self.assertEqual(0, page.locator("[id*='__action_']").count())
        self.assertReadable(page)

        # alice deletes it (after the confirmation); the replica stays.
        page = self.goto("alice", POLICIES)
        self.click_row_action(page, "policies", pid, "delete")
        self.confirm(page)
        page.wait_for_selector(".messages .alert-success")
        self.assertEqual(0, page.locator("#" + row).count())
        self.assertEqual(404, self.http("alice", "GET", "/v1/policies/%s"
                                        % pid).status_code)
        self.assertEqual("active", self.peer_image(
            migration["peer_image_id"])["status"])

    def test_panel_hidden_without_service(self):
        # The catalog without dtn-migration (for the tokens issued from
        # now on): a new login sees no panel, and no Images action.
        image = self.upload(1 * MiB, persona="bob", name="dash-noservice")
        api_server = self.a.api
        self.a.keystone.register_endpoint(
            devcloud_api.SERVICE_TYPE, devcloud_api.SERVICE_NAME,
            api_server.endpoint, api_server.region, interfaces=())
        self.addCleanup(api_server.register_endpoint)
        page = self.browser.login("bob")
        self.addCleanup(page.context.close)
        page.goto(self.horizon.endpoint + "/project/")
        self.shot(page, "16-no-service")
        self.assertEqual(0, page.locator(
            "a[href*='/dtn_migrations/'], a[href*='/dtn_peers/']").count())
        self.assertNotIn("Disaster Recovery", page.locator(
            "#sidebar").inner_text())
        page.goto(self.horizon.endpoint + INDEX)
        self.assertEqual(0, page.locator("table#migrations").count())
        self.assertReadable(page)
        page.goto(self.horizon.endpoint + IMAGES)
        page.locator("#images__row__%s" % image["id"]).wait_for()
        self.assertEqual(0, page.locator(
            "[id$='__action_dtn_migrate']").count())
