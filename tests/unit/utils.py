"""Helpers shared by unit tests."""

import os
import tempfile
import threading

from oslo_config import cfg

from dtn_migrate.common import polling


def conf_from_text(case, register_opts, text=''):
    """A fresh ConfigOpts with ``register_opts`` applied, loaded from a
    config file holding ``text`` (removed when ``case`` ends).
    """
    conf = cfg.ConfigOpts()
    register_opts(conf)
    fd, path = tempfile.mkstemp(suffix='.conf')
    case.addCleanup(os.unlink, path)
    with os.fdopen(fd, 'w') as f:
        f.write(text)
    conf(['--config-file', path], default_config_files=[])
    return conf


class FakeTime:
    """A clock that only sleeps move: ``monotonic`` and ``sleep`` for
    code that takes them as arguments (or has its own ``time`` module
    replaced); ``sleeps`` lists the pauses.
    """

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class Recorder:
    """A callable that records the arguments of every call, from any
    thread.
    """

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, *args):
        with self.lock:
            self.calls.append(args)


def wait_until(predicate, timeout=10, interval=0.02):
    """``predicate()``'s first true value, asked every ``interval``
    seconds for up to ``timeout``; its last, false, value after that.
    """
    return polling.poll(predicate, timeout, interval=interval)
