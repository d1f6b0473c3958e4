#!/usr/bin/env bash
# Billeting's one entry point for a fresh machine.
#
#   ./dev.sh up    [billeting up flags]      install if needed, then run the whole control plane
#   ./dev.sh test  [pytest args]             install if needed, then run pytest once per backend
#   ./dev.sh serve [billeting serve flags]   install if needed, then serve the Placement API alone
#
# Installation: .venv is created when missing. `up` installs what running
# Billeting needs plus Keystone (the identity extra, for the openstack CLI);
# `serve` only the former; `test` adds the test extras. uv does the install when
# it is on PATH or can be fetched into .venv (seconds with a warm cache), pip
# otherwise (BILLETING_INSTALLER=pip forces pip). A checksum of pyproject.toml per
# extras set (.venv/.billeting-<set>.sha256) keeps a second run from installing
# again until pyproject.toml changes.
#
# Backends for `test`: SQLite always; then PostgreSQL and MariaDB/MySQL
# (BILLETING_TEST_DB=postgresql / mysql, the local servers on 127.0.0.1).
# In CI (CI=true) or when BILLETING_TEST_BACKENDS="sqlite postgresql mysql"
# names them, every listed backend is mandatory. Otherwise a server backend
# that is not reachable is reported as skipped. BILLETING_TEST_JOBS=N runs
# each backend's tests in N parallel pytest-xdist workers.
set -euo pipefail

cd "$(dirname "$0")"
VENV=.venv

say() { printf 'dev.sh: %s\n' "$*" >&2; }

find_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    say "Python 3.11 or newer is required (set PYTHON=/path/to/python3.11)"
    return 1
}

# The uv to install with, or nothing when pip must do it.
find_uv() {
    [ "${BILLETING_INSTALLER:-}" = pip ] && return 0
    if command -v uv >/dev/null 2>&1; then
        command -v uv
    elif [ -x "$VENV/bin/uv" ]; then
        echo "$VENV/bin/uv"
    elif "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check uv >/dev/null 2>&1; then
        echo "$VENV/bin/uv"
    else
        say "could not fetch uv; installing with pip (slower)"
    fi
}

# ensure_venv SET: billeting installed with the extras SET ("run" = none, "identity", "test").
ensure_venv() {
    local set=$1 spec=. python
    [ "$set" = run ] || spec=".[$set]"
    if [ ! -x "$VENV/bin/python" ]; then
        python=$(find_python)
        say "creating $VENV with $python"
        "$python" -m venv "$VENV"
    fi
    local want stamp
    want=$(sha256sum pyproject.toml | cut -d' ' -f1)
    # the test set holds everything the others do, identity what run does
    local stamps=("$VENV/.billeting-$set.sha256" "$VENV/.billeting-test.sha256")
    [ "$set" = run ] && stamps+=("$VENV/.billeting-identity.sha256")
    for stamp in "${stamps[@]}"; do
        if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
            return 0
        fi
    done
    local started=$SECONDS uv
    uv=$(find_uv)
    if [ -n "$uv" ] && say "installing billeting ($set) into $VENV with uv" &&
        "$uv" pip install --python "$VENV/bin/python" -e "$spec"; then
        :
    else
        # uv may not reach an index pip is configured for (a mirror, find-links)
        say "installing billeting ($set) into $VENV with pip"
        "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar on -e "$spec"
    fi
    echo "$want" >"$VENV/.billeting-$set.sha256"
    say "installed in $((SECONDS - started)) s"
}

# Is the backend's local server answering? (2 s connect timeout)
reachable() {
    "$VENV/bin/python" - "$1" <<'EOF'
import sys
backend = sys.argv[1]
try:
    if backend == "postgresql":
        import psycopg
        psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", connect_timeout=2).close()
    elif backend == "mysql":
        import pymysql
        pymysql.connect(host="127.0.0.1", port=3306, user="root", connect_timeout=2).close()
except Exception as exc:  # any failure means: not usable here
    print(f"{backend}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
    sys.exit(1)
EOF
}

run_tests() {
    local mandatory=false backends="sqlite postgresql mysql"
    if [ -n "${BILLETING_TEST_BACKENDS:-}" ]; then
        mandatory=true
        backends=$BILLETING_TEST_BACKENDS
    elif [ "${CI:-}" = "true" ]; then
        mandatory=true
    fi
    local jobs=()
    if [ -n "${BILLETING_TEST_JOBS:-}" ]; then
        jobs=(-n "$BILLETING_TEST_JOBS")
    fi

    local failed=0 summary=() backend rc
    for backend in $backends; do
        case $backend in
        sqlite | postgresql | mysql) ;;
        *)
            say "unknown backend '$backend' (use sqlite, postgresql, mysql)"
            return 2
            ;;
        esac
        if [ "$backend" != sqlite ] && ! reachable "$backend"; then
            if $mandatory; then
                say "$backend is not reachable on 127.0.0.1 and is mandatory here"
                summary+=("$backend: FAILED (server not reachable)")
                failed=1
            else
                say "$backend is not reachable on 127.0.0.1; skipping it (see README: starting the local servers)"
                summary+=("$backend: skipped (server not reachable)")
            fi
            continue
        fi
        say "running the test suite on $backend"
        rc=0
        BILLETING_TEST_DB=$backend "$VENV/bin/python" -m pytest "${jobs[@]}" "$@" || rc=$?
        case $rc in
        0) summary+=("$backend: passed") ;;
        5)
            summary+=("$backend: FAILED (no tests were collected)")
            failed=1
            ;;
        *)
            summary+=("$backend: FAILED (pytest exit status $rc)")
            failed=1
            ;;
        esac
    done
    say "summary:"
    local line
    for line in "${summary[@]}"; do
        say "  $line"
    done
    return $failed
}

usage() {
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
}

command=${1:-}
[ $# -gt 0 ] && shift
case $command in
up)
    ensure_venv identity
    exec "$VENV/bin/billeting" up "$@"
    ;;
serve)
    ensure_venv run
    exec "$VENV/bin/billeting" serve "$@"
    ;;
test)
    ensure_venv test
    run_tests "$@"
    ;;
-h | --help | help)
    usage
    ;;
*)
    usage >&2
    exit 2
    ;;
esac
