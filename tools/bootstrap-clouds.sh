#!/usr/bin/env bash
# Prepare real local clouds for devcloud: a virtualenv apart from
# the project's with Glance, Keystone and uwsgi from PyPI, plus qemu-img.
# Idempotent and quiet: a stamp file records what was installed.
# Environment: DTN_CLOUDS_VENV (default ~/.cache/dtn-migrate/venv-clouds,
# outside the work tree so that flake8 and git never walk it), DTN_VENV
# (project venv, default <top>/.venv; gets the client libraries).
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLOUDS=${DTN_CLOUDS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dtn-migrate/venv-clouds}
VENV=${DTN_VENV:-$TOP/.venv}

# Servers, pinned to the releases the harness was written against.
SERVER_PIP="glance==33.0.0 keystone==30.0.0 uwsgi==2.0.31"
# Clients the harness and the tests import from the project's venv.
CLIENT_PIP="python-glanceclient>=4.0.0 keystoneauth1>=5.0.0"
APT_PACKAGES="python3-venv python3-dev gcc qemu-utils"

# pip, without the notes about configured package locations that are absent.
pip_q() {
  "$@" 2>&1 | { grep -v "^WARNING: Location '.*' is ignored" || true; }
}

# shellcheck source=tools/apt.sh
source "$TOP/tools/apt.sh"
# shellcheck disable=SC2086
apt_ensure bootstrap-clouds $APT_PACKAGES

stamp="$CLOUDS/.dtn-clouds-deps"
want=$(echo "$SERVER_PIP" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "bootstrap-clouds: installing $SERVER_PIP into $CLOUDS"
  # No system site packages: Glance and Keystone bring their own pins.
  [ -x "$CLOUDS/bin/python" ] || /usr/bin/python3 -m venv "$CLOUDS"
  echo "*" > "$CLOUDS/.gitignore"
  pip_q "$CLOUDS/bin/pip" install -q -U pip >/dev/null
  # shellcheck disable=SC2086
  pip_q "$CLOUDS/bin/pip" install -q $SERVER_PIP
  echo "$want" > "$stamp"
fi

if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c \
    "import glanceclient, keystoneauth1" 2>/dev/null; then
  echo "bootstrap-clouds: installing $CLIENT_PIP into $VENV"
  # shellcheck disable=SC2086
  pip_q "$VENV/bin/pip" install -q $CLIENT_PIP
fi
