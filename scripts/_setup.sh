# Sourced by scripts/test and scripts/run: a venv with everything, and an in-place build.
# Sets VENV (the venv directory) and VPY (its python). Works under bash on Linux, macOS and
# Windows (Git Bash: the venv's programs are in Scripts/ there, not bin/).

# Same reading as setup.py and kcodec/_impl.py: "", "0", "false", "no", "off" mean off.
kcodec_truthy() {
    local v
    v="$(printf '%s' "${1:-}" | tr '[:upper:]' '[:lower:]' | tr -d '[:space:]')"
    case "$v" in "" | 0 | false | no | off) return 1 ;; *) return 0 ;; esac
}

# pip, quiet: -q keeps its progress off, and the lines the machine's pip configuration makes
# it print for every package its local indexes lack ("WARNING: Location '...' is ignored:
# it is neither a file nor a directory") are dropped. Everything else, and pip's exit
# status, pass through.
kcodec_pip() {
    local rc=0
    { "$VPY" -m pip -q --disable-pip-version-check "$@" 2>&1 1>&3 3>&- \
        | { grep -v "^WARNING: Location '.*' is ignored" || true; } >&2; } 3>&1 || rc=$?
    return "$rc"
}

# VENV and VPY, creating the venv if it is missing.
kcodec_venv() {
    VENV="${KCODEC_VENV:-.venv}"
    if [ ! -d "$VENV" ]; then
        echo "kcodec: creating $VENV" >&2
        "${PYTHON:-python3}" -m venv "$VENV"
    fi
    if [ -x "$VENV/bin/python" ]; then
        VPY="$VENV/bin/python"
    else
        VPY="$VENV/Scripts/python.exe"
    fi
}

kcodec_setup() {
    local extras="$1"
    kcodec_venv
    local stamp="$VENV/.kcodec-deps-$extras"
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "kcodec: installing build and $extras dependencies" >&2
        kcodec_pip install --upgrade pip
        kcodec_pip install "setuptools>=77" "Cython>=3.1"
        # Editable install: compiles the extension in place (unless KCODEC_NO_EXTENSIONS)
        # and installs the runtime and $extras dependencies.
        # (setuptools warns about a package folder in the working directory: that folder is
        # the editable install's source, on purpose.)
        PYTHONWARNINGS="ignore:Editable installation" \
            kcodec_pip install --no-build-isolation -e ".[$extras]"
        touch "$stamp"
    fi
    if [ "$extras" = test ]; then
        kcodec_stunnel
    fi
    if ! kcodec_truthy "${KCODEC_NO_EXTENSIONS:-}"; then
        echo "kcodec: compiling the extension" >&2
        KCODEC_BUILD_JOBS="${KCODEC_BUILD_JOBS:-2}" "$VPY" setup.py -q build_ext --inplace >/dev/null
    fi
}

# stunnel (Debian's stunnel4): the independent TLS terminator of the TLS tests. Installed
# with apt-get where that works without asking (root on Debian/Ubuntu); elsewhere the TLS
# tests skip, saying that stunnel is missing.
kcodec_stunnel() {
    if command -v stunnel4 >/dev/null 2>&1 || command -v stunnel >/dev/null 2>&1; then
        return 0
    fi
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        echo "kcodec: installing stunnel4 (TLS tests)" >&2
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q stunnel4; } \
            >/dev/null 2>&1 || echo "kcodec: stunnel4 could not be installed; TLS tests will skip" >&2
    fi
}
