#!/usr/bin/env bash
# Installs Wine with 32-bit support (wine64 + wine32:i386, plus xvfb/xauth for a screen) on
# Debian 12, for 32-bit Windows programs such as the Inno Setup compiler ISCC.exe.
# Idempotent; run as root.
#
# Origin: a copy of the team's shared tools/install-wine32.sh (see docs/field-notes.md#tools), owned by
# this project from here on. Changes against the copy: the unmet i386 dependencies are read
# from a verbose simulated install (`-qq` hides apt's "unmet dependencies" list, so the pinning
# step found nothing to pin), and commented-out URLs in the sources lists are not fetched.
#
# Why this is not a one-liner: the package mirror sometimes serves an i386 security index that
# does not match its signed Release file ("File has unexpected size ... Mirror sync in
# progress?"). apt then ignores it, and i386 libraries can no longer match the newer amd64
# security versions already installed (Multi-Arch: same packages need equal versions), so
# `apt-get install wine32:i386` fails with "held broken packages". The steps below recover:
#   1. take the served i386 security index as it is (it is usually only a little older);
#   2. where a dependency still cannot be matched, pin the i386 package to the exact version of
#      its installed amd64 twin when that version is available for i386.
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=(wine64 wine32:i386 libwine:i386 xvfb xauth)
log=/tmp/install-wine32.log
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
if have wine32:i386 && have wine64 && have xvfb && have xauth; then
  echo "wine32: already installed"
  exit 0
fi

dpkg --add-architecture i386
apt-get update -qq >/dev/null 2>&1 || true
# try [PINS...]: install; on failure, leave apt's explanation (the unmet dependencies) in $log.
try() {
  apt-get install -y -qq "${pkgs[@]}" "$@" >"$log" 2>&1 && return 0
  apt-get install -s "${pkgs[@]}" "$@" >>"$log" 2>&1
  return 1
}
try && { echo "wine32: installed"; exit 0; }

# 1. The i386 security index, as served, placed where apt reads its lists.
lists=/var/lib/apt/lists
for src in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [[ -f $src ]] && grep -v '^[[:space:]]*#' "$src" | grep -oE 'https?://[^ ]+debian-security'
done | sort -u | while read -r base; do
  host=${base#*://}; name="${host//\//_}_dists_bookworm-security_main_binary-i386_Packages"
  [[ -s $lists/$name ]] && continue
  if curl -fsS "$base/dists/bookworm-security/main/binary-i386/Packages.xz" -o /tmp/i386-sec.xz; then
    xz -dc /tmp/i386-sec.xz >"$lists/$name" && echo "wine32: using the i386 security index as served"
  fi
done
try && { echo "wine32: installed"; exit 0; }

# 2. Pin i386 twins to the installed amd64 versions, a few rounds (pinning one package can
#    reveal the next, e.g. libsasl2-2 then libsasl2-modules-db).
pins=()
for _ in 1 2 3 4 5 6; do
  mapfile -t broken < <(grep -oE '[a-z0-9][a-z0-9.+-]*:i386' "$log" | sort -u)
  added=0
  for p in "${broken[@]}"; do
    base=${p%:i386}
    v=$(dpkg-query -W -f='${Version}' "$base:amd64" 2>/dev/null || dpkg-query -W -f='${Version}' "$base" 2>/dev/null) || continue
    [[ -z $v ]] && continue
    apt-cache madison "$base:i386" 2>/dev/null | awk -F'|' '{gsub(/ /,"",$2); print $2}' | grep -qxF "$v" || continue
    [[ " ${pins[*]} " == *" $p=$v "* ]] && continue
    pins+=("$p=$v"); added=1
  done
  try "${pins[@]}" && { echo "wine32: installed (pinned ${pins[*]})"; exit 0; }
  ((added)) || break
done
echo "wine32: could not be installed; see $log" >&2
grep -A20 'unmet dependencies' "$log" >&2 || tail -20 "$log" >&2
exit 1
