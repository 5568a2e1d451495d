# Sourced by scripts/test and scripts/run: a venv with everything, and an in-place build.
kcodec_setup() {
    local extras="$1"
    VENV="${KCODEC_VENV:-.venv}"
    local py="${PYTHON:-python3}"
    if [ ! -x "$VENV/bin/python" ]; then
        echo "kcodec: creating $VENV" >&2
        "$py" -m venv "$VENV"
    fi
    local pip=("$VENV/bin/python" -m pip -q --disable-pip-version-check)
    local stamp="$VENV/.kcodec-deps-$extras"
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "kcodec: installing build and $extras dependencies" >&2
        "${pip[@]}" install --upgrade pip
        "${pip[@]}" install "setuptools>=77" wheel "Cython>=3.0.8"
        # Editable install: compiles the extension in place (unless KCODEC_NO_EXTENSIONS)
        # and installs the runtime and $extras dependencies.
        "${pip[@]}" install --no-build-isolation -e ".[$extras]"
        touch "$stamp"
    fi
    if [ -z "${KCODEC_NO_EXTENSIONS:-}" ] || [ "${KCODEC_NO_EXTENSIONS}" = "0" ]; then
        echo "kcodec: compiling the extension" >&2
        "$VENV/bin/python" setup.py -q build_ext --inplace -j 2 >/dev/null
    fi
}
