"""openstack dtn peer list|show, against the fake API."""

import json

from osc_lib import exceptions

from dtn_migrate.osc.v1 import peers
from tests.unit.client import fakeapi
from tests.unit.osc import base


class TestPeers(base.CommandTestCase):

    def setUp(self):
        super().setUp()
        self.api.peers["cloud-c"] = fakeapi.peer(
            "cloud-c", reachable=False, rtt_ms=None, last_throughput=None,
            error="connection refused")

    def test_list_table(self):
        status, out = self.run_command(peers.ListPeer, [])
        self.assertEqual(0, status)
        lines = out.splitlines()
        self.assertIn("| Name", lines[1])
        self.assertIn("RTT (ms)", lines[1])
        row = [line for line in lines if "cloud-b" in line][0]
        self.assertIn("1.1 GiB/s", row)
        self.assertIn("connection refused",
                      [line for line in lines if "cloud-c" in line][0])

    def test_unset_values_are_blank_in_tables(self):
        self.api.peers["cloud-c"].update(last_transfer_at=None, port=None)
        for cls, argv in ((peers.ListPeer, []), (peers.ShowPeer, ["cloud-c"]),
                          (peers.ShowPeer, ["cloud-b"])):
            _, out = self.run_command(cls, argv)
            self.assertNotIn("None", out)
        _, out = self.run_command(peers.ShowPeer, ["cloud-c"])
        rows = dict((cells[1].strip(), cells[2].strip())
                    for cells in (line.split("|") for line in
                                  out.splitlines() if line.startswith("|")))
        self.assertEqual(("", "", "", ""),
                         (rows["port"], rows["rtt_ms"],
                          rows["last_throughput"], rows["last_transfer_at"]))
        # Still null in json.
        _, out = self.run_command(peers.ShowPeer, ["cloud-c", "-f", "json"])
        self.assertEqual((None, None), (json.loads(out)["rtt_ms"],
                                        json.loads(out)["port"]))

    def test_blank_cells_sort_last(self):
        self.api.peers["cloud-a"] = fakeapi.peer("cloud-a", rtt_ms=2.0)
        for direction, names in (("asc", ["cloud-b", "cloud-a", "cloud-c"]),
                                 ("desc", ["cloud-c", "cloud-a", "cloud-b"])):
            _, out = self.run_command(peers.ListPeer, [
                "-f", "value", "-c", "Name", "--sort-column", "RTT (ms)",
                "--sort-" + ("ascending" if direction == "asc"
                             else "descending")])
            self.assertEqual(names, out.split())

    def test_list_json(self):
        _, out = self.run_command(peers.ListPeer, ["-f", "json"])
        rows = json.loads(out)
        self.assertEqual(["cloud-b", "cloud-c"], [r["Name"] for r in rows])
        self.assertEqual((True, 0.4, 1.2e9),
                         (rows[0]["Reachable"], rows[0]["RTT (ms)"],
                          rows[0]["Last Throughput"]))
        self.assertEqual((False, None), (rows[1]["Reachable"],
                                         rows[1]["RTT (ms)"]))

    def test_list_csv_and_value(self):
        _, out = self.run_command(peers.ListPeer,
                                  ["-f", "csv", "-c", "Name", "-c", "Port"])
        self.assertEqual(['"Name","Port"', '"cloud-b",47000',
                          '"cloud-c",47000'], out.splitlines())
        _, out = self.run_command(peers.ListPeer,
                                  ["-f", "value", "-c", "Name"])
        self.assertEqual(["cloud-b", "cloud-c"], out.split())

    def test_show_yaml(self):
        _, out = self.run_command(peers.ShowPeer,
                                  ["cloud-c", "-f", "yaml"])
        self.assertIn("reachable: false", out.splitlines())
        self.assertIn("error: connection refused", out.splitlines())
        self.assertEqual("/v1/peers/cloud-c", self.api.requests[-1]["path"])

    def test_show_unknown(self):
        exc = self.assertRaises(exceptions.CommandError, self.run_command,
                                peers.ShowPeer, ["nope"])
        self.assertEqual("Unknown peer DTN nope (HTTP 404)", str(exc))
