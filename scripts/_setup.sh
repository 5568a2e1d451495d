# Sourced by scripts/test and scripts/run: a venv with everything, and an in-place build.
# Sets VENV (the venv directory) and VPY (its python). Works under bash on Linux, macOS and
# Windows (Git Bash: the venv's programs are in Scripts/ there, not bin/).

# Same reading as setup.py and kcodec/_impl.py: "", "0", "false", "no", "off" mean off.
kcodec_truthy() {
    local v
    v="$(printf '%s' "${1:-}" | tr '[:upper:]' '[:lower:]' | tr -d '[:space:]')"
    case "$v" in "" | 0 | false | no | off) return 1 ;; *) return 0 ;; esac
}

# pip, with what it does on standard error: each package it collects, downloads, builds and
# installs, and, while it is silent (a 400 MB download, pyspark's install), a line every
# KCODEC_PIP_HEARTBEAT seconds (default 15) saying it still works and on what. Dropped:
# "Requirement already satisfied" and "Using cached" (one a package, they bury the rest),
# and the lines the machine's pip configuration makes it print for every package its local
# indexes lack ("WARNING: Location '...' is ignored: it is neither a file nor a
# directory"). Everything else, and pip's exit status, pass through.
kcodec_pip() {
    local rc=0
    { PYTHONUNBUFFERED=1 PIP_PROGRESS_BAR=off "$VPY" -m pip --disable-pip-version-check "$@" \
        2>&1 | kcodec_pip_lines >&2; } || rc=$?
    return "$rc"
}

kcodec_pip_lines() {
    local line="" pending="" last="starting" waited=0 every="${KCODEC_PIP_HEARTBEAT:-15}" st
    while :; do
        if IFS= read -r -t "$every" line; then
            line="$pending$line"
            pending=""
            waited=0
        else
            st=$?
            if [ "$st" -le 128 ]; then          # end of pip's output
                [ -z "$pending$line" ] || printf '%s\n' "$pending$line"
                return 0
            fi
            pending="$pending$line"             # timed out, maybe inside a line
            waited=$((waited + every))
            echo "kcodec: pip is still working (${waited} s): $last"
            continue
        fi
        case "$line" in
            "WARNING: Location '"*"' is ignored"* | *"Requirement already satisfied"* | \
                *"Using cached "* | *"Stored in directory"* | *"Created wheel for"* | "") ;;
            *)
                printf '%s\n' "$line"
                last="${line#"${line%%[![:space:]]*}"}"
                [ "${#last}" -le 100 ] || last="${last:0:97}..."
                ;;
        esac
    done
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
        echo "kcodec: installing kcodec and its $extras dependencies into $VENV" \
            "(the first time takes minutes: pyspark alone is ~400 MB)" >&2
        kcodec_pip install --upgrade pip
        kcodec_pip install "setuptools>=77" "Cython>=3.1"
        # Editable install of the runtime and $extras dependencies. It compiles nothing
        # (KCODEC_NO_EXTENSIONS=1 for this step only): the one compile is kcodec_compile's,
        # in place, below, where the editable install finds it.
        # (setuptools warns about a package folder in the working directory: that folder is
        # the editable install's source, on purpose.)
        KCODEC_NO_EXTENSIONS=1 PYTHONWARNINGS="ignore:Editable installation" \
            kcodec_pip install --no-build-isolation -e ".[$extras]"
        touch "$stamp"
    fi
    if [ "$extras" = test ]; then
        kcodec_system_packages "stunnel4:the TLS tests' independent TLS terminator" \
            "prometheus:the observability tests' real Prometheus server" \
            "kcat:the reference kcodec consume -f's format strings are checked against" \
            "ccache:a compiler cache; without it each build the packaging tests make compiles from nothing"
        kcodec_compiler_cache
    fi
    if ! kcodec_truthy "${KCODEC_NO_EXTENSIONS:-}"; then
        kcodec_compile
    fi
}

# The test command's builds go through ccache where it is installed (KCODEC_CCACHE=0: not):
# the packaging tests build the extension four more times (the sdist's wheel, an isolated
# install, scripts/wheel, pip install .), each from the same C the in-place build compiled,
# and a cached compile takes seconds where a fresh one takes half a minute of both cores.
# ccache replays a cached compile's warnings too, so -Werror still fails on one. CC becomes
# "ccache" before the interpreter's own compiler command (flags and all), which setuptools,
# pip's isolated builds and the tests' subprocesses all inherit; a CC already set is kept.
kcodec_compiler_cache() {
    local cc
    kcodec_truthy "${KCODEC_CCACHE:-1}" || return 0
    [ -z "${CC:-}" ] || return 0
    command -v ccache >/dev/null 2>&1 || return 0
    cc="$("$VPY" -c 'import sysconfig; print(sysconfig.get_config_var("CC") or "")')"
    [ -n "$cc" ] || return 0
    export CC="ccache $cc"
    echo "kcodec: compiling through ccache (CC=\"$CC\"; KCODEC_CCACHE=0 to compile without it)" >&2
}

# The one compile of the extension, in place: a line per module compiled (none when all
# are up to date); the whole compiler output only when it fails.
kcodec_compile() {
    local log rc=0 total
    log="$(mktemp "${TMPDIR:-/tmp}/kcodec-build.XXXXXX")"
    total="$(ls kcodec/_cy/*.pyx 2>/dev/null | wc -l | tr -d ' ')"
    echo "kcodec: compiling the extension ($total modules, ${KCODEC_BUILD_JOBS:-2} at a time;" \
        "a minute or two the first time, nothing to do when up to date)" >&2
    { KCODEC_BUILD_JOBS="${KCODEC_BUILD_JOBS:-2}" PYTHONUNBUFFERED=1 \
        "$VPY" setup.py build_ext --inplace 2>&1 | tee "$log" | kcodec_build_lines "$total" >&2; } \
        || rc=$?
    if [ "$rc" -ne 0 ] || grep -q "^error:" "$log"; then
        echo "kcodec: compiling the extension failed; its output:" >&2
        tail -n 60 "$log" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}

kcodec_build_lines() {
    local line n=0 start=$SECONDS
    while IFS= read -r line; do
        case "$line" in
            "Compiling kcodec/"*".pyx because"* | "["*"] Cythonizing kcodec/"*)
                line="${line#*kcodec/}"
                echo "kcodec: translating kcodec/${line%%.pyx*}.pyx to C ($((SECONDS - start)) s)"
                ;;
            "building '"*"' extension"*)
                n=$((n + 1))
                line="${line#building \'}"
                echo "kcodec: compiling ${line%%\'*} ($n/$1, $((SECONDS - start)) s)"
                ;;
        esac
    done
}

# Debian packages some tests need, each given as "package:what it is for". Installed only
# when asked: KCODEC_INSTALL_SYSTEM_PACKAGES=1 (.ci/run sets it) runs apt-get install as root
# (with sudo when not root), and a failure then stops the script. Without it, the missing
# ones are named with the command that installs them, and their tests skip saying the same.
# Where there is no dpkg (not Debian or Ubuntu) nothing is checked: the tests say what they
# miss.
kcodec_system_packages() {
    local spec pkg missing=() why=()
    command -v dpkg-query >/dev/null 2>&1 || return 0
    for spec in "$@"; do
        pkg="${spec%%:*}"
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
            missing+=("$pkg")
            why+=("$pkg (${spec#*:})")
        fi
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    if ! kcodec_truthy "${KCODEC_INSTALL_SYSTEM_PACKAGES:-}"; then
        echo "kcodec: not installed: ${why[*]}; the tests that need them will skip." \
            "KCODEC_INSTALL_SYSTEM_PACKAGES=1 $0 installs them with apt-get" \
            "(or: sudo apt-get install ${missing[*]})" >&2
        return 0
    fi
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo -n"
    echo "kcodec: installing ${why[*]} with apt-get" >&2
    if ! { $sudo apt-get update -q \
            && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"; } \
            >&2; then
        echo "kcodec: could not install ${missing[*]} (KCODEC_INSTALL_SYSTEM_PACKAGES=1 asked" \
            "for it): install them yourself, or unset KCODEC_INSTALL_SYSTEM_PACKAGES to let" \
            "their tests skip" >&2
        return 1
    fi
}
