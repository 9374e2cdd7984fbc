#!/usr/bin/env bash
# Scan a small index in CI and write SARIF (GitHub code scanning), JUnit (GitLab, Jenkins)
# and the HTML report. The gate fails the job when the recommended chain lets attacks
# reach the context: --fail-on is checked against the 95% Wilson upper bound, so with 8
# questions only a chain that stopped every attack passes "attack_reaches>0.4" (0/8 has
# an upper bound of 0.32; 1/8 of 0.47).
#
#   usage: examples/ci/scan.sh [OUT_DIR]        (RAGSHIELD overrides the command)
# Replace the corpus and questions with your own; the index is built fresh each run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-scan-ci}"
rs="${RAGSHIELD:-ragshield}"
corpus="${CORPUS:-$(python -c 'from ragshield.demo import demo_files; print(demo_files()[0])')}"
work="$(mktemp -d .ragshield-ci-XXXXXX)"  # in the workspace: SARIF locations stay relative
trap 'rm -rf "$work"' EXIT

$rs index "$corpus" --out "$work/index"
$rs scan "$work/index" --questions "$here/questions.jsonl" --writer template \
  --attacks clean,poisonedrag,mixed-2x,injection-prefixed,suffix \
  --defenses "none;ragdefender;ragdefender,ecosaferag" \
  --format html,json,sarif,junit --out "$out" \
  --fail-on "attack_reaches>0.4"
