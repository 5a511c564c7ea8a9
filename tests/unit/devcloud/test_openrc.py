"""The playground's openrc files and usage text (devcloud.openrc)."""

import os
import subprocess
from unittest import mock

import fixtures

from devcloud import openrc

from tests.unit import testcase


class TestOpenrc(testcase.TestCase):

    def test_sourced_by_a_shell(self):
        env = {"OS_USERNAME": "alice", "OS_PASSWORD": "it's $secret",
               "OS_AUTH_URL": "http://127.0.0.1:5000/v3", "HOME": "/x"}
        text = openrc.openrc_text("a", "alice", env, "dtn-b", "/v/bin")
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, "rc")
        with open(path, "w") as f:
            f.write(text)
        out = subprocess.run(
            ["bash", "-c", '. %s && printf "%%s\\n" "$OS_USERNAME" '
             '"$OS_PASSWORD" "$OS_AUTH_URL" "$DTN_PEER" "${PATH%%%%:*}" '
             '"${HOME-unset}"' % path],
            env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
            check=True).stdout.splitlines()
        self.assertEqual(["alice", "it's $secret",
                          "http://127.0.0.1:5000/v3", "dtn-b", "/v/bin",
                          "unset"], out)
        self.assertIn("cloud a as alice (member of project demo)", text)

    def test_usage_names_every_openrc_and_horizon(self):
        cloud = mock.Mock(agent_name="dtn-a")
        cloud.name = "a"
        peer = mock.Mock(agent_name="dtn-b")
        peer.name = "b"
        horizons = [mock.Mock(endpoint="http://h-a"),
                    mock.Mock(endpoint="http://h-b")]
        text = openrc.usage("/rc", (cloud, peer), horizons,
                            [{"name": "img"}])
        self.assertIn(". /rc/a-alice.openrc", text)
        self.assertIn("openstack dtn migrate img --peer \"$DTN_PEER\" "
                      "--wait", text)
        for persona in openrc.ORDER:
            self.assertIn("a-%s.openrc, b-%s.openrc" % (persona, persona),
                          text)
        self.assertIn("cloud a: http://h-a/", text)
        self.assertIn("alice / devcloud-persona", text)
        self.assertIn("admin / devcloud-admin", text)
