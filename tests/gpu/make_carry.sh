#!/usr/bin/env bash
# Packs the Debian libraries and headers the GPU machine lacks (OpenBLAS, LAPACKE, minizip, zlib,
# Criterion and the libraries Criterion needs) into .carry/deps.tar.xz for tests/gpu/run.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=$(mktemp -d); D=$W/deps; mkdir -p $D/lib $D/include/minizip
for l in libopenblas.so.0 liblapacke.so.3 liblapack.so.3 libblas.so.3 libgfortran.so.5 libquadmath.so.0 \
         libtmglib.so.3 libminizip.so.1 libz.so.1 libcriterion.so.3 libgit2.so.1.5 libnanomsg.so.5 \
         libmbedtls.so.14 libmbedx509.so.1 libmbedcrypto.so.7 libhttp_parser.so.2.9 libssh2.so.1 \
         libffi.so.8 libgssapi_krb5.so.2 libkrb5.so.3 libk5crypto.so.3 libkrb5support.so.0 \
         libcom_err.so.2 libkeyutils.so.1 libpcre2-8.so.0; do
  cp -L "$(ls /usr/lib/x86_64-linux-gnu/$l /lib/x86_64-linux-gnu/$l 2>/dev/null | head -1)" $D/lib/
done
(cd $D/lib && for l in openblas lapacke minizip criterion z; do ln -sf lib$l.so.* lib$l.so; done)
cp -r /usr/include/criterion $D/include/
cp /usr/include/lapack*.h /usr/include/zlib.h /usr/include/zconf.h $D/include/
cp /usr/include/minizip/*.h $D/include/minizip/
cp -L /usr/include/x86_64-linux-gnu/openblas-pthread/*.h $D/include/
mkdir -p .carry && tar cJf .carry/deps.tar.xz -C $W deps && rm -rf $W
ls -la .carry/deps.tar.xz
