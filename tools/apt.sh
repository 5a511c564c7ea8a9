# shellcheck shell=bash
# Sourced by the bootstrap scripts: apt_ensure TAG PACKAGE... installs the
# Debian packages that are missing, quietly; TAG prefixes its message.
apt_ensure() {
  local tag=$1 missing="" p sudo=""
  shift
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" \
      || missing="$missing $p"
  done
  [ -n "$missing" ] || return 0
  echo "$tag: installing$missing"
  # Another apt (unattended-upgrades on a fresh machine) is waited for.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 \
    update -qq
  # shellcheck disable=SC2086
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 \
    install -y -qq \
    --no-install-recommends $missing >/dev/null
}
