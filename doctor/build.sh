#!/usr/bin/env bash
# Build bundle-doctor.exe:  doctor/build.sh OUT_DIR   ->  OUT_DIR/bundle-doctor.exe
#
# A native x64 console program that imports only DLLs every Windows 10 has: KERNEL32, ADVAPI32
# (registry), bcrypt (SHA-256), VERSION (FileVersion) and msvcrt (mingw-w64's default C
# runtime, a system DLL since Windows 95; never the VC++ runtime or the UCRT). -static links
# libgcc in, so no libgcc_s/libwinpthread DLL either. Check with
#   x86_64-w64-mingw32-objdump -p OUT_DIR/bundle-doctor.exe | grep 'DLL Name'
#
# Reproducible like tests/fixtures/standins/build.sh: no time stamp (-Wl,--no-insert-timestamp),
# no symbols or paths (-s; the sources are compiled from this folder with relative names), a
# fixed image base (--disable-auto-image-base), LC_ALL=C TZ=UTC. Two builds into two folders
# give the same bytes (tests/test_doctor.py checks it).
# Needs mingw-w64 (x86_64-w64-mingw32-gcc and -windres; Debian 12 package mingw-w64).
set -euo pipefail
export LC_ALL=C TZ=UTC
unset SOURCE_DATE_EPOCH || true

if [[ $# -ne 1 ]]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cross=x86_64-w64-mingw32-
version="$(sed -n 's/^#define DOCTOR_VERSION "\([0-9.]*\)"$/\1/p' "$here/doctor.h")"
IFS=. read -r major minor patch <<<"$version"
# __USE_MINGW_ANSI_STDIO: mingw's own printf family (C99 %zu/%llu), linked in statically.
CFLAGS=(-std=gnu11 -D__USE_MINGW_ANSI_STDIO=1 -O2 -s -static -municode -Wall -Wextra -Werror
    -ffile-prefix-map="$here"=. -Wl,--no-insert-timestamp -Wl,--disable-auto-image-base)
LIBS=(-lbcrypt -lversion -ladvapi32)

cd "$here" # relative source names: nothing of the build folder ends up in the exe
"${cross}windres" -D "FILEVER=$major,$minor,$patch,0" -O coff -i version.rc -o "$work/version.res"
# Written under a temporary name and renamed, so OUT_DIR never holds half a file.
"${cross}gcc" "${CFLAGS[@]}" -o "$work/bundle-doctor.exe" bundle-doctor.c checks.c data.c findings.c machine.c packs.c text.c \
    "$work/version.res" "${LIBS[@]}"
chmod 0755 "$work/bundle-doctor.exe"
mv "$work/bundle-doctor.exe" "$out/bundle-doctor.exe"
echo "built $out/bundle-doctor.exe"
