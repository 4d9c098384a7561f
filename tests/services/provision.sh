#!/usr/bin/env bash
# Install the system packages the tests need when they are missing (apt, as root).
# The tests themselves start and stop each service; under CI=true a missing one fails them.
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null \
  || missing+=(postgresql)
# The email tests run their own Dovecot (IMAP + LMTP delivery) on private ports.
[[ -x /usr/sbin/dovecot ]] || missing+=(dovecot-imapd)
compgen -G "/usr/lib/dovecot/lmtp" >/dev/null || missing+=(dovecot-lmtpd)
# The console's browser tests drive Debian's headless Chromium through Playwright.
command -v chromium >/dev/null || missing+=(chromium)
# `make bench` (provision.sh --bench) loads the gateway with wrk, a C load generator.
if [[ "${1:-}" == "--bench" ]]; then
  command -v wrk >/dev/null || missing+=(wrk)
fi

if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "provision: missing ${missing[*]}; install them (needs root) or the tests that use them skip" >&2
  exit 0
fi
echo "provision: installing ${missing[*]}"

# The tests start their own instances: keep the distro's services from starting on install.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi

apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

# Belt and braces, in case a service was started anyway (e.g. an existing policy allowed it).
if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
  systemctl disable --now dovecot.service dovecot.socket >/dev/null 2>&1 || true
fi
