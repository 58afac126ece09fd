# airlock's bash bootstrap for a warm pool. policy.bashBoot starts the pooled sandbox's
# interpreter as
#
#	bash -c 'exec 5<<BOOT ...this file... BOOT; BASH_ENV=/dev/fd/5 exec <argv>'
#
# so the shell that waits is the program's own, `bash main.sh`, started exactly as a cold
# run starts it (the same argv, environment and working directory; the -c shell is gone
# with its exec). A non-interactive bash runs the file BASH_ENV names after binding its
# arguments and before it opens the script, so this file runs there: it says the shell
# has loaded on fd 4, waits on fd 3 for the program's argv (main.sh and its args, each
# NUL-terminated), makes the args the positional parameters, and leaves. Then bash opens
# main.sh (written into the workspace at the handover) and runs it as the script it is:
# $0, $-, BASH_SOURCE, FUNCNAME, caller and error messages are a script's, not a sourced
# file's.
#
# What it leaves as a cold run has it: fds 3-5 closed, BASH_ENV and its own variables
# unset, SECONDS counting from the handover, $_ the interpreter's path as at a shell's
# start, $? 0. What it cannot: PIPESTATUS is already set (0) when the script's first
# command runs, BASH_ARGC holds one 0 (bash keeps what BASH_ENV pushed; it means
# something only under extdebug), and declare -p shows SECONDS with the value it was
# given. TestPoolMatchesColdRun compares a pooled run's whole shell state with a cold
# one's and allows these three.
exec 5<&-
printf '\n' >&4
exec 4>&-
_airlock_argv=()
while IFS= read -r -d '' _airlock_arg <&3; do
	_airlock_argv+=("$_airlock_arg")
done
exec 3<&-
if [[ ${#_airlock_argv[@]} -eq 0 || ${_airlock_argv[0]} != "$0" ]]; then
	printf 'airlock: the pooled shell was handed %q, not %q\n' "${_airlock_argv[0]-}" "$0" >&2
	exit 125
fi
set -- "${_airlock_argv[@]:1}"
unset _airlock_arg _airlock_argv BASH_ENV
SECONDS=0
