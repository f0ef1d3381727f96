#!/bin/sh
# Build librdkafka's C benchmark client, rdkafka_performance, for benchmarks/compare.py's rdkperf rows.
#
#   benchmarks/build_rdkafka_performance.sh LIBRDKAFKA_SOURCE_DIR [OUTPUT]
#
# LIBRDKAFKA_SOURCE_DIR is a checkout of librdkafka's sources at the tag of the installed library
# (`pkg-config --modversion rdkafka`; Debian and Ubuntu ship the library and headers as librdkafka-dev).
# Only examples/rdkafka_performance.c is compiled, against the installed library; the checkout's own
# headers are used for the few internal helpers the example includes. OUTPUT defaults to
# ./rdkafka_performance. Then: python benchmarks/compare.py --rdkafka-performance OUTPUT
set -eu
src=${1:?usage: $0 LIBRDKAFKA_SOURCE_DIR [OUTPUT]}
out=${2:-./rdkafka_performance}
example="$src/examples/rdkafka_performance.c"
[ -f "$example" ] || { echo "no $example: not a librdkafka source checkout" >&2; exit 2; }
if ! pkg-config --exists rdkafka 2>/dev/null && [ ! -f /usr/include/librdkafka/rdkafka.h ]; then
    echo "librdkafka's headers and library are not installed (Debian/Ubuntu: librdkafka-dev)" >&2
    exit 2
fi
if pkg-config --exists rdkafka 2>/dev/null; then
    echo "installed librdkafka $(pkg-config --modversion rdkafka); the checkout should be at the same tag" >&2
fi
# The example's internal headers want the build configuration that ./configure writes.
if [ ! -f "$src/config.h" ]; then
    (cd "$src" && ./configure --disable-ssl --disable-gssapi --disable-zstd >/dev/null)
fi
cflags=$(pkg-config --cflags rdkafka 2>/dev/null || echo "-I/usr/include/librdkafka")
libs=$(pkg-config --libs rdkafka 2>/dev/null || echo "-lrdkafka")
# shellcheck disable=SC2086
${CC:-cc} -O2 -I "$src/src" -I "$src" $cflags "$example" -o "$out" $libs -lpthread -lm
echo "built $out"
