"""Install the plugin into a Horizon: copy its ``enabled`` files and its
settings snippet into Horizon's local directories.

::

    python -m dtn_migrate.dashboard.install [--openstack-dashboard DIR]
    python -m dtn_migrate.dashboard.install --uninstall

``DIR`` is the ``openstack_dashboard`` package directory (by default,
that of the importable ``openstack_dashboard``).  The files land in
``DIR/local/enabled/`` and ``DIR/local/local_settings.d/``.
"""

import argparse
import glob
import importlib.util
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ENABLED_DIR = os.path.join(HERE, "enabled")
SETTINGS_DIR = os.path.join(HERE, "local_settings.d")


def plugin_files():
    """(source, subdirectory of ``local``) of every file to install."""
    files = [(path, "enabled") for path in
             sorted(glob.glob(os.path.join(ENABLED_DIR, "_[0-9]*.py")))]
    files += [(path, "local_settings.d") for path in
              sorted(glob.glob(os.path.join(SETTINGS_DIR, "_[0-9]*.py")))]
    return files


def default_dashboard_dir():
    """The directory of the importable openstack_dashboard package."""
    spec = importlib.util.find_spec("openstack_dashboard")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("openstack_dashboard is not importable: give "
                         "--openstack-dashboard DIR")
    return list(spec.submodule_search_locations)[0]


def install(dashboard_dir, out=sys.stdout):
    """Copy the files; returns the paths written."""
    written = []
    for source, subdir in plugin_files():
        target_dir = os.path.join(dashboard_dir, "local", subdir)
        os.makedirs(target_dir, exist_ok=True)
        target = os.path.join(target_dir, os.path.basename(source))
        shutil.copyfile(source, target)
        written.append(target)
        out.write("installed %s\n" % target)
    return written


def uninstall(dashboard_dir, out=sys.stdout):
    """Remove the files (and their compiled copies); returns the paths
    removed.
    """
    removed = []
    for source, subdir in plugin_files():
        target_dir = os.path.join(dashboard_dir, "local", subdir)
        name = os.path.basename(source)
        target = os.path.join(target_dir, name)
        stem = os.path.splitext(name)[0]
        cached = glob.glob(os.path.join(target_dir, "__pycache__",
                                        stem + ".*.pyc"))
        for path in [target] + cached:
            if os.path.exists(path):
                os.remove(path)
                removed.append(path)
                out.write("removed %s\n" % path)
    return removed


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m dtn_migrate.dashboard.install",
        description="Enable the dtn-migrate panels in a Horizon.")
    parser.add_argument("--openstack-dashboard", metavar="DIR",
                        help="the openstack_dashboard package directory "
                             "(default: the importable one)")
    parser.add_argument("--uninstall", action="store_true",
                        help="remove the files instead")
    args = parser.parse_args(argv)
    dashboard_dir = args.openstack_dashboard or default_dashboard_dir()
    if not os.path.isdir(dashboard_dir):
        parser.error("no such directory: %s" % dashboard_dir)
    if args.uninstall:
        uninstall(dashboard_dir)
    else:
        install(dashboard_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
