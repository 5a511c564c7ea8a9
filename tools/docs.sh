#!/usr/bin/env bash
# Build the documentation as CI does: sphinx-build -W --keep-going, so
# that a warning (a broken reference, a missing page) fails the build.
# The build runs in a virtualenv of its own, from PyPI only (no system
# site packages): doc/requirements.txt, requirements.txt (the
# configuration, policy and CLI references import the project) and the
# project itself.  Idempotent and quiet: a stamp file records what was
# installed, and for which work tree (the project is installed editable:
# a virtualenv made for another clone would import that clone's code).
# Run by tools/test.
# Environment: DTN_DOCS_VENV (default ~/.cache/dtn-migrate/venv-docs,
# outside the work tree so that flake8 and git never walk it).
# Argument: the output directory (default build/docs/html, outside doc/:
# tox -e docs writes doc/build/html).
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DOCS=${DTN_DOCS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dtn-migrate/venv-docs}
OUT=${1:-$TOP/build/docs/html}

# pip, without the notes about configured package locations that are absent.
pip_q() {
  "$@" 2>&1 | { grep -v "^WARNING: Location '.*' is ignored" || true; }
}

stamp="$DOCS/.dtn-docs-deps"
want=$( { echo "$TOP"; cat "$TOP/doc/requirements.txt" \
  "$TOP/requirements.txt" "$TOP/setup.cfg"; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "docs: installing doc/requirements.txt into $DOCS"
  [ -x "$DOCS/bin/python" ] || /usr/bin/python3 -m venv "$DOCS"
  echo "*" > "$DOCS/.gitignore"
  pip_q "$DOCS/bin/pip" install -q -U pip >/dev/null 2>&1
  pip_q "$DOCS/bin/pip" install -q -r "$TOP/doc/requirements.txt" \
    -r "$TOP/requirements.txt"
  # The entry points the references read (oslo.config.opts,
  # oslo.policy.policies, openstack.dtn.v1); the requirements are above.
  pip_q "$DOCS/bin/pip" install -q --no-deps -e "$TOP"
  echo "$want" > "$stamp"
fi

cd "$TOP"
start=$SECONDS
# Python's warnings (eventlet's deprecation, when the references import
# oslo.service) are not the documentation's; sphinx's own warnings, a
# broken reference or a missing page, are errors (-W).
PYTHONWARNINGS=ignore \
  "$DOCS/bin/sphinx-build" -W --keep-going -q -b html doc/source "$OUT"
echo "docs: built in $((SECONDS - start)) s into ${OUT#"$TOP"/}"
