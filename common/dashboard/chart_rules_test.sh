#!/usr/bin/env bash
# Runs the chart rules' unit tests (chart_rules_test.js) in Node.
set -euo pipefail
if ! command -v node >/dev/null 2>&1; then
  echo "chart_rules_test: node is not installed (tools/install_test_deps.sh installs it)" >&2
  exit 1
fi
exec node common/dashboard/chart_rules_test.js
