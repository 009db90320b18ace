#!/usr/bin/env bash
# Install DyNet (PyPI dyNET==2.1.2) from source for `acrobat bench` (optional baseline).
#
# PyPI has no wheel for Python 3.11, and the sdist does not build as is. This
# script makes it build (about 14 minutes on 2 cores):
#   (a) Eigen from Debian (libeigen3-dev), EIGEN3_INCLUDE_DIR=/usr/include/eigen3
#       (setup.py would otherwise download Eigen from GitHub);
#   (b) cython<3 installed and pip run with --no-build-isolation (DyNet's
#       .pyx files do not compile with Cython 3);
#   (c) setup.py patched to copy LICENSE.txt into the build folder it chdirs
#       into before bdist_wheel looks for it.
#
# Usage: scripts/install-dynet.sh            (root: installs libeigen3-dev with apt-get)
#        MAKE_FLAGS="-j 4" scripts/install-dynet.sh
# Check: python -c "import dynet"
set -euo pipefail

PYTHON="${PYTHON:-python}"
VERSION=2.1.2

if [ ! -d /usr/include/eigen3 ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libeigen3-dev cmake g++ make
    else
        echo "error: /usr/include/eigen3 missing; install Debian's libeigen3-dev (needs root)" >&2
        exit 1
    fi
fi
for tool in cmake make g++; do
    command -v "$tool" >/dev/null || { echo "error: $tool not found (apt-get install cmake make g++)" >&2; exit 1; }
done

"$PYTHON" -m pip install -q "cython<3" wheel setuptools numpy

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m pip download -q "dyNET==$VERSION" --no-deps --no-binary :all: -d "$work"
tar -xzf "$work/dyNET-$VERSION.tar.gz" -C "$work"
src="$work/dyNET-$VERSION"

# (c) bdist_wheel runs with the working directory inside BUILD_DIR/python,
# where LICENSE.txt is missing: copy it there in build_py.
"$PYTHON" - "$src/setup.py" <<'PY'
import sys
path = sys.argv[1]
text = open(path, encoding="utf-8-sig").read()
old = '        os.chdir(os.path.join(BUILD_DIR, "python"))\n'
new = old + '        copy(os.path.join(SCRIPT_DIR, "LICENSE.txt"), ".")\n'
if new not in text:
    assert old in text, "setup.py changed: build_py chdir not found"
    text = text.replace(old, new, 1)
open(path, "w", encoding="utf-8").write(text)
PY

export EIGEN3_INCLUDE_DIR=/usr/include/eigen3
export MAKE_FLAGS="${MAKE_FLAGS:--j $(nproc)}"
"$PYTHON" -m pip install --no-build-isolation --no-deps "$src"
"$PYTHON" -c "import dynet; print('dynet', dynet.__version__ if hasattr(dynet, '__version__') else '$VERSION', 'installed')"
