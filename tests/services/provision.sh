#!/usr/bin/env bash
# Install the system packages the tests need when they are missing (apt, as root).
# The tests themselves start and stop each service; under CI=true a missing one fails them.
set -euo pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null \
  || missing+=(postgresql)

if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "provision: missing ${missing[*]}; install them (needs root) or the tests that use them skip" >&2
  exit 0
fi
echo "provision: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
