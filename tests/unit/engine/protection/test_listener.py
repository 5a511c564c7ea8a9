"""dtn_migrate.engine.protection.listener: Glance's notifications."""

from unittest import mock

from oslo_config import cfg
import oslo_messaging as messaging

from dtn_migrate.conf import protection as protection_conf
from dtn_migrate.engine.protection import listener
from dtn_migrate import exception

from tests.unit import testcase

IMG = "11111111-2222-3333-4444-555555555555"
HANDLED = messaging.NotificationResult.HANDLED


class TestImageEndpoint(testcase.TestCase):
    def setUp(self):
        super().setUp()
        self.protection = mock.Mock()
        self.endpoint = listener.ImageEndpoint(self.protection)

    def info(self, event_type, payload):
        return self.endpoint.info({}, "image.localhost", event_type,
                                  payload, {"message_id": "m"})

    def test_activate_and_update(self):
        for event in ("image.activate", "image.update"):
            self.protection.reset_mock()
            self.assertEqual(HANDLED, self.info(event, {"id": IMG,
                                                        "name": "x"}))
            self.protection.image_changed.assert_called_once_with(IMG)
            self.protection.image_deleted.assert_not_called()

    def test_delete(self):
        self.assertEqual(HANDLED, self.info("image.delete", {"id": IMG}))
        self.protection.image_deleted.assert_called_once_with(IMG)
        self.protection.image_changed.assert_not_called()

    def test_bad_payload_ignored(self):
        for payload in (None, "x", [IMG], {}, {"id": None}, {"id": 5},
                        {"id": "x" * 65}):
            self.assertEqual(HANDLED, self.info("image.update", payload))
        self.assertEqual([], self.protection.mock_calls)

    def test_exceptions_swallowed(self):
        self.protection.image_changed.side_effect = \
            exception.DatabaseUnavailable(reason="away")
        self.assertEqual(HANDLED, self.info("image.update", {"id": IMG}))
        self.protection.image_deleted.side_effect = RuntimeError("boom")
        self.assertEqual(HANDLED, self.info("image.delete", {"id": IMG}))

    def test_filter(self):
        rule = listener.ImageEndpoint.filter_rule
        for event in listener.EVENTS:
            self.assertTrue(rule.match({}, "image.localhost", event, {},
                                       {}))
        for event in ("image.upload", "image.prepare", "image.send",
                      "image.activated", "xx.image.update"):
            self.assertFalse(rule.match({}, "image.localhost", event, {},
                                        {}))


class TestGetListener(testcase.TestCase):
    def test_targets_pool_and_endpoint(self):
        conf = cfg.ConfigOpts()
        protection_conf.register_opts(conf)
        conf([], project="dtn-migrate-test")
        conf.set_override("notification_topics", ["notifications", "n2"],
                          "protection")
        conf.set_override("glance_exchange", "images", "protection")
        protection = mock.Mock()
        transport = mock.Mock()
        with mock.patch.object(messaging, "get_notification_listener") as g:
            self.assertIs(g.return_value,
                          listener.get_listener(conf, transport, protection))
        (t, targets, endpoints), kwargs = g.call_args
        self.assertIs(transport, t)
        self.assertEqual([("notifications", "images"), ("n2", "images")],
                         [(x.topic, x.exchange) for x in targets])
        self.assertEqual(1, len(endpoints))
        self.assertIs(protection, endpoints[0].protection)
        self.assertEqual({"executor": "threading",
                          "pool": "dtn-migrate-engine"}, kwargs)
