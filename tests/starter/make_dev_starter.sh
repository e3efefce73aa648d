#!/usr/bin/env bash
# Rebuilds tests/starter/dev_starter.json.zst, the dev fixture the starter tests use until a real
# starter is shipped at share/kope/starter/memory.json.zst. It goes through the same pipeline as
# the real one (scripts/refresh_starter.sh), with a fake model: tests/e2e/fake_llm_server.py
# --echo-reference answers every kernel prompt with the reference source the prompt shows, and
# every reflection with tests/starter/fixtures/reflect.json. So the kernels are verified, correct
# and unoptimised (speedup about 1 on any machine), recorded with lineage, journals and a lesson.
#   tests/starter/make_dev_starter.sh [--kope build/kope]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
kope="$root/build/kope"
[ "${1:-}" = "--kope" ] && kope=$2
ops="relu,softmax,sum_rows,cumsum,transpose2d,mse_loss"
work=$(mktemp -d "${TMPDIR:-/tmp}/kope-dev-starter.XXXXXX")
python3 tests/e2e/fake_llm_server.py --fixtures tests/starter/fixtures --port-file "$work/port" --echo-reference &
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
cat > "$work/kope.toml" <<TOML
[llm.echo]
base_url = "http://127.0.0.1:$(cat "$work/port")/v1"
model = "echo-reference"
api_key_env = ""
context_window = 32000
max_output_tokens = 4000
max_retries = 1
TOML
scripts/refresh_starter.sh --kope "$kope" --profile echo --work "$work" --ops "$ops" --iterations 1 \
  --note "dev fixture: every answer is the op's reference.cpp, echoed from the prompt by tests/e2e/fake_llm_server.py --echo-reference" \
  --out "$root/tests/starter/dev_starter.json.zst" -- --seed 1 --eval-ci 0.2 --eval-max-seconds 0.5
