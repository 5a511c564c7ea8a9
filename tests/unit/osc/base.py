"""Running the ``openstack dtn`` command classes against the fake API.

The command's ``client_manager.dtn`` is the real client, on a
keystoneauth1 session, talking HTTP to tests.unit.client.fakeapi.
"""

import io
import json
import types

import fixtures

from dtn_migrate import client
from tests.unit.client import fakeapi
from tests.unit.client import test_client
from tests.unit import testcase


class Stream(io.StringIO):
    """A text stream that says whether it is a terminal."""

    def __init__(self, tty=False):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


class FakeImages:
    """The part of openstacksdk's image proxy the commands use."""

    def __init__(self, images):
        self.images = images            # name -> id
        self.asked = []

    def find_image(self, name_or_id, ignore_missing=True):
        self.asked.append(name_or_id)
        matches = [i for n, i in self.images.items()
                   if name_or_id in (n, i)]
        if len(matches) == 1:
            return types.SimpleNamespace(id=matches[0])
        if matches:
            raise LookupError("More than one image is named %s"
                              % name_or_id)
        if ignore_missing:
            return None
        raise LookupError("No Image found for %s" % name_or_id)


class CommandTestCase(testcase.TestCase):

    def setUp(self):
        super().setUp()
        self.api = self.useFixture(fakeapi.FakeAPI())
        self.api.peers["cloud-b"] = fakeapi.peer("cloud-b")
        self.images = FakeImages({"cirros": "1" * 32})
        self.app = types.SimpleNamespace(
            stdout=Stream(), stderr=Stream(), stdin=io.StringIO(),
            options=types.SimpleNamespace(debug=False),
            client_manager=types.SimpleNamespace(
                dtn=client.Client(test_client.token_session(self.api.url)),
                image=self.images))

    def run_command(self, cls, argv):
        """(exit status, stdout) of the command class with ``argv``."""
        self.app.stdout.seek(0)
        self.app.stdout.truncate()
        cmd = cls(self.app, None)
        parsed = cmd.get_parser("openstack dtn").parse_args(argv)
        return cmd.run(parsed), self.app.stdout.getvalue()

    def usage_error(self, cls, argv):
        """The message of argparse's usage error for ``argv``."""
        err = self.useFixture(fixtures.MonkeyPatch("sys.stderr",
                                                   io.StringIO())).new_value
        self.assertRaises(SystemExit, self.run_command, cls, argv)
        return err.getvalue()

    def posted(self):
        return [json.loads(r["body"]) for r in self.api.requests
                if r["method"] == "POST"]
