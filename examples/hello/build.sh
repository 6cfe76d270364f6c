#!/usr/bin/env bash
# Build hello.exe (x64) reproducibly: build.sh [OUT_DIR]   (default: this script's folder)
#
# The checked-in hello.exe is the output of this script; tests/test_mingw_fixtures.py rebuilds
# it and requires the same bytes, so every input that could vary between runs is pinned:
#   -Wl,--no-insert-timestamp  the PE header's TimeDateStamp would otherwise be "now"
#   -s                         no symbols/debug info (they would record build paths)
#   -Wl,--disable-auto-image-base  no ImageBase derived from the output path (matters for
#                              DLLs; kept so this link matches tests/fixtures/build.sh)
#   -static                    no libgcc_s / libwinpthread DLLs: imports are KERNEL32 + msvcrt
#                              + onnxruntime.dll only, whichever gcc thread model is installed
#   LC_ALL=C, TZ=UTC           tool messages and anything locale/time dependent fixed
# Byte-identical output also needs the same toolchain (built with Debian 12 mingw-w64:
# gcc 12.2.0, binutils 2.40, mingw-w64 10.0.0); a different version may change the bytes.
set -euo pipefail
export LC_ALL=C TZ=UTC
unset SOURCE_DATE_EPOCH || true

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

cross=x86_64-w64-mingw32-

# Intermediates live in a private temp dir (removed on any exit); the exe is first written
# next to its destination and then renamed, so OUT_DIR never holds a half-written hello.exe.
work="$(mktemp -d)"
staged=""
cleanup() { rm -rf "$work"; [[ -z "$staged" ]] || rm -f "$staged"; }
trap cleanup EXIT

# Import library for onnxruntime.dll straight from the .def: no ORT download needed to link.
# It is only an intermediate, but keep it deterministic anyway.
"${cross}dlltool" --deterministic-libraries --input-def "$here/onnxruntime.def" \
    --dllname onnxruntime.dll --output-lib "$work/libonnxruntime.a"

# The version resource (hello.rc): FileVersion 1.0.0.0, read by bundle as the app's version.
"${cross}windres" -O coff -i "$here/hello.rc" -o "$work/hello.res.o"

staged="$(mktemp "$out/.hello.exe.XXXXXX")"
# -municode: hello.c's entry point is wmain (wide argv).
"${cross}gcc" -O2 -s -static -municode -Wall -Wextra \
    -Wl,--no-insert-timestamp -Wl,--disable-auto-image-base \
    -o "$staged" "$here/hello.c" "$work/hello.res.o" "$work/libonnxruntime.a"
chmod 0644 "$staged"
mv -f "$staged" "$out/hello.exe"
staged=""
echo "built $out/hello.exe"
