#!/usr/bin/env bash
# Build llama-cpp-python's wheel once per machine and keep it in a wheel cache.
# llama-cpp-python has no prebuilt CPU wheel on PyPI: pip compiles llama.cpp from source (6-10 minutes
# on 2 cores). `make setup` then installs from the cache (seconds). The wheel is built for this
# machine's CPU (llama.cpp's native flags), so the cache lives in the user's home, not in the repository.
# The source archive is kept too, in <cache dir>/sdist/ (a subfolder: pip's --find-links does not look
# there): llama.cpp's convert_lora_to_gguf.py, which exports trained LoRA adapters
# (llm_planner/posttrain/export.py), is only in it, not in the wheel.
#   usage: scripts/cache_llama_wheel.sh <python> <version> <cache dir>
set -euo pipefail
PY="$1"; VERSION="$2"; CACHE="$3"
SDIST="$CACHE/sdist/llama_cpp_python-$VERSION.tar.gz"
mkdir -p "$CACHE/sdist"
if [ ! -f "$SDIST" ]; then
    echo "llama-cpp-python $VERSION: downloading the source archive into $CACHE/sdist (76 MB, once per machine)"
    "$PY" -m pip download --quiet --no-binary :all: --no-deps "llama-cpp-python==$VERSION" -d "$CACHE/sdist"
fi
if ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
    echo "llama-cpp-python $VERSION: using the cached wheel in $CACHE"
    exit 0
fi
echo "llama-cpp-python $VERSION: building llama.cpp from source, once per machine (6-10 min on 2 cores)..."
"$PY" -m pip wheel --quiet --no-deps "$SDIST" -w "$CACHE"
echo "llama-cpp-python $VERSION: wheel cached in $CACHE"
