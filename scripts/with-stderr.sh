#!/bin/sh
# with-stderr.sh LOG CMD [ARG...]: runs CMD with its stderr appended to LOG. The MCP
# Inspector's CLI discards the stderr of the server it starts, so a server that exits at
# start (a refusal names its cause there) would otherwise leave CI no reason to show.
log=$1
shift
exec "$@" 2>>"$log"
