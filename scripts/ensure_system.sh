#!/usr/bin/env bash
# Makes sure the system packages busconsole needs are present; called by `make setup`.
#
#   python3 >= 3.11 with venv   required (Debian: python3-venv)
#   redis-server >= 7.0         required for `make run` and `make test` (Debian: redis-server)
#   redis-sentinel              the Sentinel failover tests and bench, tests/sentinel/ (Debian: redis-sentinel;
#                               without it they run redis-server --sentinel)
#   /usr/bin/chromium           browser tests (Debian: chromium)
#   java >= 17                  PySpark, for the pipeline and its tests (Debian: openjdk-17-jre-headless)
#   nginx, openssl              the reverse-proxy tests: deploy/nginx/busconsole.conf over TLS (Debian: nginx, openssl)
#                               openssl also makes the certificates of tests/tls/ and bench/tls.py (Redis over TLS)
#   PostgreSQL server           the least-privilege and upgrade tests, `make test-postgres` (Debian: postgresql)
#   prometheus, promtool        the Prometheus tests: a real scrape, the alert rules' unit tests (Debian: prometheus)
#   node >= 20.19, npm          the single sign-on tests' OpenID provider, tests/oidc/ (Debian: nodejs, npm)
#   slapd                       the LDAP login tests' directory, tests/slapd/ (Debian: slapd)
#   libldap, libsasl2 headers   python-ldap builds against them (requirements-ldap.txt; Debian: libldap2-dev,
#   and a C compiler            libsasl2-dev, gcc, and python3-dev for a Debian python3)
#
# A missing package is installed with apt-get only when running as root; otherwise this prints what to
# install and fails for the required ones, warns for the others. When nothing is missing it installs
# nothing and touches no package index, so repeated runs take a fraction of a second.
set -euo pipefail

PYTHON=${PYTHON:-python3}
missing=()   # Debian packages to install
failed=0

say() { printf 'ensure_system: %s\n' "$*" >&2; }

version_at_least() {  # version_at_least HAVE WANT  (dotted versions)
    [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

redis_version() {
    redis-server --version 2>/dev/null | sed -n 's/.* v=\([0-9][0-9.]*\).*/\1/p'
}

java_major() {  # "17.0.15" -> 17, "1.8.0_392" -> 8
    local v
    v=$(java -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n1)
    case "$v" in
        1.*) v=${v#1.}; echo "${v%%.*}" ;;
        *) v=${v%%.*}; echo "${v%%[!0-9]*}" ;;
    esac
}

python_ok() { "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }
venv_ok() { "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; }
redis_ok() { command -v redis-server >/dev/null && version_at_least "$(redis_version)" 7.0; }
sentinel_ok() { command -v redis-sentinel >/dev/null; }
chromium_ok() { [ -x /usr/bin/chromium ]; }
java_ok() { command -v java >/dev/null && [ "$(java_major)" -ge 17 ] 2>/dev/null; }
nginx_ok() { command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; }
openssl_ok() { command -v openssl >/dev/null; }
postgres_ok() { ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null; }
prometheus_ok() { command -v prometheus >/dev/null && command -v promtool >/dev/null; }
node_ok() { command -v node >/dev/null && command -v npm >/dev/null; }
slapd_ok() { [ -x /usr/sbin/slapd ]; }
ldap_headers_ok() { [ -f /usr/include/ldap.h ] && [ -f /usr/include/sasl/sasl.h ]; }
cc_ok() { command -v gcc >/dev/null; }
python_headers_ok() { "$PYTHON" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; }
node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

java_package() {  # Debian 13 has no openjdk-17; fall back to its default JRE (21)
    if apt-cache show openjdk-17-jre-headless >/dev/null 2>&1; then
        echo openjdk-17-jre-headless
    else
        echo default-jre-headless
    fi
}

check_all() {
    missing=()
    if ! python_ok; then
        say "ERROR: $PYTHON must be Python 3.11 or newer (found: $("$PYTHON" --version 2>/dev/null || echo none))."
        say "       Install Python 3.11+ or run with PYTHON=/path/to/python3.11 make ..."
        exit 1
    fi
    venv_ok || missing+=(python3-venv)
    redis_ok || missing+=(redis-server)
    sentinel_ok || missing+=(redis-sentinel)
    chromium_ok || missing+=(chromium)
    java_ok || missing+=(java)
    nginx_ok || missing+=(nginx)
    openssl_ok || missing+=(openssl)
    postgres_ok || missing+=(postgresql)
    prometheus_ok || missing+=(prometheus)
    node_ok || missing+=(nodejs)
    slapd_ok || missing+=(slapd)
    ldap_headers_ok || missing+=(libldap2-dev libsasl2-dev)
    cc_ok || missing+=(gcc)
    python_headers_ok || missing+=(python3-dev)
    if node_ok && [ "$(node_major)" -lt 20 ]; then  # Debian 12's nodejs is 18: apt-get cannot help here
        say "WARNING: node $(node -v) is too old for oidc-provider 9 (tests/oidc/): the single sign-on tests need Node 20.19+ (Debian 13's nodejs, or NodeSource's)."
    fi
}

check_all
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    say "installing missing system packages: ${missing[*]}"
    apt-get update -qq >/dev/null
    packages=()
    for name in "${missing[@]}"; do
        case "$name" in
            java) packages+=("$(java_package)") ;;
            chromium) packages+=(chromium fonts-liberation) ;;
            nodejs) packages+=(nodejs npm) ;;
            *) packages+=("$name") ;;
        esac
    done
    apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
    check_all
    [ ${#missing[@]} -eq 0 ] && exit 0
fi

for name in "${missing[@]}"; do
    case "$name" in
        python3-venv)
            say "ERROR: $PYTHON cannot create virtual environments: install python3-venv (apt-get install python3-venv)."
            failed=1 ;;
        redis-server)
            if command -v redis-server >/dev/null; then
                say "ERROR: redis-server $(redis_version) is too old: busconsole needs Redis 7.0 or newer."
            else
                say "ERROR: redis-server is not on PATH: install Redis 7.0+ (apt-get install redis-server)."
            fi
            failed=1 ;;
        redis-sentinel)
            say "WARNING: redis-sentinel is missing: the Sentinel tests run redis-server --sentinel instead (apt-get install redis-sentinel)." ;;
        chromium)
            say "WARNING: /usr/bin/chromium is missing: browser tests will fail (apt-get install chromium)." ;;
        java)
            say "WARNING: no Java 17+ runtime: the Spark pipeline and its tests will fail (apt-get install openjdk-17-jre-headless)." ;;
        nginx|openssl)
            say "WARNING: $name is missing: the reverse-proxy tests will fail (apt-get install $name)." ;;
        postgresql)
            say "WARNING: no PostgreSQL server: its privilege and upgrade tests will fail (apt-get install postgresql)." ;;
        prometheus)
            say "WARNING: prometheus/promtool missing: the Prometheus tests will fail (apt-get install prometheus)." ;;
        nodejs)
            say "WARNING: node/npm missing: the single sign-on tests will fail (apt-get install nodejs npm)." ;;
        slapd)
            say "WARNING: slapd is missing: the LDAP login tests will fail (apt-get install slapd)." ;;
        libldap2-dev|libsasl2-dev|gcc|python3-dev)
            say "ERROR: $name is missing: python-ldap (requirements-ldap.txt) cannot be built (apt-get install $name)."
            failed=1 ;;
    esac
done
exit "$failed"
