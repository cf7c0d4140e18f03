#!/usr/bin/env bash
# bench/attack.sh — the attack scenario of the rlproxy benchmark:
# 50 well-behaved clients with and without one over-limit attacker, through
# nginx limit_req (reference) and rlproxy (memory, Valkey). Settings: see run.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/run.sh" attack "$@"
