#!/bin/sh
# Kiln's MCP client as the MCP conformance suite's client checks run it:
#   conformance client --command "sh servers/conformance_client.sh" --scenario NAME
# The suite appends the URL of its scenario's server and names the scenario in
# MCP_CONFORMANCE_SCENARIO; KILN is the `kiln` binary. The server is mounted
# as `s` (`--mcp s=URL`), so its tools are `s_<tool>`; each scenario's program
# does what the scenario asks of a client.
set -eu
url="$1"
case "${MCP_CONFORMANCE_SCENARIO:-}" in
  tools_call) program='return await tools.s_add_numbers({a: 2, b: 3})' ;;
  sse-retry) program='return await tools.s_test_reconnection({})' ;;
  elicitation-sep1034-client-defaults) program='return await tools.s_test_client_elicitation_defaults({})' ;;
  *) program='return Object.keys(tools)' ;;
esac
echo "$program" | exec "${KILN:-kiln}" run - --mcp "s=$url"
