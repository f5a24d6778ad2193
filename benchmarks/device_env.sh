# Sourced by the device-session scripts (host_session.sh, lab5_session.sh): the carried wheels
# installed into /tmp/site and put on PYTHONPATH with this tree. The device image has torch and
# numba-cuda but no Jupyter (carry .whl-nb, the wheels of CONTRIBUTING.md "Record on the
# device machine") and a numpy too new for numba-cuda 0.30.4 (carry .whl).
: "${COURSE_COMMIT:?set COURSE_COMMIT to the commit of this tree (there is no .git here)}"
# declare -g, not export: `COURSE_COMMIT=<sha> source ...` gives bash a temporary variable that
# an export inside the sourced file does not keep, so the python run after it fell back to the
# device copy's git, which named another commit (records/tests/README.md, eleventh session)
declare -gx COURSE_COMMIT="$COURSE_COMMIT"
SITE=/tmp/site
mkdir -p "$SITE"
if ls .whl-nb/*.whl >/dev/null 2>&1; then  # the Jupyter stack a recording needs
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl-nb/*.whl || exit 1
fi
if ls .whl/numpy-2.4*.whl >/dev/null 2>&1; then  # numpy < 2.5 for numba-cuda 0.30.4
  python3 -m zipfile -e .whl/numpy-2.4*.whl "$SITE" >/dev/null || exit 1
fi
export PYTHONPATH=$SITE:$PWD  # sourced in the tree's root: python3 -m benchmarks.<name> finds it
python3 -c "import nbclient, ipykernel" 2>/dev/null \
  || echo "WARNING: no Jupyter stack (carry .whl-nb): recording chapters will fail"
# the GPU's tag in the names of what a session writes (decode_rows_h100.json on an H100,
# decode_rows_h200.json on an H200), so a file never names a GPU it was not measured on
GPU_TAG=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 \
  | grep -oiE "[A-Z][0-9]{1,3}" | head -1 | tr 'A-Z' 'a-z')
export GPU_TAG=${GPU_TAG:-gpu}
echo "GPU tag: $GPU_TAG"
